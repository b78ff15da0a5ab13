// Interval arithmetic on doubles, rounded outwards, and a rigorous enclosure of e^x: the
// vocabulary of the tensor oracle's fast first pass (tensor_oracle_fast.cpp). Each operation is
// evaluated in round-to-nearest (the default mode, never changed) and its result moved one double
// outwards: the rounding error is at most half the spacing of doubles next to the result (one
// subnormal step at most below 2^-1022, so an underflow to 0 is covered by ±2^-1074), hence the
// widened result contains the exact one. No libm function is trusted for accuracy: e^x is
// enclosed by an argument reduction and a Taylor polynomial with a proven remainder (the
// derivation is in double_interval.cpp), its constants derived with MPFR at first use.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "numeric/interval.hpp"
#include "result.hpp"

namespace attn::verify {

/// A factor covering fewer than 2^16 roundings to nearest, (1 + 2^-53)^(2^16) < 1 + 2^-20: bounds
/// evaluated in round-to-nearest from non-negative terms are multiplied by it, then stepped up.
inline constexpr double kRoundingSafety = 1 + 0x1p-20;

/// The largest double below x (+inf gives the largest finite double; -inf and NaN stay).
[[nodiscard]] inline double next_down(double x) {
  if (x == 0) return -std::numeric_limits<double>::denorm_min();
  if (!(std::fabs(x) <= std::numeric_limits<double>::max())) {
    return x > 0 ? std::numeric_limits<double>::max() : x;
  }
  const auto bits = std::bit_cast<std::uint64_t>(x);
  return std::bit_cast<double>(x > 0 ? bits - 1 : bits + 1);
}

/// The smallest double above x.
[[nodiscard]] inline double next_up(double x) { return -next_down(-x); }

/// A double >= next_up(x) for finite x >= 0, without branches (so loops over it vectorize):
/// x·(1 + 2^-51) rounds to at least x + ulp(x) for a normal x, and to x or above for a subnormal
/// one, where adding 2^-1074 is exact.
[[nodiscard]] inline double up_bound(double x) { return x * (1 + 0x1p-51) + std::numeric_limits<double>::denorm_min(); }

/// [a.lo + b.lo, a.hi + b.hi], outwards.
[[nodiscard]] inline Interval add(Interval a, Interval b) { return {next_down(a.lo + b.lo), next_up(a.hi + b.hi)}; }

/// a·b, outwards.
[[nodiscard]] inline Interval multiply(Interval a, Interval b) {
  const double p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  double lo = p[0], hi = p[0];  // as std::min and std::max over the list (a NaN product is skipped unless first)
  for (int k = 1; k < 4; ++k) lo = p[k] < lo ? p[k] : lo, hi = hi < p[k] ? p[k] : hi;
  return {next_down(lo), next_up(hi)};
}

/// a·b for a.lo, b.lo >= 0 (products of exponentials), outwards: two products instead of four.
[[nodiscard]] inline Interval multiply_nonnegative(Interval a, Interval b) {
  return {next_down(a.lo * b.lo), next_up(a.hi * b.hi)};
}

/// a / b for b.lo > 0, outwards.
[[nodiscard]] inline Interval divide_by_positive(Interval a, Interval b) {
  return {next_down(a.lo / (a.lo >= 0 ? b.hi : b.lo)), next_up(a.hi / (a.hi >= 0 ? b.lo : b.hi))};
}

/// γ_n = n·u / (1 - n·u) for u = 2^-53 (Higham, Accuracy and Stability of Numerical Algorithms,
/// 2nd ed., Lemma 3.1), rounded upwards; +inf when n·u >= 1/2.
[[nodiscard]] double gamma_of(double n);

/// Bounds for a sum of n products x_i·y_i of doubles evaluated in round-to-nearest double, in any
/// order, FMA or not, from the computed Σ |fl(x_i·y_i)| (any order): the exact A = Σ |x_i y_i| and
/// |computed - exact| <= γ_n·A + n·2^-1075 (derivation in double_interval.cpp).
class ProductSumBound {
 public:
  /// For sums of n terms.
  explicit ProductSumBound(std::size_t n);
  /// An upper bound of the exact Σ |x_i y_i|.
  [[nodiscard]] double abs_upper(double computed_abs_sum) const {
    return next_up((computed_abs_sum + underflow_) * abs_factor_);
  }
  /// An upper bound of |computed Σ x_i y_i - exact Σ x_i y_i|.
  [[nodiscard]] double error(double computed_abs_sum) const {
    return next_up((gamma_ * abs_upper(computed_abs_sum) + underflow_) * kRoundingSafety);
  }

 private:
  double underflow_ = 0;   // n·2^-1074, exact
  double abs_factor_ = 0;  // (1 + γ_2n)·kRoundingSafety, rounded up
  double gamma_ = 0;       // γ_n, rounded up
};

/// Σ_i x_i y_i enclosed, and an upper bound of Σ_i |x_i y_i|: summed in round-to-nearest double in
/// four partial sums (any order is covered by `bound`, made for n terms) with the computed
/// Σ |fl(x_i y_i)|, then widened by bound.error (the tensor oracle's Step 1).
struct DotEnclosure {
  Interval value;
  double abs_upper = 0;
};
[[nodiscard]] inline DotEnclosure dot_enclosure(const double* x, const double* y, std::size_t n,
                                                const ProductSumBound& bound) {
  double sum[4] = {0, 0, 0, 0}, abs[4] = {0, 0, 0, 0};
  std::size_t c = 0;
  for (; c + 4 <= n; c += 4) {
    for (std::size_t lane = 0; lane < 4; ++lane) {
      const double term = x[c + lane] * y[c + lane];
      sum[lane] += term;
      abs[lane] += std::fabs(term);
    }
  }
  for (; c < n; ++c) {
    const double term = x[c] * y[c];
    sum[0] += term;
    abs[0] += std::fabs(term);
  }
  const double total = (sum[0] + sum[1]) + (sum[2] + sum[3]);
  const double abs_total = (abs[0] + abs[1]) + (abs[2] + abs[3]);
  const double error = bound.error(abs_total);
  return {{next_down(total - error), next_up(total + error)}, bound.abs_upper(abs_total)};
}

/// An enclosure of e^x for any double x: lo <= e^x <= hi. For x in [-708, 709] (a normal result)
/// hi / lo - 1 < 2^-44. -inf gives [0, 0], x < -746 gives [0, 2^-1074], x > 709 gives [lo, +inf],
/// 0 gives [1, 1]. Throws ContractError for NaN.
[[nodiscard]] Interval exp_enclosure(double x);

/// The exact Σ of n non-negative terms from the round-to-nearest sums of their lower and upper ends
/// (any order: each within γ_{n-1} relative of the exact one), so Σ lies in
/// [lo_sum (1 - γ_n), hi_sum (1 + 2γ_n)] (1/(1 - γ) <= 1 + 2γ for γ <= 1/2), rounded outwards.
[[nodiscard]] inline Interval nonnegative_sum(double lo_sum, double hi_sum, std::size_t n) {
  const double count = static_cast<double>(n);
  return {next_down(lo_sum * next_down(1 - gamma_of(count))), next_up(hi_sum * next_up(1 + 2 * gamma_of(count)))};
}

/// log x for every x in [a.lo, a.hi], a.lo > 0, rounded outwards (MPFR's correctly rounded log of
/// each end, directed).
[[nodiscard]] Interval log_enclosure(Interval a);

/// [tanh(a.lo), tanh(a.hi)] rounded outwards (tanh is increasing): from exp_enclosure(-2|x|) as
/// (1 - t)/(1 + t), or x - x³/3 <= tanh x <= x - x³/3 + 2x⁵/15 for 0 <= x <= 2^-10 (the alternating
/// series).
[[nodiscard]] Interval tanh_enclosure(Interval a);

}  // namespace attn::verify
