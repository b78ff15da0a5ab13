#include "format.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "result.hpp"

namespace attn {

void append_fixed(std::string& out, double x, int decimals) {
  if (!std::isfinite(x)) throw ContractError("format_fixed: non-finite value");
  if (decimals < 0 || decimals > kMaxDecimals) throw ContractError("format_fixed: decimals out of range");
  // DBL_MAX has 309 integer digits; with the sign, point and decimals this always fits.
  char buffer[309 + 2 + kMaxDecimals + 8];
  // std::to_chars with a precision rounds the exact binary value once, ties to even (C++17 [charconv]).
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, x, std::chars_format::fixed, decimals);
  if (ec != std::errc{}) throw ContractError("format_fixed: buffer too small");
  const char* begin = buffer;
  // A negative value that rounds to zero prints "-0.00"; the problems want "0.00".
  if (*begin == '-' &&
      std::all_of(begin + 1, static_cast<const char*>(end), [](char c) { return c == '0' || c == '.'; })) {
    ++begin;
  }
  out.append(begin, static_cast<std::size_t>(end - begin));
}

std::string format_fixed(double x, int decimals) {
  std::string out;
  append_fixed(out, x, decimals);
  return out;
}

std::string format_rows(std::span<const double> values, std::size_t cols, int decimals) {
  std::string out;
  out.reserve(values.size() * static_cast<std::size_t>(decimals + 8));
  for (std::size_t i = 0; i < values.size(); ++i) {
    append_fixed(out, values[i], decimals);
    out += (i + 1) % cols == 0 ? '\n' : ' ';
  }
  return out;
}

}  // namespace attn
