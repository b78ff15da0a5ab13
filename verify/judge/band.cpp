#include "judge/band.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "numeric/double_interval.hpp"
#include "numeric/mpfr.hpp"

// Derivation of the ambiguity band δ.
//
// Model. One query row and one head: k visible keys, head width hd, divisor σ > 0. Exact values:
// D_j = q·k_j, A_j = Σ_c |q_c k_jc|, top = max_j D_j, G_j = top - D_j >= 0, softmax weights w_j,
// output y = Σ_j w_j v_j. A "correct IEEE-double implementation of the standard algorithm" is
// allowed to: convert each decimal to the nearest double or one next to it (relative error
// <= u = 2^-53 each), form dot products in any order with or without FMA, take σ̂ = σ(1+ε)
// (sqrt is correctly rounded in IEEE 754; an explicit decimal converts like any input), compute
// the shifted arguments either as (a) (D̂_j - D̂_M) / σ̂ (the production kernel) or (b)
// D̂_j/σ̂ - max ŝ (the textbook form), possibly multiplying by fl(1/σ̂), call an exp accurate to
// within 1 ulp (an assumption: glibc's exp is < 1 ulp, so relative error <= 2u for normal
// results and absolute <= 2^-1074 below), sum the k exponentials in any order, and then either
// divide each one by the sum and accumulate w·v in any order, or accumulate e·v and divide once.
// θ_n denotes any product of at most n factors (1+ε_i)^±1, |ε_i| <= u: |θ_n| <= γ_n (Higham,
// Accuracy and Stability of Numerical Algorithms, 2nd ed., Lemmas 3.1 and 3.3).
//
// Step 1 (dot products). Two input roundings and a dot product of hd terms in any order give
// |D̂_j - D_j| <= e_j := γ_{hd+2} A_j (Higham eq. (3.5) with Lemma 3.3), plus hd·2^-1074 if
// products underflow. E = max e_j, Φ = max A_j, P = Φ + E >= max |D̂_j|.
// Step 2 (which key is the computed maximum). Let M be the key the implementation shifts by.
// In form (a) D̂_M >= D̂_top, so top - D_M <= 2E; in form (b) ŝ_M >= ŝ_top gives
// top - D_M <= 2E + 2γ_3 P. Either way |D_j - D_M| <= W_j := G_j + 2E + 2γ_3 P.
// Step 3 (arguments). Write the computed argument as a_j = (D_j - D_M)/σ + τ_j: all keys share the
// shift D_M/σ, and softmax is shift invariant. Form (a): a_j = (D̂_j - D̂_M)(1+θ_4)/σ, so
//   |τ_j| <= [e_j + E + γ_4 (W_j + e_j + E)] / σ.
// Form (b): ŝ_j = D̂_j(1+θ_3)/σ and a_j = (ŝ_j - ŝ_M)(1+ε), so
//   |τ_j| <= [e_j + E + γ_3 (A_j + e_j + P)] / σ + u [W_j + e_j + E + γ_3 (A_j + e_j + P)] / σ.
// T_j is the larger of the two. This is the "range" term of Blanchard, Higham and Higham,
// "Accurately computing the log-sum-exp and softmax functions", IMA J. Numer. Anal. 41 (2021),
// made per key: far keys get large τ_j but carry weight <= e^{-G_j/σ}.
// Step 4 (exponentials). ê_j = e^{a_j}(1+η_j), |η_j| <= 2u, so with c the common shift
// ê_j = e^{x_j - c} λ_j, λ_j = 1 + μ_j, |μ_j| <= m_j := expm1(T_j) + 2u e^{T_j}. The key M gives
// a_M = 0 exactly, so Σ ê >= 1 - 2u, and underflowed (or overflowed-argument) exponentials are
// absolute errors <= 2^-1074 that move the output by at most U below.
// Step 5 (softmax of the computed exponentials). ω_j = ê_j / Σ ê = w_j λ_j / Λ with
// Λ = Σ w_i λ_i >= 1 - M̄, M̄ := Σ_j w_j m_j. Since Σ_j w_j (v_j - y) = 0,
//   Σ_j ω_j v_j - y = Σ_j w_j μ_j (v_j - y) / Λ,   |.| <= Σ_j w_j m_j |v_j - y| / (1 - M̄).
// Step 6 (summation, division, weighted sum). Positive terms: Σ̂ ê = (Σ ê)(1+θ_{k-1}); each
// weight ŵ_j = ω_j(1+θ_k); Σ ŵ_j v̂_j in any order adds θ_{k+1} per term (conversion of v
// included): ŷ = Σ_j ω_j v_j (1+θ_{2k+1}). Accumulating e·v first and dividing once gives the
// same count. So |ŷ - Σ ω_j v_j| <= γ_{2k+2} Σ ω_j |v_j| <= γ_{2k+2} Ω,
// Ω := Σ_j w_j (1 + m_j) |v_j| / (1 - M̄).
// Result.  δ = [Σ_j w_j m_j |v_j - y| + γ_{2k+2} Σ_j w_j (1+m_j)|v_j|] / (1 - M̄) + U,
//          U = (3k+4)·2^-1074·(1 + max|v|)  (underflowed exponentials, quotients and products).
// It is capped by |ŷ| + |y| <= (1+γ_{2k+2}) max|v| + |y|, the trivial bound, which also serves
// when M̄ >= 1/2 (an instance so ill-conditioned that no double implementation means much).
// Weights: |ŵ_j - w_j| <= [w_j (m_j + M̄) + γ_k w_j (1 + m_j)] / (1 - M̄) + 2(k+1)·2^-1074,
// capped by 1 + γ_k.
// Form (b) assumes D̂_j/σ̂ does not overflow; form (a) needs no such assumption.
//
// Evaluating the bound. Exact quantities (A_j, G_j, σ, enclosures of w_j and y) enter as doubles
// rounded in the safe direction. The rest is computed in round-to-nearest on non-negative
// quantities (the one subtraction 1 - M̄ is of exact-ish terms far from cancelling since M̄ < 1/2):
// fewer than 8k + 64 roundings in any chain, each relative u, plus libm's exp/expm1 (< 1 ulp),
// so multiplying by 1 + 2^-20 > (1+2u)^(8k+64) (k < 2^24) makes the computed δ an upper bound.
//
// Size of δ. For AI006 at its limits (|x| <= 1000, hd = 16, σ = 4, A_j <= 1.6e7) one key
// dominating gives δ ~ u·|v|; two keys tied at the top with |v_1 - v_2| = 2000 give
// T ~ 2e-8 and δ ~ 2e-5 in the very worst case (every |x| = 1000), ~ 1e-6 for typical inputs.

namespace attn::verify {
namespace {

constexpr double kSafety = 1 + 0x1p-20;  // see "Evaluating the bound"
constexpr double kTiny = 0x1p-1074;      // smallest subnormal: the absolute error of an underflow

// a · 10^-exponent (a >= 0) as a double rounded towards +inf or -inf; 10^exponent is converted once.
class ScaledBounds {
 public:
  explicit ScaledBounds(long exponent) {
    const Integer unit = power_of_ten(exponent);
    mpfr_set_z(unit_down_.get(), unit.backend().data(), MPFR_RNDD);
    mpfr_set_z(unit_up_.get(), unit.backend().data(), MPFR_RNDU);
    // 10^e is an exact double for e <= 22 (5^22 < 2^53).
    unit_double_ = exponent <= 22 ? mpfr_get_d(unit_down_.get(), MPFR_RNDN) : 0;
  }

  double upper(const Integer& a) { return bound(a, MPFR_RNDU, unit_down_.get()); }
  double lower(const Integer& a) { return bound(a, MPFR_RNDD, unit_up_.get()); }

 private:
  double bound(const Integer& a, mpfr_rnd_t mode, mpfr_srcptr unit) {
    const mpz_srcptr z = a.backend().data();
    if (mpz_sgn(z) == 0) return 0;
    if (unit_double_ != 0 && mpz_sizeinbase(z, 2) <= 53) {
      // Both operands exact doubles: the quotient rounded to nearest is within half an ulp of the
      // exact one, so the next double outwards bounds it (a common case, and no MPFR division).
      const double quotient = mpz_get_d(z) / unit_double_;
      return mode == MPFR_RNDU ? next_up(quotient) : next_down(quotient);
    }
    mpfr_set_z(value_.get(), z, mode);
    mpfr_div(value_.get(), value_.get(), unit, mode);
    return mpfr_get_d(value_.get(), mode);
  }
  // Any precision gives a valid bound, since every step rounds towards it; at 128 bits the steps
  // before the final rounding to a double (53 bits) cost it almost nothing in tightness.
  MpfrFloat unit_down_{128}, unit_up_{128}, value_{128};
  double unit_double_ = 0;  ///< 10^e when exact as a double, else 0
};

// σ rounded towards `mode`.
double divisor_bound(const ExactDivisor& divisor, mpfr_rnd_t mode) {
  switch (divisor.kind) {
    case ScaleKind::none:
      return 1.0;
    case ScaleKind::sqrt_head_dim: {
      MpfrFloat root(64);
      mpfr_set_ui(root.get(), divisor.radicand, MPFR_RNDN);  // exact: radicand < 2^64
      mpfr_sqrt(root.get(), root.get(), mode);
      return mpfr_get_d(root.get(), mode);
    }
    case ScaleKind::explicit_value: {
      ScaledBounds value(divisor.value.exponent);
      return mode == MPFR_RNDU ? value.upper(divisor.value.mantissa) : value.lower(divisor.value.mantissa);
    }
  }
  return 1.0;
}

// What block_bands needs of the divisor and the dot products' decimal exponent: σ's bounds and the
// 10^-e scaling. Every block of an instance shares them, so each thread keeps the last pair.
struct BlockScaling {
  ExactDivisor divisor;
  long dot_exponent = 0;
  double sigma_lo = 0, sigma_hi = 0;
  ScaledBounds dots;

  BlockScaling(const ExactDivisor& d, long exponent)
      : divisor(d),
        dot_exponent(exponent),
        sigma_lo(divisor_bound(d, MPFR_RNDD)),
        sigma_hi(divisor_bound(d, MPFR_RNDU)),
        dots(exponent) {}
  bool matches(const ExactDivisor& d, long exponent) const { return dot_exponent == exponent && divisor == d; }
};

BlockScaling& block_scaling(const ExactDivisor& divisor, long dot_exponent) {
  thread_local std::optional<BlockScaling> last;
  if (!last || !last->matches(divisor, dot_exponent)) last.emplace(divisor, dot_exponent);
  return *last;
}

}  // namespace

double gamma(std::size_t n) {
  const double nu = static_cast<double>(n) * kUnitRoundoff;  // exact for n < 2^53
  if (nu >= 0.5) return std::numeric_limits<double>::infinity();
  return nu / (1 - nu) * kSafety;
}

BlockBands block_bands(const ExactInstance& exact, const ExactBlock& block, const BlockAnswer& answer) {
  BlockBands bands;
  bands.cells.assign(block.head_v, 0.0);  // a fully masked row is exactly zero in any implementation
  const std::size_t k = block.keys.size();
  if (k == 0) return bands;
  const double u = kUnitRoundoff;
  const Matrix& V = exact.instance->batch[block.batch].V;
  BlockScaling& scaling = block_scaling(exact.divisor, block.dot_exponent);
  const double sigma_lo = scaling.sigma_lo, sigma_hi = scaling.sigma_hi;
  ScaledBounds& dots = scaling.dots;

  // Step 1 and the exact per-key quantities. The per-key arrays are this thread's scratch, reused
  // from block to block: a fuzz or stress run certifies many small blocks, each a handful of
  // allocations otherwise.
  thread_local struct {
    std::vector<double> A, G_hi, G_lo, e, w_hi, wm;
    Integer gap;
  } scratch;
  for (auto* array : {&scratch.A, &scratch.G_hi, &scratch.G_lo, &scratch.e, &scratch.w_hi, &scratch.wm}) {
    array->assign(k, 0.0);
  }
  auto& A = scratch.A;
  auto& G_hi = scratch.G_hi;
  auto& G_lo = scratch.G_lo;
  auto& e = scratch.e;
  auto& w_hi = scratch.w_hi;
  auto& wm = scratch.wm;
  auto& gap = scratch.gap;
  double E = 0, Phi = 0, max_v = 0;
  for (std::size_t t = 0; t < k; ++t) {
    mpz_sub(gap.backend().data(), block.group_dot[0].backend().data(), block.dot[t].backend().data());
    A[t] = dots.upper(block.abs_dot[t]);
    G_hi[t] = dots.upper(gap);
    G_lo[t] = dots.lower(gap);
    e[t] = gamma(block.head_k + 2) * A[t] + static_cast<double>(block.head_k) * kTiny;
    E = std::max(E, e[t]);
    Phi = std::max(Phi, A[t]);
    for (std::size_t c = 0; c < block.head_v; ++c) {
      max_v = std::max(max_v, std::fabs(V.at(block.keys[t], block.head * block.head_v + c)));
    }
  }
  const double P = Phi + E;

  // Steps 2-5: per-key argument bound T_j, and w_j m_j bounded both directly and by e^{T_j - G_j/σ}.
  double M_bar = 0;
  for (std::size_t t = 0; t < k; ++t) {
    const double W = G_hi[t] + 2 * E + 2 * gamma(3) * P;
    const double form_a = (e[t] + E + gamma(4) * (W + e[t] + E)) / sigma_lo;
    const double inner_b = e[t] + E + gamma(3) * (A[t] + e[t] + P);
    const double form_b = inner_b / sigma_lo + u * (W + inner_b) / sigma_lo;
    const double T = std::max(form_a, form_b);
    const double m = std::expm1(T) + 2 * u * std::exp(T);
    w_hi[t] = answer.weights[t].hi;
    wm[t] = std::min(w_hi[t] * m, std::exp(T - G_lo[t] / sigma_hi) * (1 + 2 * u));
    M_bar += wm[t];
  }
  const bool usable = M_bar < 0.5;  // NaN-safe: an infinite or NaN M̄ falls back to the caps

  // Step 6 and the result, per output column.
  const double underflow = static_cast<double>(3 * k + 4) * kTiny * (1 + max_v);
  for (std::size_t c = 0; c < block.head_v; ++c) {
    const Interval y = answer.cells[c].value;
    const double cap =
        (1 + gamma(2 * k + 2)) * max_v * (1 + 2 * u) + std::max(std::fabs(y.lo), std::fabs(y.hi)) + underflow;
    double delta = cap;
    if (usable) {
      double spread = 0, magnitude = 0;
      for (std::size_t t = 0; t < k; ++t) {
        const double v = V.at(block.keys[t], block.head * block.head_v + c);
        const double distance = std::max(std::fabs(v - y.lo), std::fabs(v - y.hi)) + 2 * u * std::fabs(v);
        spread += wm[t] * distance;
        magnitude += (w_hi[t] + wm[t]) * std::fabs(v) * (1 + 2 * u);
      }
      delta = std::min(cap, (spread + gamma(2 * k + 2) * magnitude) / (1 - M_bar) + underflow);
    }
    bands.cells[c] = delta * kSafety;
  }
  bands.weights.reserve(k);
  for (std::size_t t = 0; t < k; ++t) {
    const double cap = 1 + gamma(k);
    double delta = cap;
    if (usable) {
      delta = std::min(cap, (wm[t] + w_hi[t] * M_bar + gamma(k) * (w_hi[t] + wm[t])) / (1 - M_bar) +
                                2 * static_cast<double>(k + 1) * kTiny);
    }
    bands.weights.push_back(delta * kSafety);
  }
  return bands;
}

}  // namespace attn::verify
