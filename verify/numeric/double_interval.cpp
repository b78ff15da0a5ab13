#include "numeric/double_interval.hpp"

#include <mpfr.h>

#include <algorithm>
#include <array>

#include "numeric/mpfr.hpp"
#include "result.hpp"

// Error bounds. Round-to-nearest double: fl(a ∘ b) = (a ∘ b)(1 + δ) + η, |δ| <= u = 2^-53,
// |η| <= 2^-1075, δη = 0, and η = 0 for + and - (a sum below 2^-1022 is exact) (Higham, §2.1).
//
// Sums of products (ProductSumBound). n products rounded once each, then added in any order:
// every term passes through at most n - 1 additions (a leaf of a binary tree with n leaves is at
// depth <= n - 1; adding to an initial 0 is exact), so the computed ŝ = Σ (x_i y_i (1 + θ_n) + η_i
// (1 + θ_{n-1})) and |ŝ - Σ x_i y_i| <= γ_n A + n·2^-1074 with A = Σ |x_i y_i| (1 + γ_n < 2).
// A from the computed â = Σ |fl(x_i y_i)|(1 + θ_{n-1}): |fl(x_i y_i)| >= |x_i y_i|(1 - u) - 2^-1075,
// so A <= (â / (1 - γ_{n-1}) + n·2^-1075) / (1 - u) <= (â + n·2^-1074)(1 + γ_{2n}), because
// γ_{n-1} + u <= 2nu whenever (n - 1)u <= 1/2.
// Evaluating the bounds. They are computed in round-to-nearest from non-negative quantities with
// fewer than 16 roundings, so a factor 1 + 2^-20 > (1 + u)^16 and a final step up cover them.
//
// The exponential (exp_enclosure). For x in [-746, 709]:
// Step 1 (reduction). n = nearbyint(x·log2 e) (any integer keeps what follows rigorous; this one
// gives |x - n ln 2| <= ln 2 / 2 + 2^-40). ln 2 = L1 + L2 + L3 with L1 = ln 2 cut to 32 significant
// bits, L2 = (ln 2 - L1) rounded to nearest, |L3| <= 2^-80 (all three derived with MPFR at 256 bits
// and checked at first use). n·L1 is exact (|n| < 2^11, 43 bits); r1 = fl(x - n·L1), r = fl(r1 -
// fl(n·L2)). The exact r* = x - n ln 2 differs from r by at most u|r1| + u|n L2| + u|r| + |n L3| <=
// 0.72u + 2^-72 + 2^-69 < u =: ε_r (|r1|, |r| <= 0.35, |n L2| < 2^11·2^-32).
// Step 2 (polynomial). P(r) = Σ_{i<=13} c_i r^i with c_i = 1/i! rounded to nearest, by Horner in
// double (two roundings a step, no FMA): |P̂ - Σ c_i r^i| <= γ_26 Σ |c_i||r|^i (Higham eq. (5.3)),
// |c_i - 1/i!| <= u/i!, and the Taylor remainder is <= |r|^14/14!·e^|r|. Relative to e^r >= e^-0.35,
// for |r| <= 0.35: (γ_26 (1 + u) + u)·e^0.7 + 0.35^14/14!·e^0.7 < 6.1e-15 < 2^-47 =: ε_p.
// Step 3 (assembly). e^x = 2^n e^{r*} and e^{r*} = e^r e^{r* - r} lies in [P̂ e^{-ε_r}/(1 + ε_p),
// P̂ e^{ε_r}/(1 - ε_p)] ⊂ [P̂ (1 - 2^-46), P̂ (1 + 2^-46)] (ε_p + ε_r + 2ε_p² < 2^-46). Each end is
// rounded outwards, then scaled by 2^n: exact while the result is normal, else one rounding,
// covered by one more step outwards (and a lower end below 0 is raised to 0, since e^x > 0).
// Outside: e^-746 < 2^-1076, so x < -746 gives [0, 2^-1074]; x > 709 gives [enclosure(709).lo, ∞].

namespace attn::verify {
namespace {

constexpr double kUnit = 0x1p-53;
constexpr int kDegree = 13;
constexpr double kRelative = 0x1p-46;  // Step 3

struct ExpConstants {
  double ln2_high = 0;  // L1: 32 significant bits
  double ln2_low = 0;   // L2
  std::array<double, kDegree + 1> coefficients{};
};

ExpConstants derive_constants() {
  ExpConstants k;
  MpfrFloat ln2(256), part(256), high(53);
  mpfr_const_log2(ln2.get(), MPFR_RNDN);  // within 2^-256 of ln 2
  mpfr_set(high.get(), ln2.get(), MPFR_RNDN);
  mpfr_prec_round(high.get(), 32, MPFR_RNDN);              // 32 significant bits
  k.ln2_high = mpfr_get_d(high.get(), MPFR_RNDN);          // exact
  mpfr_sub(part.get(), ln2.get(), high.get(), MPFR_RNDN);  // exact at 256 bits
  k.ln2_low = mpfr_get_d(part.get(), MPFR_RNDN);
  mpfr_sub_d(part.get(), part.get(), k.ln2_low, MPFR_RNDN);  // L3 up to 2^-256: exact here
  mpfr_abs(part.get(), part.get(), MPFR_RNDN);
  if (!(mpfr_cmp_ui_2exp(part.get(), 1, -81) < 0)) throw ContractError("exp_enclosure: |L3| >= 2^-81");
  MpfrFloat factorial(256);
  mpfr_set_ui(factorial.get(), 1, MPFR_RNDN);
  for (int i = 0; i <= kDegree; ++i) {
    if (i > 0) mpfr_mul_ui(factorial.get(), factorial.get(), static_cast<unsigned long>(i), MPFR_RNDN);  // exact
    mpfr_ui_div(part.get(), 1, factorial.get(), MPFR_RNDN);
    k.coefficients[static_cast<std::size_t>(i)] = mpfr_get_d(part.get(), MPFR_RNDN);  // 1/i! to nearest
  }
  return k;
}

const ExpConstants& constants() {
  static const ExpConstants instance = derive_constants();
  return instance;
}

// y·2^n rounded to nearest (one rounding at most), for |n| <= 1100 and y in [0.5, 2].
double scale_by_power_of_two(double y, int n) {
  const auto power = [](int e) { return std::bit_cast<double>(static_cast<std::uint64_t>(e + 1023) << 52); };
  if (n >= -1022) return y * power(n);
  return y * power(n + 600) * power(-600);  // the first product is exact (normal)
}

// An end of the enclosure scaled: exact when the result is above 2^-1022 (normal), else one
// rounding, covered by one step in `direction`.
double scaled_end(double y, int n, bool upper) {
  const double scaled = scale_by_power_of_two(y, n);
  if (scaled > 0x1p-1022) return scaled;
  return upper ? next_up(scaled) : std::max(0.0, next_down(scaled));
}

}  // namespace


double gamma_of(double n) {
  const double nu = n * kUnit;
  if (!(nu < 0.5)) return std::numeric_limits<double>::infinity();
  return next_up(nu / (1 - nu) * kRoundingSafety);
}

ProductSumBound::ProductSumBound(std::size_t n) {
  const double count = static_cast<double>(n);
  underflow_ = count * std::numeric_limits<double>::denorm_min();  // exact
  abs_factor_ = next_up((1 + gamma_of(2 * count)) * kRoundingSafety);
  gamma_ = gamma_of(count);
}

Interval exp_enclosure(double x) {
  if (std::isnan(x)) throw ContractError("exp_enclosure: NaN argument");
  if (x == 0) return {1, 1};
  if (x == -std::numeric_limits<double>::infinity()) return {0, 0};
  if (x < -746) return {0, std::numeric_limits<double>::denorm_min()};
  if (x > 709) return {exp_enclosure(709).lo, std::numeric_limits<double>::infinity()};
  const ExpConstants& k = constants();
  // Step 1.
  const double n = std::nearbyint(x * 1.4426950408889634);  // log2 e to nearest
  const double r1 = x - n * k.ln2_high;
  const double r = r1 - n * k.ln2_low;
  if (!(std::fabs(r) <= 0.35)) throw ContractError("exp_enclosure: reduced argument out of range");
  // Step 2.
  double p = k.coefficients[kDegree];
  for (int i = kDegree - 1; i >= 0; --i) p = p * r + k.coefficients[static_cast<std::size_t>(i)];
  // Step 3.
  const int e = static_cast<int>(n);
  return {scaled_end(next_down(p * (1 - kRelative)), e, false), scaled_end(next_up(p * (1 + kRelative)), e, true)};
}

namespace {
// tanh(x) for x >= 0, bounded below (upper = false) or above.
double tanh_bound(double x, bool upper) {
  if (x == 0) return 0;
  if (std::isinf(x)) return 1;
  if (x <= 0x1p-10) {  // x - x³/3 <= tanh x <= x - x³/3 + 2x⁵/15 (alternating, decreasing terms)
    if (upper) {
      const double cube = std::max(0.0, next_down(next_down(x * x) * x)), square = next_up(x * x);
      const double fifth = next_up(next_up(square * square) * x);
      return std::min(x, next_up(next_up(x - next_down(cube / 3)) + next_up(fifth * 2 / 15)));
    }
    const double cube = next_up(next_up(x * x) * x);
    return std::max(0.0, next_down(x - next_up(cube / 3)));
  }
  const Interval t = exp_enclosure(-2 * x);  // -2x exact
  // (1 - t)/(1 + t) decreases in t.
  if (upper) return std::min(1.0, next_up(next_up(1 - t.lo) / next_down(1 + t.lo)));
  return std::max(0.0, next_down(next_down(1 - t.hi) / next_up(1 + t.hi)));
}
double tanh_end(double x, bool upper) { return x >= 0 ? tanh_bound(x, upper) : -tanh_bound(-x, !upper); }
}  // namespace

Interval tanh_enclosure(Interval a) {
  if (std::isnan(a.lo) || std::isnan(a.hi)) throw ContractError("tanh_enclosure: NaN argument");
  return {tanh_end(a.lo, false), tanh_end(a.hi, true)};
}

Interval log_enclosure(Interval a) {
  MpfrFloat x(53), y(53);
  mpfr_set_d(x.get(), a.lo, MPFR_RNDN);  // exact
  mpfr_log(y.get(), x.get(), MPFR_RNDD);
  const double lo = mpfr_get_d(y.get(), MPFR_RNDD);  // exact: y has 53 bits
  mpfr_set_d(x.get(), a.hi, MPFR_RNDN);
  mpfr_log(y.get(), x.get(), MPFR_RNDU);
  return {lo, mpfr_get_d(y.get(), MPFR_RNDU)};
}

}  // namespace attn::verify
