// The lenient reader's properties, shared by reader_ai006, reader_ai031 and reader_general.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "instance_io.hpp"
#include "solve.hpp"

namespace attn::fuzz {

/// Reads input leniently at the CLI's default limits for problem and checks:
/// rejected -> the error is positioned inside the input (require_positioned);
/// accepted -> write_instance gives strict-valid text (at a fraction-digit limit that covers its
/// decimals; beyond the default limit strict reading refuses it) that reads back (strictly and leniently) to
/// the same Instance, writing is idempotent, and solving gives finite values (inside the limits a
/// finite input never yields NaN or Inf: README, "Commands", on the value bounds).
inline void check_lenient_reader(const std::uint8_t* data, std::size_t size, Problem problem) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const Limits limits = default_limits(problem);
  const Result<Instance> read = read_instance(input, problem, limits, Strictness::lenient);
  if (!read) {
    require_positioned(read.error(), input);
    return;
  }
  const Instance& instance = read.value();
  const std::string text = write_instance(instance);
  // The lenient reader takes any number of digits after a point; the strict one at most the limit.
  std::size_t fraction = 0;
  for (std::size_t at = text.find('.'); at != std::string::npos; at = text.find('.', at + 1)) {
    std::size_t end = at + 1;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    fraction = std::max(fraction, end - at - 1);
  }
  if (fraction > limits.max_fraction_digits) {
    const Result<Instance> refused = read_instance(text, problem, limits, Strictness::strict);
    require(!refused && refused.error().to_string().find("digits after the point") != std::string::npos,
            "strict reading refuses more digits after a point than the limit", text);
  }
  Limits wide = limits;
  wide.max_fraction_digits = std::max(limits.max_fraction_digits, fraction);
  const Result<Instance> strict = read_instance(text, problem, wide, Strictness::strict);
  if (!strict) property_failed("write_instance output is strict-valid", strict.error().to_string() + "\n" + text);
  require(strict.value() == instance, "strict re-read of write_instance gives the same instance", text);
  const Result<Instance> lenient = read_instance(text, problem, limits, Strictness::lenient);
  require(lenient.ok() && lenient.value() == instance, "lenient re-read gives the same instance", text);
  require(write_instance(strict.value()) == text, "write_instance is idempotent", text);

  const Solution solution = solve(instance);
  for (double value : solution.values) require(std::isfinite(value), "accepted input gives finite output", text);
}

}  // namespace attn::fuzz
