#include "judge/oracle.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "judge/oracle_fast.hpp"
#include "numeric/mpfr.hpp"

// The exact value of an output cell, and why ties can be decided exactly.
//
// Step 1. For one query row i and one head, let D_j = q_i·k_j (head block only) for the visible
// keys j. The decimals are exact rationals, so every D_j is an exact rational, computed here as an
// integer over 10^dot_exponent (exact.cpp). The scores are s_j = D_j / σ with σ = 1, √(d_k/h) or
// a positive decimal: algebraic numbers.
// Step 2. Group the visible keys by exactly equal D_j: groups g with distinct scores s_g, n_g keys,
// and c_g = Σ_{j in g} V[j][c] (exact). Softmax is shift invariant, so with t_g = s_g - s_top <= 0
//     y_c = Σ_g c_g e^{t_g} / Σ_g n_g e^{t_g}.
// Step 3 (Lindemann–Weierstrass). For distinct algebraic t_g the numbers e^{t_g} are linearly
// independent over the algebraic numbers. So for an algebraic r, y_c = r holds iff
// Σ_g (c_g - r n_g) e^{t_g} = 0 iff c_g = r n_g for every g. Hence y_c is algebraic iff every
// group has the same mean c_g / n_g, and then y_c is exactly that rational mean (this covers a
// single visible key and all-equal scores). Likewise a weight e^{t_g} / Σ n e^t is algebraic iff
// there is a single group, and then it is 1/n.
// Step 4. Rounding boundaries (m + 1/2)·10^-k are rational. A rational cell is rounded exactly
// (ties to even, exact tie reported). Any other cell is transcendental, never on a boundary, so
// Ziv's loop below terminates; the cap max_bits only stops values astronomically close to one.
// Step 5. When an enclosure holds exactly one boundary b, the side of b is the sign of
// Σ_g (c_g - b n_g) e^{t_g}. Terms whose coefficient is exactly zero are dropped, so a value like
// V_top - (V_top - V_other)·e^{-10^6} (one dominant key whose V sits on a boundary, common in
// AI006/AI031 cases) is decided at the first precision instead of needing 10^6 bits.
// Step 6 (the fast first pass). Before any MPFI work, each block is tried once with interval
// arithmetic on doubles (oracle_fast.cpp), its exponentials taken from a per-instance table of
// MPFI-computed e^{-d·16^l·f}. It decides a cell only when no rounding boundary lies in its
// enclosure; anything else (a boundary inside, a value past 2^50 units, inputs past 2^900) goes on
// to Ziv's loop exactly as before. It only replaces a first pass of at least 53 bits.

namespace attn::verify {
namespace {

// [-r, r] for the upper end r of x >= 0.
Real symmetric(const Real& x) {
  Real out;
  MpfrFloat low(mpfr_get_prec(right_of(x)));
  mpfr_neg(low.get(), right_of(x), MPFR_RNDD);  // exact
  mpfi_interv_fr(out.backend().data(), low.get(), right_of(x));
  return out;
}

// The block at the current precision: e^{t_g} per group and the softmax denominator Σ n_g e^{t_g}.
// A group whose t_g lies below -L, L >= (bits + 64)·ln 2, is a "tail" group: its e^{t_g} is only
// bounded, by [0, e^{-L}], since it moves the result by less than 2^-64 of the working precision
// (the top group contributes exactly 1 to the denominator). For typical AI006 inputs almost every
// key is a tail key, and skipping their exponentials and products is most of the oracle's speed.
struct Exponentials {
  Real factor;              ///< 10^-dot_exponent / σ
  std::vector<Real> group;  ///< e^{t_g}, or [0, e^{-L}] for a tail group
  std::vector<bool> tail;
  Real tail_bound;  ///< [0, e^{-L}]
  Real total;
};

Real group_argument(const ExactBlock& block, const Real& factor, std::size_t g) {
  return from_integer(block.group_dot[g] - block.group_dot[0]) * factor;
}

Exponentials exponentials(const ExactInstance& exact, const ExactBlock& block, int bits, bool bound_tail = true) {
  Exponentials out;
  out.factor = score_factor(exact.divisor, block.dot_exponent);
  const Integer threshold = tail_threshold(out.factor, bits);
  // e^{-L} with L = threshold · factor >= (bits + 64)·ln 2, as [0, upper].
  out.tail_bound = exp(-(from_integer(threshold) * out.factor));
  mpfr_set_zero(&out.tail_bound.backend().data()[0].left, 1);
  out.total = 0;
  Integer gap;
  for (std::size_t g = 0; g < block.group_dot.size(); ++g) {
    mpz_sub(gap.backend().data(), block.group_dot[0].backend().data(), block.group_dot[g].backend().data());
    const bool tail = bound_tail && gap > threshold;
    out.group.push_back(g == 0 ? Real(1) : tail ? out.tail_bound : Real(exp(group_argument(block, out.factor, g))));
    out.tail.push_back(tail);
    out.total += out.group.back() * block.group_size[g];
  }
  return out;
}

// Enclosure of y_c: the tail groups together move the numerator by at most Σ_tail |c_g| e^{-L}.
Real cell_enclosure(const ExactBlock& block, const Exponentials& e, std::size_t c, const Real& unit) {
  Real numerator = 0;
  Integer tail_magnitude = 0, scratch;
  for (std::size_t g = 0; g < e.group.size(); ++g) {
    if (e.tail[g]) {
      const auto value = block.value_sum(g, c, scratch).backend().data();
      const auto sum = tail_magnitude.backend().data();
      mpz_sgn(value) >= 0 ? mpz_add(sum, sum, value) : mpz_sub(sum, sum, value);  // no temporary
    } else {
      numerator += from_integer(block.value_sum(g, c, scratch)) * e.group[g];
    }
  }
  if (tail_magnitude != 0) numerator += symmetric(Real(from_integer(tail_magnitude) * e.tail_bound));
  return numerator / (e.total * unit);
}

// The exact rational value of a rational cell: num / den.
std::pair<Integer, Integer> rational_value(const ExactBlock& block, std::size_t c) {
  if (block.keys.empty()) return {Integer(0), Integer(1)};
  Integer scratch;
  return {block.value_sum(0, c, scratch), Integer(block.group_size[0]) * power_of_ten(block.value_exponent)};
}

// Sign of y_c - o/2 · 10^-decimals (Step 5): +1, -1, or 0 when this precision cannot tell. Tail
// groups get their exponential computed here: after exact cancellation they may be all there is.
int side_of_boundary(const ExactBlock& block, const Exponentials& e, std::size_t c, int decimals, const Integer& odd) {
  const Integer twice_scale = 2 * power_of_ten(decimals);
  const Integer boundary_scale = odd * power_of_ten(block.value_exponent);
  Real sum = 0;
  Integer scratch;
  for (std::size_t g = 0; g < e.group.size(); ++g) {
    const Integer coefficient = twice_scale * block.value_sum(g, c, scratch) - boundary_scale * block.group_size[g];
    if (coefficient == 0) continue;
    sum += from_integer(coefficient) * (e.tail[g] ? Real(exp(group_argument(block, e.factor, g))) : e.group[g]);
  }
  if (mpfr_sgn(left_of(sum)) > 0) return 1;
  if (mpfr_sgn(right_of(sum)) < 0) return -1;
  return 0;
}

// Rounds y_c·10^k to an integer, if the enclosure decides it. Half-integers in X = y·10^k are the
// odd integers in 2X; with none the rounding is fixed, with one the boundary test decides.
bool round_scaled(const ExactBlock& block, const Exponentials& e, std::size_t c, int decimals, const Real& x,
                  Integer& out) {
  MpfrFloat twice_lo(mpfr_get_prec(left_of(x)));
  MpfrFloat twice_hi(mpfr_get_prec(right_of(x)));
  mpfr_mul_2ui(twice_lo.get(), left_of(x), 1, MPFR_RNDD);  // exact: doubling never rounds
  mpfr_mul_2ui(twice_hi.get(), right_of(x), 1, MPFR_RNDU);
  const Integer floor_lo = rounded_integer(twice_lo.get(), MPFR_RNDD);
  const Integer ceil_lo = rounded_integer(twice_lo.get(), MPFR_RNDU);
  const Integer floor_hi = rounded_integer(twice_hi.get(), MPFR_RNDD);
  const Integer odd = mpz_odd_p(ceil_lo.backend().data()) ? ceil_lo : Integer(ceil_lo + 1);
  if (odd > floor_hi) {  // no boundary: every point of X rounds to floor((floor(2 lo) + 1) / 2)
    out = floor_lo + 1;
    mpz_fdiv_q_2exp(out.backend().data(), out.backend().data(), 1);
    return true;
  }
  if (odd + 2 <= floor_hi) return false;  // two boundaries: the enclosure is still too wide
  const int side = side_of_boundary(block, e, c, decimals, odd);
  if (side == 0) return false;
  out = side > 0 ? Integer(odd + 1) : Integer(odd - 1);
  mpz_fdiv_q_2exp(out.backend().data(), out.backend().data(), 1);
  return true;
}

// Best guess past the cap: the rounding of the enclosure's midpoint.
Integer round_midpoint(const Real& x) {
  MpfrFloat middle(mpfr_get_prec(left_of(x)) + 2);
  mpfi_mid(middle.get(), x.backend().data());
  return rounded_integer(middle.get(), MPFR_RNDN);
}

// The exact rational num/den (den > 0) as a double interval, 1 ulp wide: both MPFR divisions are
// correctly rounded in the directed mode, and the operands are set exactly (precision = their bits).
Interval rational_interval(const Integer& num, const Integer& den) {
  const auto bits_of = [](const Integer& z) {
    return static_cast<mpfr_prec_t>(std::max<std::size_t>(mpz_sizeinbase(z.backend().data(), 2), 2));
  };
  MpfrFloat n(bits_of(num)), d(bits_of(den)), q(53);
  mpfr_set_z(n.get(), num.backend().data(), MPFR_RNDN);  // exact
  mpfr_set_z(d.get(), den.backend().data(), MPFR_RNDN);  // exact
  Interval out;
  mpfr_div(q.get(), n.get(), d.get(), MPFR_RNDD);
  out.lo = mpfr_get_d(q.get(), MPFR_RNDD);  // exact: q has 53 bits
  mpfr_div(q.get(), n.get(), d.get(), MPFR_RNDU);
  out.hi = mpfr_get_d(q.get(), MPFR_RNDU);
  return out;
}

}  // namespace

BlockAnswer oracle_block(const ExactInstance& exact, const ExactBlock& block, int decimals,
                         const OracleOptions& options) {
  BlockAnswer answer;
  answer.cells.resize(block.head_v);
  std::vector<std::size_t> pending;
  for (std::size_t c = 0; c < block.head_v; ++c) {
    OracleCell& cell = answer.cells[c];
    cell.rational = block.keys.empty() || is_rational_cell(block, c);
    if (!cell.rational) {
      pending.push_back(c);
      continue;
    }
    const auto [num, den] = rational_value(block, c);
    cell.canonical = fixed_text(round_half_even(num * power_of_ten(decimals), den, cell.exact_tie), decimals);
    cell.value = rational_interval(num, den);
  }
  if (block.keys.empty()) return answer;  // a fully masked row is exactly zero, with no weights
  if (options.initial_bits >= 53) {
    std::vector<std::size_t> undecided;
    if (fast_pass(exact, block, decimals, pending, answer, undecided)) {
      if (undecided.empty()) return answer;
      // Ziv's loop below recomputes the weights along with the undecided cells.
      answer.weights.clear();
      pending = std::move(undecided);
    }
  }
  for (int bits = std::max(options.initial_bits, 2);; bits = std::min(2 * bits, options.max_bits)) {
    PrecisionScope scope(bits);
    const Exponentials e = exponentials(exact, block, bits);
    const Real unit = from_integer(power_of_ten(block.value_exponent));
    const Real scale = from_integer(power_of_ten(decimals));
    const bool last = bits >= options.max_bits;
    std::vector<std::size_t> undecided;
    for (std::size_t c : pending) {
      const Real y = cell_enclosure(block, e, c, unit);
      const Real x = y * scale;
      OracleCell& cell = answer.cells[c];
      cell.value = to_interval(y);
      Integer rounded;
      if (round_scaled(block, e, c, decimals, x, rounded)) {
        cell.canonical = fixed_text(rounded, decimals);
      } else if (last) {
        cell.unresolved = true;
        cell.canonical = fixed_text(round_midpoint(x), decimals);
      } else {
        undecided.push_back(c);
      }
    }
    pending = std::move(undecided);
    if (!pending.empty()) continue;
    for (std::size_t t = 0; t < block.keys.size(); ++t) {
      answer.weights.push_back(to_interval(Real(e.group[block.group_of[t]] / e.total)));
    }
    return answer;
  }
}

SignificantDigits exact_digits(const ExactInstance& exact, const ExactBlock& block, std::size_t c, int significant,
                               const OracleOptions& options) {
  if (block.keys.empty() || is_rational_cell(block, c)) {
    const auto [num, den] = rational_value(block, c);
    return {significant_text(num, den, significant), true};
  }
  // Rounding to N digits is monotone: if both ends of the enclosure round alike, so does the value
  // (which is transcendental, so never itself on a boundary).
  auto digits_of = [significant](mpfr_srcptr x, long& exponent) {
    char* raw = mpfr_get_str(nullptr, &exponent, 10, static_cast<std::size_t>(significant), x, MPFR_RNDN);
    std::string text(raw);
    mpfr_free_str(raw);
    return text;
  };
  for (int bits = std::max(options.initial_bits, 4 * significant);; bits = std::min(2 * bits, options.max_bits)) {
    PrecisionScope scope(bits);
    // No tail bound here: a value can be far smaller than e^{-L} (a zero top-group mean), and its
    // significant digits then come from the tail.
    const Real y = cell_enclosure(block, exponentials(exact, block, bits, false), c,
                                  from_integer(power_of_ten(block.value_exponent)));
    long lo_exponent = 0;
    long hi_exponent = 0;
    const std::string lo = digits_of(left_of(y), lo_exponent);
    const std::string hi = digits_of(right_of(y), hi_exponent);
    const bool resolved = lo == hi && lo_exponent == hi_exponent;
    if (resolved || bits >= options.max_bits) {
      const bool negative = !lo.empty() && lo[0] == '-';
      return {positional_text(negative, negative ? lo.substr(1) : lo, lo_exponent), resolved};
    }
  }
}

}  // namespace attn::verify
