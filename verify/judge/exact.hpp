// Exact decimal arithmetic for the oracle: inputs as integers over a power of ten, exact dot
// products grouped by equal score, exact decimal rounding of rationals. Nothing here goes through
// a double, and nothing here is shared with the production kernel.
#pragma once

#include <boost/multiprecision/gmp.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "problem.hpp"

namespace attn::verify {

/// Arbitrary-precision integer (GMP through Boost.Multiprecision).
using Integer = boost::multiprecision::mpz_int;

/// The integer written by a run of decimal digits (leading zeros allowed; never read as octal).
/// Throws ContractError when `digits` is not such a run.
[[nodiscard]] Integer integer_from_digits(const std::string& digits);

/// 10^exponent, exponent >= 0: a reference into this thread's cache of the powers asked for,
/// valid for the thread's lifetime (the oracle asks for the same few powers for every block).
/// Throws ContractError for a negative exponent.
[[nodiscard]] const Integer& power_of_ten(long exponent);

/// An exact decimal: mantissa · 10^-exponent, exponent >= 0.
struct ScaledDecimal {
  Integer mantissa;
  long exponent = 0;
};

/// Reads a canonical decimal text -?(0|[1-9]D*)(.D+)? (as Matrix::text holds it) exactly.
/// Throws ContractError on a text with no digits or with anything but a sign, digits and one point.
[[nodiscard]] ScaledDecimal parse_scaled(std::string_view canonical);

/// A matrix of decimals over one common power of ten: entry (r, c) = m[r·cols + c] · 10^-exponent,
/// the integers m held in exactly one of two forms.
struct ScaledMatrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  long exponent = 0;
  /// As int64 when every |m| < 2^26 (exact_block then sums in int64: hd < 2^11 products < 2^52
  /// each, or fewer than 2^37 values, cannot overflow), else empty.
  std::vector<std::int64_t> narrow;
  /// As GMP integers when narrow is empty, else empty (a judge instance's thousands of small
  /// values then cost no GMP allocation).
  std::vector<Integer> values;

  /// Entry (r, c)'s integer for GMP: into values, or a narrow entry set into scratch.
  [[nodiscard]] mpz_srcptr integer(std::size_t r, std::size_t c, Integer& scratch) const {
    const std::size_t i = r * cols + c;
    if (narrow.empty()) return values[i].backend().data();
    mpz_set_si(scratch.backend().data(), narrow[i]);
    return scratch.backend().data();
  }
};

/// The matrix's exact decimal texts over their largest number of fractional digits. Throws
/// ContractError on a text parse_scaled rejects (never for a matrix read by read_instance).
[[nodiscard]] ScaledMatrix scale_matrix(const Matrix& matrix);

/// The divisor of the scores, exactly: 1, √radicand (radicand = d_k/h), or a positive decimal.
struct ExactDivisor {
  ScaleKind kind = ScaleKind::none;
  std::size_t radicand = 1;
  ScaledDecimal value;
};

/// The same divisor: kind, radicand and explicit value all equal (as the cached tables key on).
[[nodiscard]] inline bool operator==(const ExactDivisor& a, const ExactDivisor& b) {
  return a.kind == b.kind && a.radicand == b.radicand && a.value.exponent == b.value.exponent &&
         a.value.mantissa == b.value.mantissa;
}

/// An instance with every input held exactly. Keeps a pointer to `instance`, which must outlive it.
struct ExactInstance {
  const Instance* instance = nullptr;
  ExactDivisor divisor;
  std::vector<ScaledMatrix> Q, K, V;  ///< one per batch item
};

/// Converts every decimal of the instance exactly. Throws ContractError on a matrix text or scale text
/// parse_scaled rejects (never for an instance read by read_instance).
[[nodiscard]] ExactInstance make_exact(const Instance& instance);

/// One query row and one head: its visible keys, their exact dot products, and the keys grouped
/// by exactly equal dot product (equal scores), largest first.
struct ExactBlock {
  std::size_t batch = 0, row = 0, head = 0;
  std::size_t head_k = 0;         ///< columns of Q and K in the head (hd)
  std::size_t head_v = 0;         ///< columns of V and of the output in the head
  std::vector<std::size_t> keys;  ///< visible keys, in input order
  std::vector<Integer> dot;       ///< q·k per visible key, over 10^-dot_exponent
  std::vector<Integer> abs_dot;   ///< Σ_c |q_c k_c| per visible key, over 10^-dot_exponent
  long dot_exponent = 0;
  std::vector<std::size_t> group_of;    ///< group index of each visible key
  std::vector<Integer> group_dot;       ///< the distinct dot products, strictly decreasing
  std::vector<std::size_t> group_size;  ///< keys per group
  /// groups x head_v: Σ of V over the group, over 10^-value_exponent, held in exactly one of two
  /// forms (as ScaledMatrix's entries). As int64 when V is narrow (ScaledMatrix::narrow), else
  /// empty: the fast pass and the rational test read these directly.
  std::vector<std::int64_t> narrow_value_sum;
  /// As GMP integers when narrow_value_sum is empty; then the first groups x head_v entries count.
  /// Never shrinks (entries past them are left over from a larger block): a reused block keeps its
  /// integers' storage instead of freeing and allocating them again from block to block.
  std::vector<Integer> group_value_sum;
  long value_exponent = 0;

  /// Σ of V over `group` in head column c, over 10^-value_exponent, for GMP: group_value_sum's
  /// entry, or a narrow sum set into scratch.
  [[nodiscard]] const Integer& value_sum(std::size_t group, std::size_t c, Integer& scratch) const {
    const std::size_t i = group * head_v + c;
    if (narrow_value_sum.empty()) return group_value_sum[i];
    mpz_set_si(scratch.backend().data(), narrow_value_sum[i]);
    return scratch;
  }
};

/// The block of query `row` of batch item `batch` in head `head`.
[[nodiscard]] ExactBlock exact_block(const ExactInstance& exact, std::size_t batch, std::size_t row, std::size_t head);

/// The same block written into `out`, reusing its storage (a loop over blocks then allocates
/// almost nothing).
void exact_block(const ExactInstance& exact, std::size_t batch, std::size_t row, std::size_t head, ExactBlock& out);

/// True when output column c of the block is a rational number: every group has the same mean
/// Σ V / size (see the Lindemann–Weierstrass argument in oracle.cpp). Then the value is that mean.
[[nodiscard]] bool is_rational_cell(const ExactBlock& block, std::size_t c);

/// num/den (den > 0) rounded to an integer, ties to even; tie is set when num/den is exactly halfway.
[[nodiscard]] Integer round_half_even(const Integer& num, const Integer& den, bool& tie);

/// scaled · 10^-decimals as fixed text with exactly `decimals` digits after the point; zero is
/// "0.00", never "-0.00".
[[nodiscard]] std::string fixed_text(const Integer& scaled, int decimals);
/// The same for a scaled value held in an int64 (no GMP integer to build).
[[nodiscard]] std::string fixed_text(std::int64_t scaled, int decimals);

/// Positional text of ±0.d1d2…dN × 10^exponent (MPFR's digit convention): no exponent notation,
/// every given digit kept.
[[nodiscard]] std::string positional_text(bool negative, std::string_view digits, long exponent);

/// num/den (den > 0) to `significant` significant digits, correctly rounded (ties to even), in
/// positional notation; zero is "0".
[[nodiscard]] std::string significant_text(const Integer& num, const Integer& den, int significant);

/// Numeric order of two fixed texts -?(0|[1-9]D*)(.D+)? with the same number of decimals: -1, 0, 1.
[[nodiscard]] int compare_fixed(std::string_view a, std::string_view b);

}  // namespace attn::verify
