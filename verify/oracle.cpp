#include "oracle.hpp"

#include <boost/multiprecision/mpfi.hpp>
#include <mutex>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

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
// arithmetic on doubles (FastBounds below), its exponentials taken from a per-instance table of
// MPFI-computed e^{-d·16^l·f}. It decides a cell only when no rounding boundary lies in its
// enclosure; anything else (a boundary inside, a value past 2^50 units, inputs past 2^900) goes on
// to Ziv's loop exactly as before. It only replaces a first pass of at least 53 bits.

namespace attn::verify {
namespace {

using Real = boost::multiprecision::mpfi_float;

// Boost 1.74 keeps the precision of variable-precision numbers in one process-wide default, so
// the oracle sets it for the duration of an evaluation, holding a lock meanwhile: evaluations from
// several threads (stress --jobs) take turns instead of changing each other's precision.
class PrecisionScope {
 public:
  explicit PrecisionScope(int bits) : lock_(mutex()), saved_(Real::default_precision()) {
    // Boost takes decimal digits and allocates at least digits10 · 1000/301 bits.
    Real::default_precision(static_cast<unsigned>((bits * 301 + 999) / 1000));
  }
  ~PrecisionScope() { Real::default_precision(saved_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  static std::recursive_mutex& mutex() {
    static std::recursive_mutex instance;
    return instance;
  }
  std::unique_lock<std::recursive_mutex> lock_;
  unsigned saved_;
};

mpfr_srcptr left_of(const Real& x) { return &x.backend().data()[0].left; }
mpfr_srcptr right_of(const Real& x) { return &x.backend().data()[0].right; }

Real from_integer(const Integer& z) {
  Real x;
  mpfi_set_z(x.backend().data(), z.backend().data());  // rounds outwards when z has too many bits
  return x;
}

Interval to_interval(const Real& x) {
  return {mpfr_get_d(left_of(x), MPFR_RNDD), mpfr_get_d(right_of(x), MPFR_RNDU)};
}

Integer floor_of(mpfr_srcptr x, mpfr_rnd_t mode) {
  Integer out;
  mpfr_get_z(out.backend().data(), x, mode);
  return out;
}

// 10^-dot_exponent / σ: turns an integer dot-product difference into a score difference.
Real score_factor(const ExactDivisor& divisor, long dot_exponent) {
  const Real unit = from_integer(power_of_ten(dot_exponent));
  switch (divisor.kind) {
    case ScaleKind::none: return Real(1) / unit;
    case ScaleKind::sqrt_head_dim: return Real(1) / (unit * sqrt(Real(divisor.radicand)));
    case ScaleKind::explicit_value: {
      const Real numerator = from_integer(power_of_ten(divisor.value.exponent));
      return numerator / (from_integer(divisor.value.mantissa) * unit);
    }
  }
  return Real(1) / unit;
}

// [-r, r] for the upper end r of x >= 0.
Real symmetric(const Real& x) {
  Real out;
  mpfr_t low;
  mpfr_init2(low, mpfr_get_prec(right_of(x)));
  mpfr_neg(low, right_of(x), MPFR_RNDD);  // exact
  mpfi_interv_fr(out.backend().data(), low, right_of(x));
  mpfr_clear(low);
  return out;
}

// The block at the current precision: e^{t_g} per group and the softmax denominator Σ n_g e^{t_g}.
// A group whose t_g lies below -L, L >= (bits + 64)·ln 2, is a "tail" group: its e^{t_g} is only
// bounded, by [0, e^{-L}], since it moves the result by less than 2^-64 of the working precision
// (the top group contributes exactly 1 to the denominator). For typical AI006 inputs almost every
// key is a tail key, and skipping their exponentials and products is most of the oracle's speed.
struct Exponentials {
  Real factor;                 ///< 10^-dot_exponent / σ
  std::vector<Real> group;     ///< e^{t_g}, or [0, e^{-L}] for a tail group
  std::vector<bool> tail;
  Real tail_bound;             ///< [0, e^{-L}]
  Real total;
};

Real group_argument(const ExactBlock& block, const Real& factor, std::size_t g) {
  return from_integer(block.group_dot[g] - block.group_dot[0]) * factor;
}

// An integer threshold above which a dot-product gap is surely a tail gap: ceil(L·σ·10^e) with
// every quantity rounded upwards, so gap > threshold implies t_g < -L.
Integer tail_threshold(const Real& factor, int bits) {
  Real log2;
  mpfi_const_log2(log2.backend().data());
  const Real gap = Real(bits + 64) * log2 / factor;  // L / (10^-e / σ), enclosed
  return floor_of(right_of(gap), MPFR_RNDU);
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
  Integer tail_magnitude = 0;
  for (std::size_t g = 0; g < e.group.size(); ++g) {
    if (e.tail[g]) {
      const auto value = block.value_sum(g, c).backend().data();
      const auto sum = tail_magnitude.backend().data();
      mpz_sgn(value) >= 0 ? mpz_add(sum, sum, value) : mpz_sub(sum, sum, value);  // no temporary
    } else {
      numerator += from_integer(block.value_sum(g, c)) * e.group[g];
    }
  }
  if (tail_magnitude != 0) numerator += symmetric(Real(from_integer(tail_magnitude) * e.tail_bound));
  return numerator / (e.total * unit);
}

// The exact rational value of a rational cell: num / den.
std::pair<Integer, Integer> rational_value(const ExactBlock& block, std::size_t c) {
  if (block.keys.empty()) return {Integer(0), Integer(1)};
  return {block.value_sum(0, c), Integer(block.group_size[0]) * power_of_ten(block.value_exponent)};
}

// Sign of y_c - o/2 · 10^-decimals (Step 5): +1, -1, or 0 when this precision cannot tell. Tail
// groups get their exponential computed here: after exact cancellation they may be all there is.
int side_of_boundary(const ExactBlock& block, const Exponentials& e, std::size_t c, int decimals,
                     const Integer& odd) {
  const Integer twice_scale = 2 * power_of_ten(decimals);
  const Integer boundary_scale = odd * power_of_ten(block.value_exponent);
  Real sum = 0;
  for (std::size_t g = 0; g < e.group.size(); ++g) {
    const Integer coefficient = twice_scale * block.value_sum(g, c) - boundary_scale * block.group_size[g];
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
  mpfr_t twice_lo, twice_hi;
  mpfr_init2(twice_lo, mpfr_get_prec(left_of(x)));
  mpfr_init2(twice_hi, mpfr_get_prec(right_of(x)));
  mpfr_mul_2ui(twice_lo, left_of(x), 1, MPFR_RNDD);  // exact: doubling never rounds
  mpfr_mul_2ui(twice_hi, right_of(x), 1, MPFR_RNDU);
  const Integer floor_lo = floor_of(twice_lo, MPFR_RNDD);
  const Integer ceil_lo = floor_of(twice_lo, MPFR_RNDU);
  const Integer floor_hi = floor_of(twice_hi, MPFR_RNDD);
  mpfr_clear(twice_lo);
  mpfr_clear(twice_hi);
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
  mpfr_t middle;
  mpfr_init2(middle, mpfr_get_prec(left_of(x)) + 2);
  mpfi_mid(middle, x.backend().data());
  Integer out;
  mpfr_get_z(out.backend().data(), middle, MPFR_RNDN);
  mpfr_clear(middle);
  return out;
}

// The exact rational num/den (den > 0) as a double interval, 1 ulp wide: both MPFR divisions are
// correctly rounded in the directed mode, and the operands are set exactly (precision = their bits).
Interval rational_interval(const Integer& num, const Integer& den) {
  const auto bits_of = [](const Integer& z) {
    return static_cast<mpfr_prec_t>(std::max<std::size_t>(mpz_sizeinbase(z.backend().data(), 2), 2));
  };
  mpfr_t n, d, q;
  mpfr_init2(n, bits_of(num));
  mpfr_init2(d, bits_of(den));
  mpfr_init2(q, 53);
  mpfr_set_z(n, num.backend().data(), MPFR_RNDN);  // exact
  mpfr_set_z(d, den.backend().data(), MPFR_RNDN);  // exact
  Interval out;
  mpfr_div(q, n, d, MPFR_RNDD);
  out.lo = mpfr_get_d(q, MPFR_RNDD);  // exact: q has 53 bits
  mpfr_div(q, n, d, MPFR_RNDU);
  out.hi = mpfr_get_d(q, MPFR_RNDU);
  mpfr_clear(n);
  mpfr_clear(d);
  mpfr_clear(q);
  return out;
}

// Interval arithmetic on doubles for the fast first pass (Step 6). Each operation is evaluated in
// round-to-nearest and its result moved one double outwards: the round-to-nearest error is at most
// half the spacing of doubles next to the result (one subnormal step at most below 2^-1022, so an
// underflow to 0 is covered by ±2^-1074), hence the widened result contains the exact one. No
// overflow or NaN can arise: inputs are below 2^900 in magnitude (fast_bounds), exponentials are
// in [0, 1], and the only divisor, Σ n_g e^{t_g} · 10^e, is at least 1 (the top group's e^0 = 1).
struct FastBounds {
  double lo = 0;
  double hi = 0;
};

// The neighbouring double below / above a finite x, by its bit pattern (std::nextafter is a libm
// call, and these run for every operation).
double down(double x) {
  if (!std::isfinite(x)) return std::nextafter(x, -HUGE_VAL);
  if (x == 0) return -std::numeric_limits<double>::denorm_min();
  const auto bits = std::bit_cast<std::uint64_t>(x);
  return std::bit_cast<double>(x > 0 ? bits - 1 : bits + 1);
}
double up(double x) { return -down(-x); }

FastBounds operator+(FastBounds a, FastBounds b) { return {down(a.lo + b.lo), up(a.hi + b.hi)}; }

FastBounds operator*(FastBounds a, FastBounds b) {
  const double p[] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  return {down(std::min({p[0], p[1], p[2], p[3]})), up(std::max({p[0], p[1], p[2], p[3]}))};
}

// a / b for b.lo > 0.
FastBounds operator/(FastBounds a, FastBounds b) {
  return {down(a.lo / (a.lo >= 0 ? b.hi : b.lo)), up(a.hi / (a.hi >= 0 ? b.lo : b.hi))};
}

// An integer as bounds; false past 2^900 (the no-overflow argument above needs the margin).
bool fast_bounds(const Integer& z, FastBounds& out) {
  const mpz_srcptr p = z.backend().data();
  const std::size_t bits = mpz_sizeinbase(p, 2);
  if (bits > 900) return false;
  // mpz_get_d truncates towards zero: exact within 53 bits, else less than one ulp inside.
  const double d = mpz_get_d(p);
  out = bits <= 53 ? FastBounds{d, d} : FastBounds{down(d), up(d)};
  return true;
}

// What the fast pass needs of one score factor f = 10^-dot_exponent / σ, computed once per
// instance (per thread): the tail threshold for 64 bits (as in `exponentials`), e^{-L} rounded
// up, and digits[l][d] ⊇ e^{-d·16^l·f} for the hexadecimal digits d of any gap up to the
// threshold, each an MPFI enclosure rounded outwards to doubles.
struct FastTable {
  bool built = false;
  bool usable = false;  ///< the threshold fits in 64 bits, so every non-tail gap is a uint64
  long dot_exponent = 0;
  ScaleKind kind = ScaleKind::none;
  std::size_t radicand = 0;
  ScaledDecimal value;
  Integer threshold;
  double tail_upper = 0;
  std::vector<std::array<FastBounds, 16>> digits;

  bool matches(const ExactDivisor& divisor, long exponent) const {
    return built && dot_exponent == exponent && kind == divisor.kind && radicand == divisor.radicand &&
           value.exponent == divisor.value.exponent && value.mantissa == divisor.value.mantissa;
  }
};

constexpr int kFastTableBits = 64;

FastBounds fast_of(const Real& x) {
  return {mpfr_get_d(left_of(x), MPFR_RNDD), mpfr_get_d(right_of(x), MPFR_RNDU)};
}

const FastTable& fast_table(const ExactDivisor& divisor, long dot_exponent) {
  thread_local FastTable table;
  if (table.matches(divisor, dot_exponent)) return table;
  PrecisionScope scope(kFastTableBits);
  table.built = true;
  table.dot_exponent = dot_exponent;
  table.kind = divisor.kind;
  table.radicand = divisor.radicand;
  table.value = divisor.value;
  const Real factor = score_factor(divisor, dot_exponent);
  table.threshold = tail_threshold(factor, kFastTableBits);
  table.tail_upper = mpfr_get_d(right_of(Real(exp(-(from_integer(table.threshold) * factor)))), MPFR_RNDU);
  table.usable = mpz_fits_ulong_p(table.threshold.backend().data()) && sizeof(unsigned long) >= 8;
  table.digits.clear();
  if (!table.usable) return table;
  Integer place = 1;  // 16^l
  for (Integer rest = table.threshold; rest != 0; rest >>= 4, place <<= 4) {
    std::array<FastBounds, 16>& level = table.digits.emplace_back();
    level[0] = {1, 1};
    for (unsigned d = 1; d < 16; ++d) {
      level[d] = fast_of(Real(exp(-(from_integer(place * d) * factor))));
    }
  }
  return table;
}

// x = y·10^k rounded to an integer when no rounding boundary (odd integer of 2x) lies in [lo, hi];
// as round_scaled, in doubles: below 2^50 every doubling, floor and ceiling here is exact.
bool fast_round(FastBounds x, long long& out) {
  if (!(std::fabs(x.lo) < 0x1p50 && std::fabs(x.hi) < 0x1p50)) return false;
  const auto floor_lo = static_cast<long long>(std::floor(2 * x.lo));
  const auto ceil_lo = static_cast<long long>(std::ceil(2 * x.lo));
  const auto floor_hi = static_cast<long long>(std::floor(2 * x.hi));
  const long long odd = ceil_lo % 2 != 0 ? ceil_lo : ceil_lo + 1;
  if (odd <= floor_hi) return false;
  out = (floor_lo + 1) >> 1;  // floor division by 2 (C++20 shifts are arithmetic)
  return true;
}

// The fast first pass on one block (Step 6). Decides what it can of `pending`, leaves the rest in
// `undecided`, and fills the weights; false (nothing decided) when inputs are out of its range.
bool fast_pass(const ExactInstance& exact, const ExactBlock& block, int decimals, const std::vector<std::size_t>& pending,
               BlockAnswer& answer, std::vector<std::size_t>& undecided) {
  const FastTable& table = fast_table(exact.divisor, block.dot_exponent);
  FastBounds unit, scale;
  if (!table.usable || !fast_bounds(power_of_ten(block.value_exponent), unit) ||
      !fast_bounds(power_of_ten(decimals), scale)) {
    return false;
  }
  // e^{t_g} per group from the table's digits, [0, e^{-L}] for a tail group, and the denominator.
  const std::size_t groups = block.group_dot.size();
  std::vector<FastBounds> e(groups);
  std::vector<bool> tail(groups, false);
  FastBounds total{0, 0};
  Integer gap;
  for (std::size_t g = 0; g < groups; ++g) {
    mpz_sub(gap.backend().data(), block.group_dot[0].backend().data(), block.group_dot[g].backend().data());
    tail[g] = gap > table.threshold;
    if (tail[g]) {
      e[g] = {0, table.tail_upper};
    } else {
      e[g] = {1, 1};
      unsigned long rest = mpz_get_ui(gap.backend().data());  // gap <= threshold < 2^64
      for (std::size_t l = 0; rest != 0; ++l, rest >>= 4) {
        if ((rest & 15) != 0) e[g] = e[g] * table.digits[l][rest & 15];
      }
    }
    const auto size = static_cast<double>(block.group_size[g]);  // exact: far below 2^53
    total = total + e[g] * FastBounds{size, size};
  }
  const FastBounds denominator = total * unit;
  for (std::size_t c : pending) {
    // Tail groups together move the numerator by at most Σ_tail |c_g| e^{-L}, as in cell_enclosure.
    FastBounds numerator{0, 0};
    double tail_magnitude = 0;
    for (std::size_t g = 0; g < groups; ++g) {
      FastBounds value;
      if (!fast_bounds(block.value_sum(g, c), value)) return false;
      if (tail[g]) {
        tail_magnitude = up(tail_magnitude + std::max(std::fabs(value.lo), std::fabs(value.hi)));
      } else {
        numerator = numerator + value * e[g];
      }
    }
    const double tail_move = up(tail_magnitude * table.tail_upper);
    numerator = numerator + FastBounds{-tail_move, tail_move};
    const FastBounds y = numerator / denominator;
    long long rounded = 0;
    if (!fast_round(y * scale, rounded)) {
      undecided.push_back(c);
      continue;
    }
    OracleCell& cell = answer.cells[c];
    cell.value = {y.lo, y.hi};
    cell.canonical = fixed_text(Integer(rounded), decimals);
  }
  for (std::size_t t = 0; t < block.keys.size(); ++t) {
    const FastBounds weight = e[block.group_of[t]] / total;
    answer.weights.push_back({weight.lo, weight.hi});
    answer.weight_rational.push_back(groups == 1);
  }
  return true;
}

}  // namespace

BlockAnswer oracle_block(const ExactInstance& exact, const ExactBlock& block, int decimals,
                         const OracleOptions& options) {
  BlockAnswer answer;
  answer.cells.resize(block.head_v);
  answer.bits = options.initial_bits;
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
      answer.bits = 53;
      if (undecided.empty()) return answer;
      // Ziv's loop below recomputes the weights along with the undecided cells.
      answer.weights.clear();
      answer.weight_rational.clear();
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
      answer.weight_rational.push_back(block.group_dot.size() == 1);
    }
    answer.bits = bits;
    return answer;
  }
}

OracleAnswer oracle(const Instance& instance, const OracleOptions& options) {
  const ExactInstance exact = make_exact(instance);
  OracleAnswer answer;
  answer.rows = instance.batch.size() * instance.n;
  answer.cols = instance.d_v;
  answer.decimals = instance.decimals;
  answer.cells.resize(answer.rows * answer.cols);
  answer.weights.resize(instance.batch.size() * instance.heads * instance.n * instance.m);
  ExactBlock block;  // reused: its integers keep their storage from block to block
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t i = 0; i < instance.n; ++i) {
      for (std::size_t g = 0; g < instance.heads; ++g) {
        exact_block(exact, b, i, g, block);
        BlockAnswer part = oracle_block(exact, block, instance.decimals, options);
        for (std::size_t c = 0; c < block.head_v; ++c) {
          answer.cells[(b * instance.n + i) * answer.cols + g * block.head_v + c] = std::move(part.cells[c]);
        }
        for (std::size_t t = 0; t < block.keys.size(); ++t) {
          answer.weights[((b * instance.heads + g) * instance.n + i) * instance.m + block.keys[t]] = part.weights[t];
        }
      }
    }
  }
  return answer;
}

std::string canonical_text(const std::vector<OracleCell>& cells, std::size_t cols) {
  std::string out;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    out += cells[i].canonical;
    out += (i + 1) % cols == 0 ? '\n' : ' ';
  }
  return out;
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
