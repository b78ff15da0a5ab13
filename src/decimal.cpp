#include "decimal.hpp"

#include <algorithm>
#include <cstdint>

#include "scanner.hpp"

namespace attn {
namespace {

// Exponents are read with saturation: anything past this is out of range either way.
constexpr std::int64_t kExponentSaturation = 1'000'000'000;

// What one pass over a token tells: strict (is_strict_decimal) and, beyond that, canonical (no
// trailing zero after the point). Pointer loops: the only integer comparison per byte is the digit
// test (coverage-instrumented builds trace each one; this runs once or twice per input number).
struct Shape {
  bool strict = false;
  bool canonical = false;
};

Shape shape_of(std::string_view token) {
  const char* p = token.data();
  const char* const end = p + token.size();
  const bool negative = p != end && *p == '-';
  if (negative) ++p;
  const char* const integer = p;
  unsigned digit_bits = 0;  // the OR of every digit's value: zero exactly when all digits are '0'
  while (p != end && is_digit(*p)) digit_bits |= static_cast<unsigned>(*p++ - '0');
  if (p == integer) return {};
  if (*integer == '0' && p - integer > 1) return {};  // leading zero
  bool canonical = true;
  if (p != end && *p == '.') {
    const char* const fraction = ++p;
    while (p != end && is_digit(*p)) digit_bits |= static_cast<unsigned>(*p++ - '0');
    if (p == fraction) return {};  // "1."
    canonical = p[-1] != '0';
  }
  if (p != end) return {};
  if (negative && digit_bits == 0) return {};  // "-0", "-0.00"
  return {true, canonical};
}

}  // namespace

Decimal parse_decimal(std::string_view token) {
  Decimal out;
  // Fast path for what judge files hold: a token already canonical ("-12.5", "3", "0.25").
  // Under 300 characters its magnitude is below 10^300 and, when nonzero, above 10^-300.
  if (token.size() < 300 && shape_of(token).canonical) {
    out.status = DecimalStatus::ok;
    out.negative = token[0] == '-';
    out.canonical.assign(token.data(), token.size());
    return out;
  }
  std::size_t i = 0;
  if (i < token.size() && (token[i] == '+' || token[i] == '-')) {
    out.negative = token[i] == '-';
    ++i;
  }
  // Collect the mantissa digits (integer and fraction together) and where the point was.
  auto digit_run = [&] {
    const std::size_t start = i;
    while (i < token.size() && is_digit(token[i])) ++i;
    return token.substr(start, i - start);
  };
  std::string digits(digit_run());
  const std::size_t integer_digits = digits.size();
  if (i < token.size() && token[i] == '.') {
    ++i;
    digits += digit_run();
  }
  if (digits.empty()) return out;  // "", "+", ".", "-.e5"
  std::int64_t exponent = 0;
  if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    bool exponent_negative = false;
    if (i < token.size() && (token[i] == '+' || token[i] == '-')) exponent_negative = token[i++] == '-';
    if (i == token.size() || !is_digit(token[i])) return out;
    while (i < token.size() && is_digit(token[i])) {
      exponent = std::min(exponent * 10 + (token[i++] - '0'), kExponentSaturation);
    }
    if (exponent_negative) exponent = -exponent;
  }
  if (i != token.size()) return out;

  // value = 0.DIGITS x 10^point after stripping leading zeros.
  std::int64_t point = static_cast<std::int64_t>(integer_digits) + exponent;
  // Plain loops: find_first_not_of calls memchr once per character.
  std::size_t first = 0;
  while (first < digits.size() && digits[first] == '0') ++first;
  if (first == digits.size()) {
    out.status = DecimalStatus::ok;
    out.canonical.assign(1, '0');  // not = "0": GCC 12 raises a false -Wrestrict (PR105329)
    return out;
  }
  point -= static_cast<std::int64_t>(first);
  std::size_t last = digits.size() - 1;
  while (digits[last] == '0') --last;
  std::string_view significant(digits.data() + first, last - first + 1);
  // The value lies in [10^(point-1), 10^point).
  if (point > 308) {
    out.status = DecimalStatus::too_large;
    return out;
  }
  if (point - 1 < kMinNonzeroExponent) {
    out.status = DecimalStatus::too_small;
    return out;
  }
  std::string text = out.negative ? "-" : "";
  const auto length = static_cast<std::int64_t>(significant.size());
  if (point <= 0) {
    text += "0.";
    text.append(static_cast<std::size_t>(-point), '0');
    text += significant;
  } else if (point >= length) {
    text += significant;
    text.append(static_cast<std::size_t>(point - length), '0');
  } else {
    text += significant.substr(0, static_cast<std::size_t>(point));
    text += '.';
    text += significant.substr(static_cast<std::size_t>(point));
  }
  out.status = DecimalStatus::ok;
  out.canonical = std::move(text);
  return out;
}

bool is_strict_decimal(std::string_view token) { return shape_of(token).strict; }

int compare_magnitude(std::string_view a, std::string_view b) {
  if (!a.empty() && a[0] == '-') a.remove_prefix(1);
  if (!b.empty() && b[0] == '-') b.remove_prefix(1);
  const std::size_t a_point = std::min(a.find('.'), a.size());
  const std::size_t b_point = std::min(b.find('.'), b.size());
  // Canonical integer parts have no leading zeros (except a lone "0"), so length orders them.
  if (a_point != b_point) return a_point < b_point ? -1 : 1;
  const int by_integer = a.substr(0, a_point).compare(b.substr(0, b_point));
  if (by_integer != 0) return by_integer < 0 ? -1 : 1;
  // Canonical fractions have no trailing zeros, so plain string order is numeric order.
  const std::string_view a_fraction = a_point < a.size() ? a.substr(a_point + 1) : std::string_view{};
  const std::string_view b_fraction = b_point < b.size() ? b.substr(b_point + 1) : std::string_view{};
  const int by_fraction = a_fraction.compare(b_fraction);
  return by_fraction < 0 ? -1 : (by_fraction > 0 ? 1 : 0);
}

}  // namespace attn
