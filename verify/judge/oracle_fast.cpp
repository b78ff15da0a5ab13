#include "judge/oracle_fast.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "numeric/double_interval.hpp"
#include "numeric/mpfr.hpp"

namespace attn::verify {

std::recursive_mutex& PrecisionScope::mutex() {
  static std::recursive_mutex instance;
  return instance;
}

Real from_integer(const Integer& z) {
  Real x;
  mpfi_set_z(x.backend().data(), z.backend().data());  // rounds outwards when z has too many bits
  return x;
}

Integer rounded_integer(mpfr_srcptr x, mpfr_rnd_t mode) {
  Integer out;
  mpfr_get_z(out.backend().data(), x, mode);
  return out;
}

Interval to_interval(const Real& x) { return {mpfr_get_d(left_of(x), MPFR_RNDD), mpfr_get_d(right_of(x), MPFR_RNDU)}; }

Real score_factor(const ExactDivisor& divisor, long dot_exponent) {
  const Real unit = from_integer(power_of_ten(dot_exponent));
  switch (divisor.kind) {
    case ScaleKind::none:
      return Real(1) / unit;
    case ScaleKind::sqrt_head_dim:
      return Real(1) / (unit * sqrt(Real(divisor.radicand)));
    case ScaleKind::explicit_value: {
      const Real numerator = from_integer(power_of_ten(divisor.value.exponent));
      return numerator / (from_integer(divisor.value.mantissa) * unit);
    }
  }
  return Real(1) / unit;
}

// ceil(L·σ·10^e) with every quantity rounded upwards, so gap > threshold implies t_g < -L.
Integer tail_threshold(const Real& factor, int bits) {
  Real log2;
  mpfi_const_log2(log2.backend().data());
  const Real gap = Real(bits + 64) * log2 / factor;  // L / (10^-e / σ), enclosed
  return rounded_integer(right_of(gap), MPFR_RNDU);
}

namespace {

// Interval arithmetic on doubles for the fast first pass (Step 6) is double_interval.hpp's: each
// operation evaluated in round-to-nearest and moved one double outwards. No overflow or NaN can
// arise here: inputs are below 2^900 in magnitude (fast_bounds), exponentials are in [0, 1], and
// the only divisor, Σ n_g e^{t_g} · 10^e, is at least 1 (the top group's e^0 = 1).

// An integer as bounds; false past 2^900 (the no-overflow argument above needs the margin).
bool fast_bounds(const Integer& z, Interval& out) {
  const mpz_srcptr p = z.backend().data();
  const std::size_t bits = mpz_sizeinbase(p, 2);
  if (bits > 900) return false;
  // mpz_get_d truncates towards zero: exact within 53 bits, else less than one ulp inside.
  const double d = mpz_get_d(p);
  out = bits <= 53 ? Interval{d, d} : Interval{next_down(d), next_up(d)};
  return true;
}

// An int64 as bounds: exact up to 2^53 in magnitude, else the nearest double moved one ulp outwards.
Interval narrow_bounds(std::int64_t z) {
  constexpr std::int64_t kExact = std::int64_t{1} << 53;
  const auto d = static_cast<double>(z);
  return z >= -kExact && z <= kExact ? Interval{d, d} : Interval{next_down(d), next_up(d)};
}

// The table's tail threshold is Ziv's at 64 bits: a tail group's e^{t_g} is then below 2^-128,
// far below what a double enclosure can resolve.
constexpr int kFastTableBits = 64;

// The entries come from one exponential, b_0 = e^{-f}, by squaring (b_{l+1} = b_l^16) and powering
// (entry = b_l^d), at twice the table's precision. Squaring an enclosure about doubles its relative
// width, and each operation adds a rounding of 2^-128 at each end. The factor f comes out of
// score_factor's few 64-bit roundings enclosed to 2^-61..2^-63 relative, so an entry b_l^d = e^{-x},
// x = d·16^l·f, is about x·2^-62 wide, plus its own roundings amplified to at most about
// d·16^l·2^-127. An entry in use has x <= L + f with L = 128·ln 2 ≈ 89 (the tail threshold's), and
// d·16^l <= threshold < 2^64; so for f below L it stays under about 2^-54.5 (no wider than the
// exponential per entry it replaces, measured), inside the ulp (2^-52) that rounding it outwards to
// doubles adds. One exponential and a few dozen multiplications cost far less.
constexpr int kChainBits = 2 * kFastTableBits;

// What the fast pass needs of one score factor f = 10^-dot_exponent / σ: the tail threshold for 64
// bits (as in Ziv's loop), e^{-L} rounded up, and digits[l][d] ⊇ e^{-d·16^l·f} for the hexadecimal
// digits d of any gap up to the threshold, each an MPFI enclosure rounded outwards to doubles.
// Entries are filled on first use: a judge instance reuses one table for every block, while the
// small instances of a fuzz or stress run each touch a few dozen of the ~250 entries.
struct FastTable {
  bool usable = false;  ///< the threshold fits in 64 bits, so every non-tail gap is a uint64
  ExactDivisor divisor;
  long dot_exponent = 0;
  Integer threshold;
  double tail_upper = 0;
  MpfiInterval factor{kFastTableBits};  ///< f, enclosed at kFastTableBits
  std::vector<std::array<Interval, 16>> digits;
  std::vector<std::uint16_t> filled;  ///< per level: bit d set once digits[l][d] is computed
  std::vector<MpfiInterval> bases;    ///< bases[l] ⊇ e^{-16^l·f} at kChainBits, filled in order

  bool matches(const ExactDivisor& d, long exponent) const { return dot_exponent == exponent && divisor == d; }

  // e^{-d·16^l·f} = b_l^d, with MPFI's explicit-precision calls (no PrecisionScope: they do not
  // touch Boost's process-wide default).
  Interval digit(std::size_t level, unsigned d) {
    if ((filled[level] >> d & 1U) == 0) {
      thread_local MpfiInterval power(kChainBits);
      raise(power, level_base(level), d);
      digits[level][d] = power.doubles();
      filled[level] |= static_cast<std::uint16_t>(1U << d);
    }
    return digits[level][d];
  }

  // b_l: b_0 = e^{-f}, then b_l^16 per level.
  const MpfiInterval& level_base(std::size_t level) {
    if (bases.empty()) {
      MpfiInterval x(kChainBits);
      mpfi_neg(x.get(), factor.get());  // exact: f has fewer bits than x
      mpfi_exp(x.get(), x.get());
      bases.push_back(std::move(x));
    }
    while (bases.size() <= level) {
      MpfiInterval x(kChainBits);
      raise(x, bases.back(), 16);
      bases.push_back(std::move(x));
    }
    return bases[level];
  }

  // out = base^exponent (exponent >= 1) by binary powering.
  static void raise(MpfiInterval& out, const MpfiInterval& base, unsigned exponent) {
    thread_local MpfiInterval square(kChainBits);
    mpfi_set(square.get(), base.get());
    mpfi_set_ui(out.get(), 1);
    for (unsigned rest = exponent;; rest >>= 1) {
      if ((rest & 1U) != 0) mpfi_mul(out.get(), out.get(), square.get());
      if (rest <= 1) break;
      mpfi_sqr(square.get(), square.get());
    }
  }
};

// The table for (divisor, dot_exponent), from a per-thread cache of the most recent few: a stress
// or fuzz run alternates among a handful of scale rules and decimal counts.
FastTable& fast_table(const ExactDivisor& divisor, long dot_exponent) {
  constexpr std::size_t kCached = 32;
  thread_local std::vector<FastTable> tables;
  thread_local std::size_t next_victim = 0;
  for (FastTable& table : tables) {
    if (table.matches(divisor, dot_exponent)) return table;
  }
  FastTable table;
  table.divisor = divisor;
  table.dot_exponent = dot_exponent;
  {
    PrecisionScope scope(kFastTableBits);
    const Real factor = score_factor(divisor, dot_exponent);
    table.threshold = tail_threshold(factor, kFastTableBits);
    table.tail_upper = to_interval(Real(exp(-(from_integer(table.threshold) * factor)))).hi;
    mpfi_set(table.factor.get(), factor.backend().data());
  }
  table.usable = mpz_fits_ulong_p(table.threshold.backend().data()) && sizeof(unsigned long) >= 8;
  if (table.usable) {
    const std::size_t levels = (mpz_sizeinbase(table.threshold.backend().data(), 2) + 3) / 4;
    table.digits.assign(levels, {});
    table.filled.assign(levels, 1U);  // digit 0: e^0 = 1
    for (auto& level : table.digits) level[0] = {1, 1};
  }
  if (tables.size() < kCached) return tables.emplace_back(std::move(table));
  FastTable& slot = tables[next_victim];
  next_victim = (next_victim + 1) % kCached;
  slot = std::move(table);
  return slot;
}

// x = y·10^k rounded to an integer when no rounding boundary (odd integer of 2x) lies in [lo, hi];
// as round_scaled in oracle.cpp, in doubles: below 2^50 every doubling, floor and ceiling here is
// exact.
bool fast_round(Interval x, long long& out) {
  if (!(std::fabs(x.lo) < 0x1p50 && std::fabs(x.hi) < 0x1p50)) return false;
  const auto floor_lo = static_cast<long long>(std::floor(2 * x.lo));
  const auto ceil_lo = static_cast<long long>(std::ceil(2 * x.lo));
  const auto floor_hi = static_cast<long long>(std::floor(2 * x.hi));
  const long long odd = ceil_lo % 2 != 0 ? ceil_lo : ceil_lo + 1;
  if (odd <= floor_hi) return false;
  out = (floor_lo + 1) >> 1;  // floor division by 2 (C++20 shifts are arithmetic)
  return true;
}

}  // namespace

bool fast_pass(const ExactInstance& exact, const ExactBlock& block, int decimals,
               const std::vector<std::size_t>& pending, BlockAnswer& answer, std::vector<std::size_t>& undecided) {
  FastTable& table = fast_table(exact.divisor, block.dot_exponent);
  Interval unit, scale;
  if (!table.usable || !fast_bounds(power_of_ten(block.value_exponent), unit) ||
      !fast_bounds(power_of_ten(decimals), scale)) {
    return false;
  }
  // e^{t_g} per group from the table's digits, [0, e^{-L}] for a tail group, and the denominator.
  const std::size_t groups = block.group_dot.size();
  // This thread's scratch, reused from block to block (as in block_bands).
  thread_local struct {
    std::vector<Interval> e;
    std::vector<char> tail;
    Integer gap;
  } scratch;
  std::vector<Interval>& e = scratch.e;
  std::vector<char>& tail = scratch.tail;
  Integer& gap = scratch.gap;
  e.assign(groups, Interval{});
  tail.assign(groups, 0);
  Interval total{0, 0};
  for (std::size_t g = 0; g < groups; ++g) {
    mpz_sub(gap.backend().data(), block.group_dot[0].backend().data(), block.group_dot[g].backend().data());
    tail[g] = gap > table.threshold;
    if (tail[g]) {
      e[g] = {0, table.tail_upper};
    } else {
      e[g] = {1, 1};
      unsigned long rest = mpz_get_ui(gap.backend().data());  // gap <= threshold < 2^64
      for (std::size_t l = 0; rest != 0; ++l, rest >>= 4) {
        if ((rest & 15) != 0) e[g] = multiply_nonnegative(e[g], table.digit(l, static_cast<unsigned>(rest & 15)));
      }
    }
    const auto size = static_cast<double>(block.group_size[g]);  // exact: far below 2^53
    total = add(total, multiply_nonnegative(e[g], Interval{size, size}));
  }
  const Interval denominator = multiply(total, unit);
  for (std::size_t c : pending) {
    // Tail groups together move the numerator by at most Σ_tail |c_g| e^{-L}, as in Ziv's loop.
    Interval numerator{0, 0};
    double tail_magnitude = 0;
    for (std::size_t g = 0; g < groups; ++g) {
      Interval value;
      if (!block.narrow_value_sum.empty()) {
        value = narrow_bounds(block.narrow_value_sum[g * block.head_v + c]);
      } else if (!fast_bounds(block.group_value_sum[g * block.head_v + c], value)) {
        return false;
      }
      if (tail[g]) {
        tail_magnitude = next_up(tail_magnitude + std::max(std::fabs(value.lo), std::fabs(value.hi)));
      } else {
        numerator = add(numerator, multiply(value, e[g]));
      }
    }
    const double tail_move = next_up(tail_magnitude * table.tail_upper);
    numerator = add(numerator, Interval{-tail_move, tail_move});
    const Interval y = divide_by_positive(numerator, denominator);
    long long rounded = 0;
    if (!fast_round(multiply(y, scale), rounded)) {
      undecided.push_back(c);
      continue;
    }
    OracleCell& cell = answer.cells[c];
    cell.value = y;
    cell.canonical = fixed_text(static_cast<std::int64_t>(rounded), decimals);
  }
  answer.weights.reserve(block.keys.size());
  for (std::size_t t = 0; t < block.keys.size(); ++t) {
    answer.weights.push_back(divide_by_positive(e[block.group_of[t]], total));
  }
  return true;
}

}  // namespace attn::verify
