#include "judge/exact.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <unordered_map>

#include "judge/rules.hpp"
#include "result.hpp"
#include "scanner.hpp"

namespace attn::verify {

Integer integer_from_digits(const std::string& digits) {
  Integer out;
  // Base 10 explicitly: Boost's string constructor would read "066" as octal.
  if (mpz_set_str(out.backend().data(), digits.c_str(), 10) != 0) {
    throw ContractError("integer_from_digits: not a run of digits");
  }
  return out;
}

const Integer& power_of_ten(long exponent) {
  if (exponent < 0) throw ContractError("power_of_ten: negative exponent");
  // Node-based: references stay valid as the cache grows.
  thread_local std::unordered_map<long, Integer> powers;
  auto [entry, added] = powers.try_emplace(exponent);
  if (added) mpz_ui_pow_ui(entry->second.backend().data(), 10, static_cast<unsigned long>(exponent));
  return entry->second;
}

namespace {

// A plain decimal with at most 18 digits as an int64 mantissa over 10^-exponent; false for
// anything else (longer, or not a plain decimal: parse_scaled then decides, and throws).
bool parse_small(std::string_view text, std::int64_t& mantissa, long& exponent) {
  const char* p = text.data();
  const char* const end = p + text.size();
  const bool negative = p != end && *p == '-';
  if (p != end && (*p == '-' || *p == '+')) ++p;
  std::int64_t value = 0;
  int digits = 0;
  long fraction = 0;
  bool seen_point = false;
  for (; p != end; ++p) {
    if (*p == '.' && !seen_point) {
      seen_point = true;
    } else if (is_digit(*p) && digits < 18) {
      value = value * 10 + (*p - '0');  // below 10^18 < 2^63
      ++digits;
      if (seen_point) ++fraction;
    } else {
      return false;
    }
  }
  if (digits == 0) return false;
  mantissa = negative ? -value : value;
  exponent = fraction;
  return true;
}

}  // namespace

ScaledDecimal parse_scaled(std::string_view canonical) {
  ScaledDecimal out;
  // Up to 18 digits the mantissa is an int64 (10^18 < 2^63): judge inputs have a handful, and a
  // GMP string conversion per input number was a fifth of a max AI006 oracle run.
  std::int64_t small = 0;
  if (parse_small(canonical, small, out.exponent)) {
    out.mantissa = small;
    return out;
  }
  bool negative = false;
  std::size_t i = 0;
  if (i < canonical.size() && (canonical[i] == '-' || canonical[i] == '+')) negative = canonical[i++] == '-';
  std::string digits;
  digits.reserve(canonical.size());
  bool seen_point = false;
  for (; i < canonical.size(); ++i) {
    const char c = canonical[i];
    if (c == '.' && !seen_point) {
      seen_point = true;
    } else if (c >= '0' && c <= '9') {
      digits += c;
      if (seen_point) ++out.exponent;
    } else {
      throw ContractError("parse_scaled: not a plain decimal: " + std::string(canonical.substr(0, 40)));
    }
  }
  if (digits.empty()) throw ContractError("parse_scaled: empty decimal");
  out.mantissa = integer_from_digits(digits);
  if (negative) out.mantissa = -out.mantissa;
  return out;
}

namespace {

// scale_matrix for the common case: every text has at most 18 digits and every mantissa, brought
// to the common exponent, still fits an int64. No GMP arithmetic and no digit strings; false when
// the case does not apply (out is then untouched but for rows and cols).
bool scale_small(const Matrix& matrix, ScaledMatrix& out) {
  const std::size_t count = matrix.text.size();
  std::vector<std::int64_t> mantissas(count);
  std::vector<long> exponents(count);
  long top = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (!parse_small(matrix.text[i], mantissas[i], exponents[i])) return false;
    top = std::max(top, exponents[i]);
  }
  constexpr std::int64_t kNarrow = std::int64_t{1} << 26;
  bool narrow = true;
  for (std::size_t i = 0; i < count; ++i) {
    for (long e = exponents[i]; e < top; ++e) {
      if (__builtin_mul_overflow(mantissas[i], 10, &mantissas[i])) return false;
    }
    narrow = narrow && mantissas[i] > -kNarrow && mantissas[i] < kNarrow;
  }
  out.exponent = top;
  if (narrow) {
    out.narrow = std::move(mantissas);
  } else {
    out.values.reserve(count);
    for (const std::int64_t m : mantissas) out.values.emplace_back(m);
  }
  return true;
}

}  // namespace

ScaledMatrix scale_matrix(const Matrix& matrix) {
  ScaledMatrix out;
  out.rows = matrix.rows;
  out.cols = matrix.cols;
  if (scale_small(matrix, out)) return out;
  std::vector<ScaledDecimal> parsed;
  parsed.reserve(matrix.text.size());
  for (const std::string& text : matrix.text) {
    parsed.push_back(parse_scaled(text));
    out.exponent = std::max(out.exponent, parsed.back().exponent);
  }
  out.values.reserve(parsed.size());
  for (ScaledDecimal& value : parsed) {
    if (value.exponent != out.exponent) value.mantissa *= power_of_ten(out.exponent - value.exponent);
    out.values.push_back(std::move(value.mantissa));
  }
  out.narrow.reserve(out.values.size());
  for (const Integer& value : out.values) {
    if (mpz_sizeinbase(value.backend().data(), 2) > 26) {  // not surely below 2^26
      out.narrow.clear();
      break;
    }
    out.narrow.push_back(mpz_get_si(value.backend().data()));
  }
  if (!out.narrow.empty()) out.values.clear();
  return out;
}

ExactInstance make_exact(const Instance& instance) {
  ExactInstance exact;
  exact.instance = &instance;
  exact.divisor.kind = scale_rule(instance);
  exact.divisor.radicand = sqrt_radicand(instance);
  if (exact.divisor.kind == ScaleKind::explicit_value) exact.divisor.value = parse_scaled(instance.scale_text);
  for (const BatchItem& item : instance.batch) {
    exact.Q.push_back(scale_matrix(item.Q));
    exact.K.push_back(scale_matrix(item.K));
    exact.V.push_back(scale_matrix(item.V));
  }
  return exact;
}

ExactBlock exact_block(const ExactInstance& exact, std::size_t batch, std::size_t row, std::size_t head) {
  ExactBlock block;
  exact_block(exact, batch, row, head, block);
  return block;
}

void exact_block(const ExactInstance& exact, std::size_t batch, std::size_t row, std::size_t head, ExactBlock& block) {
  const Instance& instance = *exact.instance;
  const ScaledMatrix& Q = exact.Q[batch];
  const ScaledMatrix& K = exact.K[batch];
  const ScaledMatrix& V = exact.V[batch];
  block.batch = batch;
  block.row = row;
  block.head = head;
  const HeadColumns columns = head_columns(instance, head);
  block.head_k = columns.k_count;
  block.head_v = columns.v_count;
  block.dot_exponent = Q.exponent + K.exponent;
  block.value_exponent = V.exponent;
  // Integers already in `block` are assigned in place (resize keeps them), so a reused block
  // allocates next to nothing.
  block.keys.clear();
  for (std::size_t j = 0; j < instance.m; ++j) {
    if (key_visible(instance, batch, row, j)) block.keys.push_back(j);
  }
  const std::size_t k = block.keys.size();
  block.dot.resize(k);
  block.abs_dot.resize(k);
  const std::size_t q0 = columns.k_first;
  // int64 is exact for these sums (see ScaledMatrix::narrow); the general case uses GMP.
  const bool narrow_dots = !Q.narrow.empty() && !K.narrow.empty() && block.head_k < (std::size_t{1} << 11);
  Integer q_scratch, k_scratch, v_scratch;  // for a narrow matrix's entries on the GMP paths
  for (std::size_t t = 0; t < k; ++t) {
    const std::size_t j = block.keys[t];
    if (narrow_dots) {
      std::int64_t sum = 0, abs_sum = 0;
      for (std::size_t c = q0; c < q0 + block.head_k; ++c) {
        const std::int64_t product = Q.narrow[row * Q.cols + c] * K.narrow[j * K.cols + c];
        sum += product;
        abs_sum += product < 0 ? -product : product;
      }
      mpz_set_si(block.dot[t].backend().data(), sum);
      mpz_set_si(block.abs_dot[t].backend().data(), abs_sum);
      continue;
    }
    const auto dot = block.dot[t].backend().data();
    const auto abs_dot = block.abs_dot[t].backend().data();
    mpz_set_ui(dot, 0);
    mpz_set_ui(abs_dot, 0);
    for (std::size_t c = q0; c < q0 + block.head_k; ++c) {
      // In place (mpz_addmul / mpz_submul): no temporary per product.
      const auto q = Q.integer(row, c, q_scratch);
      const auto key = K.integer(j, c, k_scratch);
      mpz_addmul(dot, q, key);
      if (mpz_sgn(q) * mpz_sgn(key) >= 0) {
        mpz_addmul(abs_dot, q, key);
      } else {
        mpz_submul(abs_dot, q, key);
      }
    }
  }

  // Group equal dot products: sort the visible keys by dot product, largest first, and merge runs.
  std::vector<std::size_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return block.dot[a] > block.dot[b]; });
  block.group_of.assign(k, 0);
  std::size_t groups = 0;
  for (std::size_t i = 0; i < k; ++i) {
    if (i == 0 || block.dot[order[i]] != block.dot[order[i - 1]]) ++groups;
    block.group_of[order[i]] = groups - 1;
  }
  block.group_dot.resize(groups);
  block.group_size.assign(groups, 0);
  for (std::size_t t = 0; t < k; ++t) {
    block.group_dot[block.group_of[t]] = block.dot[t];
    ++block.group_size[block.group_of[t]];
  }
  // Σ V per group and head column; in int64 when V is narrow and fewer than 2^37 keys are summed.
  const std::size_t cells = groups * block.head_v;
  const std::size_t v0 = head * block.head_v;
  block.narrow_value_sum.clear();
  if (!V.narrow.empty() && k < (std::size_t{1} << 37)) {
    std::vector<std::int64_t>& sums = block.narrow_value_sum;
    sums.assign(cells, 0);
    for (std::size_t t = 0; t < k; ++t) {
      for (std::size_t c = 0; c < block.head_v; ++c) {
        sums[block.group_of[t] * block.head_v + c] += V.narrow[block.keys[t] * V.cols + v0 + c];
      }
    }
  } else {
    if (block.group_value_sum.size() < cells) block.group_value_sum.resize(cells);
    for (std::size_t i = 0; i < cells; ++i) mpz_set_ui(block.group_value_sum[i].backend().data(), 0);
    for (std::size_t t = 0; t < k; ++t) {
      for (std::size_t c = 0; c < block.head_v; ++c) {
        const auto sum = block.group_value_sum[block.group_of[t] * block.head_v + c].backend().data();
        mpz_add(sum, sum, V.integer(block.keys[t], v0 + c, v_scratch));
      }
    }
  }
}

bool is_rational_cell(const ExactBlock& block, std::size_t c) {
  // Equal means c_g / n_g = c_0 / n_0, compared without division: in 128 bits when the sums are
  // int64 (|c_g| < 2^63 and n_g < 2^37, so each product is below 2^100), else with GMP.
  if (!block.narrow_value_sum.empty()) {
    const auto sum = [&](std::size_t g) { return static_cast<__int128>(block.narrow_value_sum[g * block.head_v + c]); };
    for (std::size_t g = 1; g < block.group_dot.size(); ++g) {
      if (sum(g) * static_cast<__int128>(block.group_size[0]) != sum(0) * static_cast<__int128>(block.group_size[g])) {
        return false;
      }
    }
    return true;
  }
  for (std::size_t g = 1; g < block.group_dot.size(); ++g) {
    const Integer& sum = block.group_value_sum[g * block.head_v + c];
    if (sum * block.group_size[0] != block.group_value_sum[c] * block.group_size[g]) return false;
  }
  return true;
}

Integer round_half_even(const Integer& num, const Integer& den, bool& tie) {
  Integer quotient;
  Integer remainder;
  // Floor division (remainder in [0, den)), so the comparison below is the same for either sign.
  mpz_fdiv_qr(quotient.backend().data(), remainder.backend().data(), num.backend().data(), den.backend().data());
  const Integer twice = 2 * remainder;
  const int half = twice.compare(den);
  tie = half == 0;
  if (half > 0 || (half == 0 && mpz_odd_p(quotient.backend().data()))) ++quotient;
  return quotient;
}

namespace {

// sign, then the digits of |scaled| with a point before the last `decimals` of them.
std::string fixed_from_digits(bool negative, std::string digits, int decimals) {
  const auto width = static_cast<std::size_t>(decimals) + 1;
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  std::string out = negative ? "-" : "";
  out += digits.substr(0, digits.size() - static_cast<std::size_t>(decimals));
  if (decimals > 0) {
    out += '.';
    out += digits.substr(digits.size() - static_cast<std::size_t>(decimals));
  }
  return out;
}

}  // namespace

std::string fixed_text(const Integer& scaled, int decimals) {
  const mpz_srcptr z = scaled.backend().data();
  // |scaled| below 2^64 (the common case) prints without GMP's string conversion; mpz_get_ui
  // returns the absolute value's low limb.
  static_assert(sizeof(unsigned long) == 8, "64-bit unsigned long assumed");
  return fixed_from_digits(
      scaled < 0, mpz_sizeinbase(z, 2) <= 64 ? std::to_string(mpz_get_ui(z)) : Integer(abs(scaled)).str(), decimals);
}

std::string fixed_text(std::int64_t scaled, int decimals) {
  // |scaled| as unsigned: well defined for INT64_MIN too.
  const std::uint64_t magnitude =
      scaled < 0 ? 0 - static_cast<std::uint64_t>(scaled) : static_cast<std::uint64_t>(scaled);
  return fixed_from_digits(scaled < 0, std::to_string(magnitude), decimals);
}

std::string positional_text(bool negative, std::string_view digits, long exponent) {
  std::string out = negative ? "-" : "";
  const auto length = static_cast<long>(digits.size());
  if (exponent <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-exponent), '0');
    out += digits;
  } else if (exponent >= length) {
    out += digits;
    out.append(static_cast<std::size_t>(exponent - length), '0');
  } else {
    out += digits.substr(0, static_cast<std::size_t>(exponent));
    out += '.';
    out += digits.substr(static_cast<std::size_t>(exponent));
  }
  return out;
}

std::string significant_text(const Integer& num, const Integer& den, int significant) {
  if (num == 0) return "0";
  const Integer magnitude = Integer(abs(num));
  // Find e with 10^(e-1) <= |num|/den < 10^e, starting from the digit counts (off by at most one).
  long exponent = static_cast<long>(magnitude.str().size()) - static_cast<long>(den.str().size());
  auto at_least = [&](long e) {  // |num|/den >= 10^e ?
    return e >= 0 ? magnitude >= den * power_of_ten(e) : magnitude * power_of_ten(-e) >= den;
  };
  while (at_least(exponent)) ++exponent;
  while (!at_least(exponent - 1)) --exponent;
  // Scale so the first `significant` digits form the integer part, then round once.
  const long shift = significant - exponent;
  Integer scaled_num = magnitude;
  Integer scaled_den = den;
  if (shift >= 0) {
    scaled_num *= power_of_ten(shift);
  } else {
    scaled_den *= power_of_ten(-shift);
  }
  bool tie = false;
  Integer digits = round_half_even(scaled_num, scaled_den, tie);
  // Rounding up can carry into a new digit (9.99 -> 10.0): drop the last digit, exponent grows.
  std::string text = digits.str();
  if (static_cast<long>(text.size()) > significant) {
    text.pop_back();
    ++exponent;
  }
  return positional_text(num < 0, text, exponent);
}

int compare_fixed(std::string_view a, std::string_view b) {
  const bool a_negative = !a.empty() && a[0] == '-';
  const bool b_negative = !b.empty() && b[0] == '-';
  if (a_negative != b_negative) return a_negative ? -1 : 1;
  if (a_negative) {
    a.remove_prefix(1);
    b.remove_prefix(1);
  }
  // Same number of decimals and no leading zeros: longer means larger, then digit by digit.
  int magnitude = a.size() != b.size() ? (a.size() < b.size() ? -1 : 1) : (a < b ? -1 : (a > b ? 1 : 0));
  return a_negative ? -magnitude : magnitude;
}

}  // namespace attn::verify
