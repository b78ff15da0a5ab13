// The fast first pass of the tensor oracle (enclose_row_fast): the enclosures of tensor_oracle.cpp
// in outward-rounded double interval arithmetic (double_interval.hpp), O(S·(E + Ev)) double
// operations a row, no MPFR in the loops. Like the decimal oracle's fast pass (oracle_fast.cpp)
// it only has to be rigorous, not narrow: a caller whose target it misses falls back to MPFI.
//
// Step 1 (dot products). D_j = Σ_c q_c k_jc is summed in round-to-nearest double (four partial
// sums, any order is covered), with â_j = Σ_c |fl(q_c k_jc)|: |D̂_j - D_j| <= γ_E A_j plus underflow
// and A_j is bounded from â_j (ProductSumBound, double_interval.cpp).
// For fp32/fp16/bf16 inputs the products are exact, so the bound is loose by a factor ~2, no more.
// Step 2 (scores). σ is the given double, or 1/√E rounded down and up by MPFR (correctly rounded
// directed results); s_j = σ·D_j + β_j by interval operations, each rounded outwards.
// Step 3 (exponentials). c = max_j hi(s_j), an exact double; t_j = s_j - c <= 0 rounded outwards
// (the upper end clamped to 0, which it cannot exceed); e_j ⊂ [exp_lo(lo t_j), exp_hi(hi t_j)]
// (exp_enclosure, monotone). The key holding c has hi t_j = 0, so Σ e_j >= e^{lo t_j} > 0.
// Step 4 (sum). Z = Σ e_j of non-negative terms summed in round-to-nearest, any order: the computed
// sums of the lower and upper ends are within γ_{n-1} relative of the exact ones, so Z lies in
// [Ŝ_lo (1 - γ_n), Ŝ_hi (1 + 2γ_n)] (1/(1 - γ) <= 1 + 2γ for γ <= 1/2), rounded outwards.
// Step 5 (numerators). Each e_j is written m_j ± r_j with m_j in [lo, hi] and r_j <= ρ m_j for one
// ρ of the row (the largest relative radius), except "loose" keys (m_j <= 2^-900, or r_j > m_j/2^20:
// an underflowed or wide e_j), whose e_j <= hi_j are summed into Λ. Then for column c
//   N_c = Σ_j e_j v_jc = Σ_tight m_j v_jc + Σ_tight (e_j - m_j) v_jc + Σ_loose e_j v_jc
// and the computed M̂_c = Σ_tight fl(m_j v_jc) is within ProductSumBound(n).error(Â_c) of the
// first sum (Â_c = Σ fl(m_j |v_jc|)), the second is at most ρ times the bound of Σ m_j |v_jc| from
// Â_c, the third at most Λ·max_j |v_jc|.
// Step 6 (output). y_c = N_c / Z, weights w_j = e_j / Z, both divisions rounded outwards. The
// fine enclosure is the midpoint of [lo, hi] (tail 0) with the radius rounded up. One key: the
// weight is exactly 1 and y = v exactly, as in the MPFI evaluation.
// Step 7 (log-sum-exp). log Σ_j e^{s_j} = c + log Z: MPFR's log of Z's ends rounded down and up
// (correctly rounded directed results), the addition of c rounded outwards. One key: s_j itself.
// Range. Every quantity must stay finite (inputs up to 2^1024 can overflow a dot product or a
// numerator) and Z's lower end positive (scores near 2^100 are enclosed ~2^47 wide): otherwise
// the pass gives up (nullopt) and the caller uses MPFI, whose precision and exponent range are
// far wider.
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "numeric/double_interval.hpp"
#include "numeric/mpfr.hpp"
#include "tensor/tensor_oracle.hpp"

namespace attn::verify {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool finite(Interval x) { return std::isfinite(x.lo) && std::isfinite(x.hi); }

// Step 2: the multiplier, exact when given, else 1/√E rounded down and up.
Interval scale_of(const TensorProblem& p) {
  if (p.scale) return {*p.scale, *p.scale};
  MpfrFloat radicand(64), root(53);
  mpfr_set_ui(radicand.get(), p.E, MPFR_RNDN);  // exact
  mpfr_rec_sqrt(root.get(), radicand.get(), MPFR_RNDD);
  const double lo = mpfr_get_d(root.get(), MPFR_RNDD);  // exact: root has 53 bits
  mpfr_rec_sqrt(root.get(), radicand.get(), MPFR_RNDU);
  return {lo, mpfr_get_d(root.get(), MPFR_RNDU)};
}

// The fine enclosure of a double interval: its midpoint and the distance to the farther end.
FineEnclosure fine_of(Interval a) {
  const double head = std::clamp(0.5 * a.lo + 0.5 * a.hi, a.lo, a.hi);
  return {head, 0, std::max(next_up(a.hi - head), next_up(head - a.lo))};
}

// Steps 3-6 for a row of n >= 2 keys: weights and outputs.
bool softmax_outputs(const std::vector<const double*>& values, std::size_t width, RowEnclosure& out) {
  const std::size_t n = out.scores.size();
  double top = -kInf;
  for (const Interval& s : out.scores) top = std::max(top, s.hi);
  std::vector<Interval> e(n);
  std::vector<double> mids(n);
  double rho = 0, loose = 0, sum_lo = 0, sum_hi = 0;
  for (std::size_t t = 0; t < n; ++t) {  // Step 3
    const Interval& s = out.scores[t];
    const double arg_lo = next_down(s.lo - top), arg_hi = std::min(0.0, next_up(s.hi - top));
    e[t] = {exp_enclosure(arg_lo).lo, exp_enclosure(arg_hi).hi};
    sum_lo += e[t].lo;
    sum_hi += e[t].hi;
    const double m = std::clamp(0.5 * e[t].lo + 0.5 * e[t].hi, e[t].lo, e[t].hi);
    const double r = std::max(next_up(e[t].hi - m), next_up(m - e[t].lo));
    if (m > 0x1p-900 && r <= m * 0x1p-20) {  // Step 5: a tight key
      mids[t] = m;
      rho = std::max(rho, next_up(r / m));
    } else {
      mids[t] = 0;
      loose = next_up(loose + e[t].hi);
    }
  }
  const Interval total = nonnegative_sum(sum_lo, sum_hi, n);  // Step 4
  if (!(total.lo > 0) || !std::isfinite(total.hi)) return false;
  out.lse = add({top, top}, log_enclosure(total));  // log Σ e^{s_j} = top + log Σ e^{s_j - top}
  if (!finite(out.lse)) return false;
  out.lse_fine = fine_of(out.lse);
  for (std::size_t t = 0; t < n; ++t) out.weights.push_back(divide_by_positive(e[t], total));  // Step 6

  std::vector<double> mid(width, 0.0), abs(width, 0.0), largest(width, 0.0);  // Step 5
  for (std::size_t t = 0; t < n; ++t) {
    const double* v = values[t];
    const double m = mids[t];
    for (std::size_t c = 0; c < width; ++c) {
      mid[c] += m * v[c];
      abs[c] += m * std::fabs(v[c]);
      largest[c] = std::max(largest[c], std::fabs(v[c]));
    }
  }
  const ProductSumBound bound(n);
  for (std::size_t c = 0; c < width; ++c) {  // Step 6
    const double radius =
        next_up((rho * bound.abs_upper(abs[c]) + bound.error(abs[c]) + loose * largest[c]) * kRoundingSafety);
    const Interval numerator{next_down(mid[c] - radius), next_up(mid[c] + radius)};
    if (!finite(numerator)) return false;
    const Interval y = divide_by_positive(numerator, total);
    out.out.push_back(y);
    out.fine.push_back(fine_of(y));
    out.max_abs_value = std::max(out.max_abs_value, largest[c]);
  }
  return true;
}

}  // namespace

std::optional<RowEnclosure> enclose_row_fast(const TensorProblem& p, std::size_t row) {
  if (row >= p.batch * p.q_heads * p.L) throw ContractError("enclose_row_fast: row out of range");
  const RowIndex r = row_index(p, row);
  const std::size_t kv = kv_head_of(p, r.h);
  RowEnclosure out;
  out.bits = 53;
  out.fast = true;
  out.scale = scale_of(p);
  const double* q = p.query.data() + tensor_index(p, p.q_heads, p.L, p.E, r.b, r.h, r.i, 0);
  // Key and value rows: E (Ev) contiguous doubles, row j at a fixed stride from row 0 in either layout.
  const std::size_t key0 = tensor_index(p, p.kv_heads, p.S, p.E, r.b, kv, 0, 0);
  const std::size_t value0 = tensor_index(p, p.kv_heads, p.S, p.Ev, r.b, kv, 0, 0);
  const std::size_t key_stride = p.S > 1 ? tensor_index(p, p.kv_heads, p.S, p.E, r.b, kv, 1, 0) - key0 : 0;
  const std::size_t value_stride = p.S > 1 ? tensor_index(p, p.kv_heads, p.S, p.Ev, r.b, kv, 1, 0) - value0 : 0;
  const ProductSumBound bound(p.E);
  std::vector<const double*> values;
  for (std::size_t j = 0; j < p.S; ++j) {  // Steps 1-2
    if (!takes_part(p, r.b, r.h, r.i, j)) continue;
    const DotEnclosure dot = dot_enclosure(q, p.key.data() + key0 + j * key_stride, p.E, bound);
    const double bias = additive_bias(p, r.b, r.h, r.i, j);
    Interval score = multiply(out.scale, dot.value);
    if (p.softcap > 0) {  // c·tanh(s/c), outwards
      const double c = p.softcap;
      score = multiply({c, c}, tanh_enclosure({next_down(score.lo / c), next_up(score.hi / c)}));
    }
    score = add(score, {bias, bias});
    if (!finite(score) || !std::isfinite(dot.abs_upper)) return std::nullopt;
    out.keys.push_back(j);
    out.dots.push_back(dot.value);
    out.abs_dots.push_back(dot.abs_upper);
    out.scores.push_back(score);
    values.push_back(p.value.data() + value0 + j * value_stride);
  }
  out.empty = out.keys.empty();
  // The sink: a key after the last, of score z and value 0 (it joins the denominator only).
  thread_local std::vector<double> zeros;
  if (!out.empty && has_sinks(p)) {
    zeros.assign(p.Ev, 0.0);
    const double z = sink_of(p, r.h);
    out.keys.push_back(p.S);
    out.dots.push_back({0, 0});
    out.abs_dots.push_back(0);
    out.scores.push_back({z, z});
    values.push_back(zeros.data());
  }
  if (out.empty) {
    out.out.assign(p.Ev, Interval{0, 0});
    out.fine.assign(p.Ev, FineEnclosure{});
    return out;
  }
  if (out.keys.size() == 1) {  // the weight is exactly 1, the log-sum-exp the score
    out.weights.push_back({1, 1});
    out.lse = out.scores[0];
    out.lse_fine = fine_of(out.lse);
    for (std::size_t c = 0; c < p.Ev; ++c) {
      const double v = values[0][c];
      out.out.push_back({v, v});
      out.fine.push_back({v, 0, 0});
      out.max_abs_value = std::max(out.max_abs_value, std::fabs(v));
    }
    return out;
  }
  if (!softmax_outputs(values, p.Ev, out)) return std::nullopt;
  return out;
}

}  // namespace attn::verify
