#include "tensor/tensor_oracle.hpp"

#include <mpfi.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include "numeric/double_interval.hpp"
#include "numeric/mpfr.hpp"

// The exact value of one row, and how it is enclosed.
//
// Step 1 (exact dot products). Row (b, h, i) reads query row q and, for each key j that takes part
// (takes_part), key row k_j and value row v_j of kv head h / G. Every input is a double, so
// q_c = m·2^e with an integer m: each product q_c k_jc is an integer multiple of 2^(lq + lk), where
// lq, lk are the lowest set bits over the row's inputs, and below 2^(tq + tk) in magnitude (tq, tk
// their top exponents). A sum of E such terms is a multiple of 2^(lq + lk) below 2^(tq + tk +
// bit_width(E)), so MPFR at tq + tk - lq - lk + bit_width(E) bits adds them without rounding, and a
// product of two doubles is exact at 106 bits. D_j = q·k_j and A_j = Σ_c |q_c k_jc| are exact.
// Step 2 (scores). s_j = σ·D_j + β_j with σ the given double (exact) or 1/√E (enclosed by MPFI's
// correctly rounded sqrt and division, outwards), β_j the additive mask's value (a double).
// Step 3 (shift). Softmax is invariant under a common shift, so with c = the largest upper end of
// the score enclosures (an exact MPFR number) w_j = e^{s_j - c} / Σ_i e^{s_i - c}. Every argument is
// <= 0, so nothing overflows; the key holding c contributes e^{t} >= e^{-width}, so the sum is
// bounded away from 0. An argument so negative that e^t underflows MPFR's exponent range gets [0,
// tiny], still an enclosure (MPFR rounds directed results to 0 or the smallest positive number).
// Step 4 (output). y_c = Σ_j e_j v_jc / Σ_j e_j, each operation in MPFI, outward. With a single key
// the weight is exactly 1 and y_c = v_c exactly.
// Step 5 (precision). Each enclosure's width is ~2^-bits times the row's scale of values and
// scores; Ziv's strategy doubles `bits` until every output is narrower than its target.

namespace attn::verify {
namespace {

// Top exponent t (|x| < 2^t) and lowest set bit l (x is a multiple of 2^l) of a finite x != 0.
struct BitSpan {
  int top = std::numeric_limits<int>::min();
  int low = std::numeric_limits<int>::max();
  void add(double x) {
    if (x == 0) return;
    int exponent = 0;
    const double fraction = std::frexp(std::fabs(x), &exponent);                 // in [1/2, 1)
    const auto mantissa = static_cast<std::uint64_t>(std::ldexp(fraction, 53));  // exact
    top = std::max(top, exponent);
    low = std::min(low, exponent - 53 + std::countr_zero(mantissa));
  }
  [[nodiscard]] bool empty() const { return top == std::numeric_limits<int>::min(); }
};

// What does not depend on the working precision: the keys, the exact dot products, the values.
struct RowData {
  bool scaled_default = true;
  double scale = 1;
  std::size_t width = 0;  // Ev
  std::vector<std::size_t> keys;
  std::vector<MpfrFloat> dots;           // exact D_j
  std::vector<double> abs_dots, biases;  // A_j rounded up, β_j
  std::vector<double> values;            // v_jc, key-major
  unsigned long head_dim = 0;            // E
  double max_abs_value = 0;
  double softcap = 0;                    // c, 0 off
};

RowData prepare(const TensorProblem& p, std::size_t row) {
  if (row >= p.batch * p.q_heads * p.L) throw ContractError("enclose_row: row out of range");
  const RowIndex r = row_index(p, row);
  const std::size_t kv = kv_head_of(p, r.h);
  RowData d;
  d.scaled_default = !p.scale.has_value();
  d.scale = p.scale.value_or(1);
  d.softcap = p.softcap;
  d.width = p.Ev;
  d.head_dim = p.E;
  BitSpan q_span, k_span;
  std::vector<double> q(p.E);
  for (std::size_t c = 0; c < p.E; ++c)
    q_span.add(q[c] = p.query[tensor_index(p, p.q_heads, p.L, p.E, r.b, r.h, r.i, c)]);
  for (std::size_t j = 0; j < p.S; ++j) {
    if (!takes_part(p, r.b, r.h, r.i, j)) continue;
    d.keys.push_back(j);
    d.biases.push_back(additive_bias(p, r.b, r.h, r.i, j));
    for (std::size_t c = 0; c < p.E; ++c) k_span.add(p.key[tensor_index(p, p.kv_heads, p.S, p.E, r.b, kv, j, c)]);
    for (std::size_t c = 0; c < p.Ev; ++c) {
      d.values.push_back(p.value[tensor_index(p, p.kv_heads, p.S, p.Ev, r.b, kv, j, c)]);
      d.max_abs_value = std::max(d.max_abs_value, std::fabs(d.values.back()));
    }
  }
  // The sink: a key after the last (position S), of dot product 0, bias z and value 0.
  if (!d.keys.empty() && has_sinks(p)) {
    d.keys.push_back(p.S);
    d.biases.push_back(sink_of(p, r.h));
    d.values.insert(d.values.end(), p.Ev, 0.0);
  }
  // Step 1: enough bits for every partial sum to be exact.
  mpfr_prec_t bits = 64;
  if (!q_span.empty() && !k_span.empty()) {
    const long span = static_cast<long>(q_span.top) + k_span.top - q_span.low - k_span.low;
    bits = std::max<mpfr_prec_t>(bits, span + static_cast<long>(std::bit_width(p.E)) + 1);
  }
  MpfrFloat term(106), abs_sum(bits);
  for (std::size_t j : d.keys) {
    MpfrFloat dot(bits);
    mpfr_set_zero(dot.get(), 1);
    mpfr_set_zero(abs_sum.get(), 1);
    for (std::size_t c = 0; j < p.S && c < p.E; ++c) {  // the sink (j = S): 0
      mpfr_set_d(term.get(), q[c], MPFR_RNDN);  // exact
      mpfr_mul_d(term.get(), term.get(), p.key[tensor_index(p, p.kv_heads, p.S, p.E, r.b, kv, j, c)], MPFR_RNDN);
      mpfr_add(dot.get(), dot.get(), term.get(), MPFR_RNDN);  // exact (Step 1)
      mpfr_abs(term.get(), term.get(), MPFR_RNDN);
      mpfr_add(abs_sum.get(), abs_sum.get(), term.get(), MPFR_RNDN);  // exact
    }
    d.abs_dots.push_back(mpfr_get_d(abs_sum.get(), MPFR_RNDU));
    d.dots.push_back(std::move(dot));
  }
  return d;
}

// The fine enclosure of [left, right]: midpoint head + tail, radius from exact sums rounded up.
FineEnclosure fine_of(mpfi_srcptr x, mpfr_prec_t bits) {
  MpfrFloat mid(bits + 2), head(53), tail(53), radius(53), other(53);
  mpfr_add(mid.get(), &x[0].left, &x[0].right, MPFR_RNDN);
  mpfr_div_2ui(mid.get(), mid.get(), 1, MPFR_RNDN);
  FineEnclosure out;
  out.head = mpfr_get_d(mid.get(), MPFR_RNDN);
  mpfr_sub_d(mid.get(), mid.get(), out.head, MPFR_RNDN);
  out.tail = mpfr_get_d(mid.get(), MPFR_RNDN);
  mpfr_set_d(head.get(), -out.head, MPFR_RNDN);  // exact
  mpfr_set_d(tail.get(), -out.tail, MPFR_RNDN);  // exact
  // right - head - tail and head + tail - left, each correctly rounded upwards by mpfr_sum.
  mpfr_ptr up[] = {const_cast<mpfr_ptr>(&x[0].right), head.get(), tail.get()};
  mpfr_sum(radius.get(), up, 3, MPFR_RNDU);
  mpfr_neg(head.get(), head.get(), MPFR_RNDN);
  mpfr_neg(tail.get(), tail.get(), MPFR_RNDN);
  MpfrFloat left(mpfr_get_prec(&x[0].left));
  mpfr_neg(left.get(), &x[0].left, MPFR_RNDN);  // exact
  mpfr_ptr down[] = {head.get(), tail.get(), left.get()};
  mpfr_sum(other.get(), down, 3, MPFR_RNDU);
  mpfr_max(radius.get(), radius.get(), other.get(), MPFR_RNDU);
  out.radius = std::max(0.0, mpfr_get_d(radius.get(), MPFR_RNDU));
  return out;
}

RowEnclosure evaluate(const RowData& d, int bits) {
  RowEnclosure out;
  out.bits = bits;
  out.keys = d.keys;
  out.empty = d.keys.empty();
  out.max_abs_value = d.max_abs_value;
  out.abs_dots = d.abs_dots;
  MpfiInterval scale(bits);
  if (d.scaled_default) {
    mpfi_set_ui(scale.get(), d.head_dim);
    mpfi_sqrt(scale.get(), scale.get());
    mpfi_ui_div(scale.get(), 1, scale.get());
  } else {
    mpfi_set_d(scale.get(), d.scale);  // exact: bits >= 53
  }
  out.scale = scale.doubles();
  if (out.empty) {
    out.out.assign(d.width, Interval{0, 0});
    out.fine.assign(d.width, FineEnclosure{});
    return out;
  }
  const std::size_t n = d.keys.size();
  std::deque<MpfiInterval> e;  // grows without moving its elements, which own MPFI limbs
  MpfrFloat shift(bits);
  mpfr_set_inf(shift.get(), -1);
  for (std::size_t t = 0; t < n; ++t) {  // Step 2
    MpfiInterval dot(mpfr_get_prec(d.dots[t].get()));
    mpfi_set_fr(dot.get(), d.dots[t].get());  // exact
    out.dots.push_back(dot.doubles());
    e.emplace_back(bits);
    mpfi_mul_fr(e[t].get(), scale.get(), d.dots[t].get());
    if (d.softcap > 0) {  // c·tanh(s/c)
      mpfi_div_d(e[t].get(), e[t].get(), d.softcap);
      mpfi_tanh(e[t].get(), e[t].get());
      mpfi_mul_d(e[t].get(), e[t].get(), d.softcap);
    }
    mpfi_add_d(e[t].get(), e[t].get(), d.biases[t]);
    out.scores.push_back(e[t].doubles());
    mpfr_max(shift.get(), shift.get(), &e[t].get()[0].right, MPFR_RNDU);  // exact: a copy of an end
  }
  if (n == 1) {  // Step 4: the weight is exactly 1, the log-sum-exp the score
    out.weights.push_back({1, 1});
    out.lse = e[0].doubles();
    out.lse_fine = fine_of(e[0].get(), bits);
    for (std::size_t c = 0; c < d.width; ++c) {
      out.out.push_back({d.values[c], d.values[c]});
      out.fine.push_back({d.values[c], 0, 0});
    }
    return out;
  }
  MpfiInterval total(bits), term(bits), sum(bits);
  mpfi_set_ui(total.get(), 0);
  for (std::size_t t = 0; t < n; ++t) {  // Step 3
    mpfi_sub_fr(e[t].get(), e[t].get(), shift.get());
    mpfi_exp(e[t].get(), e[t].get());
    mpfi_add(total.get(), total.get(), e[t].get());
  }
  for (std::size_t t = 0; t < n; ++t) {
    mpfi_div(term.get(), e[t].get(), total.get());
    out.weights.push_back(term.doubles());
  }
  mpfi_log(term.get(), total.get());  // log Σ e^{s_j} = shift + log Σ e^{s_j - shift}
  mpfi_add_fr(term.get(), term.get(), shift.get());
  out.lse = term.doubles();
  out.lse_fine = fine_of(term.get(), bits);
  for (std::size_t c = 0; c < d.width; ++c) {  // Step 4
    mpfi_set_ui(sum.get(), 0);
    for (std::size_t t = 0; t < n; ++t) {
      mpfi_mul_d(term.get(), e[t].get(), d.values[t * d.width + c]);
      mpfi_add(sum.get(), sum.get(), term.get());
    }
    mpfi_div(sum.get(), sum.get(), total.get());
    out.out.push_back(sum.doubles());
    out.fine.push_back(fine_of(sum.get(), bits));
  }
  return out;
}

// plain_row with numbers of type T (double, or float when every input and operation is one) and
// every operation's result passed through `r` (rounding to the compute format).
template <typename T, typename Round>
std::vector<double> plain_row_in(const TensorProblem& p, std::size_t row, const Round& r) {
  // Each operation in double, then rounded to `compute`: for + - * / and sqrt this is the correctly
  // rounded result, since 53 >= 2p + 2 for p <= 24 (Figueroa, "When is double rounding
  // innocuous?", SIGNUM Newsl. 30(3), 1995); exp is libm's, rounded once more. In float, each
  // operation is that same correctly rounded result.
  const RowIndex at = row_index(p, row);
  const std::size_t kv = kv_head_of(p, at.h);
  const DType compute = std::is_same_v<T, float> ? DType::fp32 : DType::fp64;
  const T scale =
      static_cast<T>(r(static_cast<T>(round_to(compute, p.scale.value_or(1 / std::sqrt(static_cast<double>(p.E)))))));
  const double* q = p.query.data() + tensor_index(p, p.q_heads, p.L, p.E, at.b, at.h, at.i, 0);
  std::vector<const double*> values;  // v_j of each key taking part: Ev contiguous doubles
  std::vector<const double*> keys;    // k_j of each key taking part: E contiguous doubles
  std::vector<T> biases;
  for (std::size_t j = 0; j < p.S; ++j) {
    if (!takes_part(p, at.b, at.h, at.i, j)) continue;
    keys.push_back(p.key.data() + tensor_index(p, p.kv_heads, p.S, p.E, at.b, kv, j, 0));
    values.push_back(p.value.data() + tensor_index(p, p.kv_heads, p.S, p.Ev, at.b, kv, j, 0));
    biases.push_back(static_cast<T>(additive_bias(p, at.b, at.h, at.i, j)));
  }
  // Each dot product summed in order c = 0, 1, ...; four keys at a time, so that four independent
  // chains of additions overlap (the results are those of one key at a time).
  std::vector<T> scores(keys.size());
  constexpr std::size_t kChains = 4;
  for (std::size_t first = 0; first < keys.size(); first += kChains) {
    const std::size_t count = std::min(kChains, keys.size() - first);
    T dot[kChains] = {};
    const double* k[kChains];
    for (std::size_t t = 0; t < kChains; ++t) k[t] = keys[first + std::min(t, count - 1)];  // repeats are unused
    for (std::size_t c = 0; c < p.E; ++c) {
      const T query = static_cast<T>(q[c]);
      for (std::size_t t = 0; t < kChains; ++t) dot[t] = r(dot[t] + r(query * static_cast<T>(k[t][c])));
    }
    for (std::size_t t = 0; t < count; ++t) {
      T s = r(dot[t] * scale);
      if (p.softcap > 0) {
        const T c = static_cast<T>(p.softcap);
        s = r(c * r(static_cast<T>(round_to(compute, std::tanh(static_cast<double>(r(s / c)))))));
      }
      scores[first + t] = r(s + biases[first + t]);
    }
  }
  std::vector<T> out(p.Ev, 0);
  std::vector<double> rounded(p.Ev, 0.0);
  if (values.empty()) return rounded;
  const std::vector<double> zeros(p.Ev, 0.0);
  if (has_sinks(p)) {  // the sink's logit joins the denominator, with no value
    scores.push_back(static_cast<T>(sink_of(p, at.h)));
    values.push_back(zeros.data());
  }
  const T top = *std::max_element(scores.begin(), scores.end());
  T total = 0;
  for (T& s : scores)
    total = r(total + (s = r(static_cast<T>(round_to(compute, std::exp(static_cast<double>(r(s - top))))))));
  for (std::size_t t = 0; t < values.size(); ++t) {
    const T weight = r(scores[t] / total);
    const double* v = values[t];
    for (std::size_t c = 0; c < p.Ev; ++c) out[c] = r(out[c] + r(weight * static_cast<T>(v[c])));
  }
  for (std::size_t c = 0; c < p.Ev; ++c) rounded[c] = round_to(p.dtype, out[c]);
  return rounded;
}

}  // namespace

FineEnclosure fine_enclosure(const MpfiInterval& x) { return fine_of(x.get(), mpfi_get_prec(x.get())); }

RowEnclosure enclose_row(const TensorProblem& problem, std::size_t row, int bits) {
  return evaluate(prepare(problem, row), std::max(bits, 64));
}

RowEnclosure enclose_row(const TensorProblem& problem, std::size_t row, std::span<const double> targets,
                         const EnclosureSchedule& schedule) {
  if (targets.size() != problem.Ev) throw ContractError("enclose_row: one target per output column needed");
  const auto narrow_enough = [&](const RowEnclosure& e) {
    for (std::size_t c = 0; c < targets.size(); ++c) {
      if (!(2 * e.fine[c].radius <= targets[c])) return false;
    }
    return true;
  };
  if (schedule.fast_first) {
    if (std::optional<RowEnclosure> fast = enclose_row_fast(problem, row); fast && narrow_enough(*fast)) return *fast;
  }
  const RowData data = prepare(problem, row);
  const int cap = std::max(schedule.max_bits, 64);
  for (int bits = std::clamp(schedule.initial_bits, 64, cap);; bits = std::min(2 * bits, cap)) {  // Step 5
    RowEnclosure out = evaluate(data, bits);
    const bool narrow = narrow_enough(out);
    if (narrow || bits >= cap) {
      out.capped = !narrow;
      return out;
    }
  }
}

Distance distance_to(const FineEnclosure& exact, double got) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (!std::isfinite(got)) return {kInf, kInf, kInf};
  if (exact.tail == 0) {
    // got - head = s + error exactly (Knuth's TwoSum, no overflow: s is finite), |error| <= half an
    // ulp of s, so |got - head| is |s| rounded to nearest, and within one step of |s| in the
    // direction of error's sign relative to s.
    const double s = got - exact.head;
    if (std::isfinite(s)) {
      const double shifted = s - got;
      const double error = (got - (s - shifted)) + (-exact.head - shifted);
      const bool away = error != 0 && std::signbit(error) == std::signbit(s);  // |got - head| > |s|
      const bool toward = error != 0 && !away;                                 // |got - head| < |s|
      const double magnitude = std::fabs(s);
      const double below = toward ? next_down(magnitude) : magnitude, above = away ? next_up(magnitude) : magnitude;
      return {std::max(0.0, next_down(below - exact.radius)), next_up(above + exact.radius), magnitude};
    }
  }
  MpfrFloat a(53), b(53), c(53), difference(53), bound(53);
  mpfr_set_d(a.get(), got, MPFR_RNDN);  // exact, as the next two
  mpfr_set_d(b.get(), -exact.head, MPFR_RNDN);
  mpfr_set_d(c.get(), -exact.tail, MPFR_RNDN);
  mpfr_ptr terms[] = {a.get(), b.get(), c.get()};
  Distance out;
  mpfr_sum(difference.get(), terms, 3, MPFR_RNDN);
  out.to_mid = std::fabs(mpfr_get_d(difference.get(), MPFR_RNDN));
  mpfr_sum(difference.get(), terms, 3, MPFR_RNDZ);  // |.| rounded down
  mpfr_abs(difference.get(), difference.get(), MPFR_RNDN);
  mpfr_sub_d(bound.get(), difference.get(), exact.radius, MPFR_RNDD);
  out.lower = std::max(0.0, mpfr_get_d(bound.get(), MPFR_RNDD));
  mpfr_sum(difference.get(), terms, 3, MPFR_RNDA);  // |.| rounded up
  mpfr_abs(difference.get(), difference.get(), MPFR_RNDN);
  mpfr_add_d(bound.get(), difference.get(), exact.radius, MPFR_RNDU);
  out.upper = mpfr_get_d(bound.get(), MPFR_RNDU);
  return out;
}

std::vector<double> plain_row(const TensorProblem& p, std::size_t row, DType compute) {
  // fp32 compute on inputs that are floats: float arithmetic is the same rounding, and vectorizes.
  if (compute == DType::fp32 && p.dtype != DType::fp64) return plain_row_in<float>(p, row, [](float x) { return x; });
  return plain_row_in<double>(p, row, [compute](double x) { return round_to(compute, x); });
}

}  // namespace attn::verify
