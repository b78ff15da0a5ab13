// The output checker (`attncheck check`): arbitrary contestant bytes against valid instances.
// Byte 0 picks one of a few fixed instances (their certificates are computed once); the rest is
// the contestant's output. Properties: check_output returns a verdict and never throws; ok means
// every token is the canonical string and acceptable that every token is canonical or the
// certified alternative, both only in the documented layout; a token that is not
// -?(0|[1-9]D*).D{k} without "-0.0…", or a wrong token count, is a presentation error — never
// ok, acceptable or wrong answer.
#include "judge/checker.hpp"

#include <algorithm>
#include <array>
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
using attn::verify::VerdictKind;

struct Case {
  attn::Problem problem;
  const char* input;
};

// The lesson samples, an all-masked row, an exact tie at 2 decimals (mean of 0.12 and 0.13),
// and a general instance with 0 decimals and a batch of two.
constexpr std::array<Case, 6> kCases{{
    {attn::Problem::ai006, "3 2\n1 0\n0 1\n1 1\n1 0\n0 1\n1 1\n1 2\n3 4\n5 6\n"},
    {attn::Problem::ai006, "3 1\n1\n1\n1\n0\n0\n10\n1\n2\n100\n"},
    {attn::Problem::ai031, "2 4 2\n1 0 1 1\n0 1 2 0\n1 0 1 1\n1 1 2 0\n1 2 2 2\n3 0 2 2\n0 0\n1 1\n"},
    {attn::Problem::ai031, "2 1 1\n1\n1\n1\n1\n0.12\n0.13\n1 1\n1 0\n"},
    {attn::Problem::ai031, "2 2 1\n-8 8\n8 -8\n0.5 -0.5\n-0.5 0.5\n-0.001 1000\n0.004 -1000\n1 1\n1 1\n"},
    {attn::Problem::general, "2 1 2 1 2 1 0\nnone sqrt qkv\n1\n0\n0\n1 2\n3 4\n2\n1\n-1\n-2 -3\n5 -7\n"},
}};

const attn::verify::Certificate& certificate(std::size_t index) {
  static const std::vector<attn::verify::Certificate> certificates = [] {
    std::vector<attn::verify::Certificate> out;
    for (const Case& c : kCases) {
      const auto read = attn::read_instance(c.input, c.problem, attn::default_limits(c.problem));
      if (!read) attn::fuzz::property_failed("checker case is valid", read.error().to_string());
      out.push_back(attn::verify::certify(read.value()));
    }
    return out;
  }();
  return certificates[index];
}

/// -?(0|[1-9]D*).D{decimals} (no point when decimals = 0), and not a negative zero.
bool well_formed(std::string_view token, int decimals) {
  std::size_t i = token.size() > 0 && token[0] == '-' ? 1 : 0;
  const std::size_t start = i;
  while (i < token.size() && token[i] >= '0' && token[i] <= '9') ++i;
  if (i == start || (i - start > 1 && token[start] == '0')) return false;
  if (decimals > 0) {
    if (i == token.size() || token[i] != '.') return false;
    const std::size_t point = ++i;
    while (i < token.size() && token[i] >= '0' && token[i] <= '9') ++i;
    if (i - point != static_cast<std::size_t>(decimals)) return false;
  }
  if (i != token.size()) return false;
  return !(token[0] == '-' && token.find_first_of("123456789") == std::string_view::npos);
}

/// The documented layout: `rows` lines of `cols` tokens joined by single spaces; only trailing
/// ' ', '\t', '\r' on a line and blank lines at the end are tolerated (checker.hpp).
bool laid_out(std::string_view text, std::size_t rows, std::size_t cols) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.size() != rows) return false;
  for (std::string_view line : lines) {
    std::size_t count = 1;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] != ' ') continue;
      if (i == 0 || line[i - 1] == ' ' || i + 1 == line.size()) return false;
      ++count;
    }
    if (line.empty() || count != cols) return false;
  }
  return true;
}

std::vector<std::string_view> tokens_of(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && attn::is_space(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !attn::is_space(text[i])) ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto& cert = certificate(data[0] % kCases.size());
  const std::string_view output(reinterpret_cast<const char*>(data + 1), size - 1);
  const attn::verify::Verdict verdict = attn::verify::check_output(cert, output);

  const auto tokens = tokens_of(output);
  bool all_well_formed = tokens.size() == cert.cells.size();
  for (std::string_view token : tokens) all_well_formed = all_well_formed && well_formed(token, cert.decimals);
  if (!all_well_formed) {
    require(verdict.kind == VerdictKind::presentation_error, "a malformed output is a presentation error",
            verdict.message);
  }
  if (verdict.kind == VerdictKind::ok || verdict.kind == VerdictKind::acceptable) {
    require(laid_out(output, cert.rows, cert.cols), "ok/acceptable only for the documented layout", verdict.message);
    bool used_alternative = false;
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      const auto& cell = cert.cells[k];
      const bool canonical = tokens[k] == cell.canonical;
      const bool alternative = cell.ambiguous && !cell.alternative.empty() && tokens[k] == cell.alternative;
      require(canonical || (verdict.kind == VerdictKind::acceptable && alternative),
              "ok/acceptable only for canonical or certified alternative values", tokens[k]);
      used_alternative = used_alternative || !canonical;
    }
    require(used_alternative == (verdict.kind == VerdictKind::acceptable), "acceptable iff an alternative is used",
            verdict.message);
  }
  return 0;
}
