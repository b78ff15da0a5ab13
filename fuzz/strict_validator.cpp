// The strict validator (`attncheck validate`), run for all three problems on every input, so the
// corpus is plain judge files. Properties: strict-valid input is lenient-valid with the same
// Instance; it is laid out exactly as write_instance lays it out (same lines, same tokens, numbers
// differing at most by trailing zeros after the point); rejected input has a positioned error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "instance_io.hpp"
#include "scanner.hpp"

namespace {

using attn::fuzz::require;

/// Tokens and the whitespace between them: strict layout is fully determined by the instance.
std::vector<std::string_view> split_keeping_separators(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < text.size()) {
    const bool space = attn::is_space(text[i]);
    std::size_t j = i;
    while (j < text.size() && attn::is_space(text[j]) == space) ++j;
    parts.push_back(text.substr(i, j - i));
    i = j;
  }
  return parts;
}

/// True when written is token, or token is written with trailing zeros after the point
/// ("1.50" for "1.5", "2.0" for "2") — the one liberty is_strict_decimal allows.
bool same_up_to_trailing_zeros(std::string_view token, std::string_view written) {
  if (token == written) return true;
  if (token.size() <= written.size() || token.substr(0, written.size()) != written) return false;
  std::string_view rest = token.substr(written.size());
  if (written.find('.') == std::string_view::npos) {
    if (rest[0] != '.') return false;
    rest.remove_prefix(1);
    if (rest.empty()) return false;
  }
  return rest.find_first_not_of('0') == std::string_view::npos;
}

void check_strict(std::string_view input, attn::Problem problem) {
  const attn::Limits limits = attn::default_limits(problem);
  const auto strict = attn::read_instance(input, problem, limits, attn::Strictness::strict);
  if (!strict) {
    attn::fuzz::require_positioned(strict.error(), input);
    return;
  }
  const auto lenient = attn::read_instance(input, problem, limits, attn::Strictness::lenient);
  require(lenient.ok(), "strict-valid input is lenient-valid", lenient ? "" : lenient.error().to_string());
  require(lenient.value() == strict.value(), "strict and lenient readers give the same instance");

  const std::string written = attn::write_instance(strict.value());
  const auto input_parts = split_keeping_separators(input);
  const auto written_parts = split_keeping_separators(written);
  require(input_parts.size() == written_parts.size(), "strict-valid input has write_instance's layout", written);
  for (std::size_t i = 0; i < input_parts.size(); ++i) {
    require(same_up_to_trailing_zeros(input_parts[i], written_parts[i]),
            "strict-valid input has write_instance's tokens and separators",
            std::string(input_parts[i]) + " vs " + std::string(written_parts[i]));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (attn::Problem problem : {attn::Problem::ai006, attn::Problem::ai031, attn::Problem::general}) {
    check_strict(input, problem);
  }
  return 0;
}
