// The fixed-decimal formatter (format_fixed, format_rows). Input: byte 0 picks decimals in
// [-1, kMaxDecimals + 1] (the ends are invalid), byte 1 the columns, then 8-byte IEEE doubles.
// Properties: non-finite values and invalid decimals throw ContractError; otherwise the text
// is -?(0|[1-9]D*)(.D{k})?, never "-0…", and is the exact binary value rounded once to k decimals,
// ties to even (checked exactly with big integers, not with another formatter); format_rows is
// format_fixed joined by single spaces and '\n'.
#include <boost/multiprecision/cpp_int.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "format.hpp"
#include "fuzz_check.hpp"
#include "result.hpp"

namespace {

using attn::fuzz::require;
using boost::multiprecision::cpp_int;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// Shape: an optional '-', an integer part without leading zeros, then '.' and exactly
/// `decimals` digits when decimals > 0; no '-' on a value that shows as zero.
void check_shape(const std::string& text, double x, int decimals) {
  std::size_t i = text.size() > 0 && text[0] == '-' ? 1 : 0;
  const std::size_t integer_start = i;
  while (i < text.size() && is_digit(text[i])) ++i;
  const std::size_t integer_length = i - integer_start;
  require(integer_length >= 1, "an integer part", text);
  require(integer_length == 1 || text[integer_start] != '0', "no leading zeros", text);
  if (decimals > 0) {
    require(i < text.size() && text[i] == '.', "a point before the decimals", text);
    ++i;
    const std::size_t fraction_start = i;
    while (i < text.size() && is_digit(text[i])) ++i;
    require(i - fraction_start == static_cast<std::size_t>(decimals), "exactly k decimals", text);
  }
  require(i == text.size(), "nothing but sign, digits and point", text);
  if (text[0] == '-') {
    require(text.find_first_of("123456789") != std::string::npos, "no \"-0\"", text);
    require(x < 0, "a minus sign only on a negative value", text);
  }
}

/// Exactness: with N the printed digits as an integer, |x·10^k − N| ≤ 1/2, and N even at a tie.
/// x = M·2^E exactly (M a 53-bit integer); multiply through by 2·2^max(0,−E) to stay in integers.
void check_rounding(const std::string& text, double x, int decimals) {
  int exponent = 0;
  const double fraction = std::frexp(x, &exponent);
  const auto mantissa = static_cast<std::int64_t>(std::ldexp(fraction, 53));  // exact: |x| < 2^53 · 2^E
  const int binary_exponent = exponent - 53;
  const unsigned shift = binary_exponent < 0 ? static_cast<unsigned>(-binary_exponent) : 0u;

  cpp_int printed = 0;
  for (char c : text) {
    if (is_digit(c)) printed = printed * 10 + (c - '0');
  }
  if (text[0] == '-') printed = -printed;

  cpp_int scaled_x = mantissa;  // x · 10^k · 2^shift
  scaled_x *= pow(cpp_int(10), static_cast<unsigned>(decimals));
  if (binary_exponent > 0) scaled_x <<= binary_exponent;
  const cpp_int difference = 2 * (scaled_x - (printed << shift));  // 2·2^shift·(x·10^k − N)
  const cpp_int half = cpp_int(1) << shift;                        // 2^shift · (1/2) · 2
  require(abs(difference) <= half, "correctly rounded to k decimals", text);
  if (abs(difference) == half) require((printed & 1) == 0, "ties go to even", text);
}

bool throws_contract_error(double x, int decimals) {
  try {
    (void)attn::format_fixed(x, decimals);
  } catch (const attn::ContractError&) {
    return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int decimals = static_cast<int>(data[0] % (attn::kMaxDecimals + 3)) - 1;
  std::vector<double> values((size - 2) / 8);
  for (std::size_t i = 0; i < values.size(); ++i) std::memcpy(&values[i], data + 2 + 8 * i, sizeof(double));
  if (values.empty()) return 0;
  const std::size_t cols = 1 + data[1] % values.size();

  bool all_valid = decimals >= 0 && decimals <= attn::kMaxDecimals;
  std::string joined;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double x = values[i];
    if (!std::isfinite(x) || decimals < 0 || decimals > attn::kMaxDecimals) {
      require(throws_contract_error(x, decimals), "non-finite value or bad decimals throws ContractError");
      all_valid = false;
      continue;
    }
    const std::string text = attn::format_fixed(x, decimals);
    check_shape(text, x, decimals);
    check_rounding(text, x, decimals);
    joined += text;
    joined += (i + 1) % cols == 0 ? '\n' : ' ';
  }
  if (all_valid) {
    require(attn::format_rows(values, cols, decimals) == joined, "format_rows joins format_fixed", joined);
  }
  return 0;
}
