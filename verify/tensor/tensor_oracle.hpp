// The exact result of one row of a TensorProblem, as rigorous enclosures: the output values, the
// softmax weights and the per-key quantities an error band needs. Inputs are dyadic rationals, so
// every dot product is computed exactly; the only inexact steps are the scale 1/√E and the
// exponentials, both enclosed with MPFI (outward rounding). No libm call is involved. A fast first
// pass (enclose_row_fast) gives the same enclosures in outward-rounded double intervals with a
// rigorous exp (double_interval.hpp); MPFI runs only where it is not narrow enough.
// Also a straightforward same-precision evaluation, the non-deciding second signal of a report.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "numeric/interval.hpp"
#include "tensor/tensor.hpp"

namespace attn::verify {

/// An enclosure finer than a double can hold: exact ∈ [head + tail - radius, head + tail + radius].
// A band of a few fp64 ulps can only be judged to 0.1% of itself with a midpoint of ~106 bits.
struct FineEnclosure {
  double head = 0;    ///< the midpoint rounded to a double
  double tail = 0;    ///< the rest of the midpoint, rounded to a double
  double radius = 0;  ///< rounded upwards
};

class MpfiInterval;  // numeric/mpfr.hpp

/// The fine enclosure of an MPFI interval: its midpoint as head + tail, the radius rounded up
/// (exact sums: no cancellation error). A point interval has radius 0.
[[nodiscard]] FineEnclosure fine_enclosure(const MpfiInterval& x);

/// One row (b, h, i) of a problem, enclosed.
struct RowEnclosure {
  bool empty = false;               ///< no key takes part: every output is exactly 0
  std::vector<std::size_t> keys;    ///< the keys j that take part, ascending
  std::vector<Interval> weights;    ///< softmax weight of each key of `keys`
  std::vector<Interval> scores;     ///< scale·(q·k_j) + bias_j of each key of `keys`
  std::vector<Interval> dots;       ///< q·k_j of each key of `keys` (MPFI: exact, rounded outwards)
  std::vector<double> abs_dots;     ///< Σ_c |q_c k_jc| of each key of `keys`, rounded upwards
  Interval scale;                   ///< the multiplier of q·k (exact 1/√E enclosed when defaulted)
  double max_abs_value = 0;         ///< max |v_jc| over the keys of `keys` and all c
  std::vector<Interval> out;        ///< the Ev outputs, rounded outwards to doubles
  std::vector<FineEnclosure> fine;  ///< the Ev outputs, to the working precision
  /// The row's log-sum-exp, natural log: log Σ_j e^{s_j} over the keys taking part (s_j as in
  /// `scores`), rounded outwards and to the working precision; -inf (head -inf, radius 0) when empty.
  Interval lse{-std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  FineEnclosure lse_fine{-std::numeric_limits<double>::infinity(), 0, 0};
  int bits = 0;                     ///< working precision of the last evaluation (53: the fast pass)
  bool capped = false;              ///< a target width was not reached at the cap
  bool fast = false;                ///< from enclose_row_fast (double intervals; every tail is 0)
};

/// Enclosure of row `row` (see row_index) at `bits` bits of working precision (at least 64).
/// Throws ContractError when row >= B·Hq·L. The problem is assumed valid (validate()).
[[nodiscard]] RowEnclosure enclose_row(const TensorProblem& problem, std::size_t row, int bits);

/// The fast first pass: enclosure of row `row` in outward-rounded double interval arithmetic, in
/// O(S·(E + Ev)) double operations (derivation in tensor_oracle_fast.cpp). Rigorous like the MPFI
/// evaluation, but wider: ~(n·2^-53 + the scores' widths) relative to Σ w_j |v_j| for n keys (about
/// 1e-13 at n = 4096), and `dots` are enclosed, not exact.
/// nullopt when doubles cannot hold the row: a quantity overflows, or scores so large that their
/// enclosures leave Σ e^{s_j - max} without a positive lower bound (then use the MPFI evaluation).
/// Throws ContractError when row >= B·Hq·L. The problem is assumed valid (validate()).
[[nodiscard]] std::optional<RowEnclosure> enclose_row_fast(const TensorProblem& problem, std::size_t row);

/// Precision schedule of the targeted enclosure.
struct EnclosureSchedule {
  int initial_bits = 64;   ///< already ~2^-60 relative for well-scaled rows
  int max_bits = 1024;     ///< past this the row is reported `capped` with the last enclosure
  bool fast_first = true;  ///< try enclose_row_fast first (false: a caller that already did)
};

/// Enclosure of row `row` whose output c has 2·radius <= targets[c] (targets.size() == Ev): the
/// fast pass when it is narrow enough, else MPFI doubling the precision from
/// schedule.initial_bits up to schedule.max_bits (Ziv's strategy).
[[nodiscard]] RowEnclosure enclose_row(const TensorProblem& problem, std::size_t row, std::span<const double> targets,
                                       const EnclosureSchedule& schedule = {});

/// |got - exact|, lower and upper bounds from a fine enclosure (mpfr_sum: no cancellation error).
struct Distance {
  double lower = 0;   ///< max(0, |got - mid| - radius), rounded down
  double upper = 0;   ///< |got - mid| + radius, rounded up
  double to_mid = 0;  ///< |got - mid| rounded to nearest
};
/// The distance from `got` to the exact value `exact` encloses (all +inf when got is not finite).
[[nodiscard]] Distance distance_to(const FineEnclosure& exact, double got);

/// The row computed plainly in `compute` precision (every operation rounded to it, std::exp, the
/// max shift, one division per weight), then rounded to problem.dtype. Ev values; zeros when empty.
[[nodiscard]] std::vector<double> plain_row(const TensorProblem& problem, std::size_t row, DType compute);

}  // namespace attn::verify
