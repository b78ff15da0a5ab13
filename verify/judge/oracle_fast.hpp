// Internal to the oracle (oracle.cpp, oracle_fast.cpp). The fast first pass in outward-rounded
// double intervals (Step 6 of the derivation in oracle.cpp), and the MPFI vocabulary it shares
// with Ziv's loop: the fast pass builds its tables from the same score factor and tail threshold,
// so a cell it decides is decided on the same model as one the loop decides.
#pragma once

#include <boost/multiprecision/mpfi.hpp>

#include <cstddef>
#include <mutex>
#include <vector>

#include "judge/exact.hpp"
#include "judge/oracle.hpp"

namespace attn::verify {

/// Interval arithmetic at a variable precision (MPFI through Boost.Multiprecision).
using Real = boost::multiprecision::mpfi_float;

/// Sets the working precision of every Real created in its lifetime, and holds a lock meanwhile.
// Boost 1.74 keeps the precision of variable-precision numbers in one process-wide default, so
// evaluations from several threads (stress --jobs) take turns instead of changing each other's
// precision. Recursive: a scope may open inside another on the same thread.
class PrecisionScope {
 public:
  /// Works at `bits` bits (at least) until destruction, then restores the previous precision.
  explicit PrecisionScope(int bits) : lock_(mutex()), saved_(Real::default_precision()) {
    // Boost takes decimal digits and allocates at least digits10 · 1000/301 bits.
    Real::default_precision(static_cast<unsigned>((bits * 301 + 999) / 1000));
  }
  ~PrecisionScope() { Real::default_precision(saved_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  static std::recursive_mutex& mutex();
  std::unique_lock<std::recursive_mutex> lock_;
  unsigned saved_;
};

/// The lower end of x, for MPFR calls.
[[nodiscard]] inline mpfr_srcptr left_of(const Real& x) { return &x.backend().data()[0].left; }

/// The upper end of x, for MPFR calls.
[[nodiscard]] inline mpfr_srcptr right_of(const Real& x) { return &x.backend().data()[0].right; }

/// z as an interval at the current precision (rounded outwards when z has more bits).
[[nodiscard]] Real from_integer(const Integer& z);

/// x rounded to `mode` (MPFR_RNDD: floor, MPFR_RNDU: ceiling, MPFR_RNDN: nearest) as an integer.
[[nodiscard]] Integer rounded_integer(mpfr_srcptr x, mpfr_rnd_t mode);

/// The enclosure x rounded outwards to doubles.
[[nodiscard]] Interval to_interval(const Real& x);

/// 10^-dot_exponent / σ: turns an integer dot-product difference into a score difference.
[[nodiscard]] Real score_factor(const ExactDivisor& divisor, long dot_exponent);

/// An integer above which a dot-product gap surely puts a group in the tail: gap > threshold
/// implies t_g < -L with L >= (bits + 64)·ln 2 (see `Exponentials` in oracle.cpp).
[[nodiscard]] Integer tail_threshold(const Real& factor, int bits);

/// The fast first pass on one block (Step 6): rounds every cell of `pending` whose enclosure holds
/// no rounding boundary into `answer.cells`, appends the others to `undecided`, and fills
/// `answer.weights`. False when an integer of the block is out of its range: then nothing it wrote
/// counts, and every cell of `pending` is left to Ziv's loop.
[[nodiscard]] bool fast_pass(const ExactInstance& exact, const ExactBlock& block, int decimals,
                             const std::vector<std::size_t>& pending, BlockAnswer& answer,
                             std::vector<std::size_t>& undecided);

}  // namespace attn::verify
