// The certified oracle: every output value and attention weight of an instance as a rigorous
// enclosure of the exact real result for the input decimals, and each output correctly rounded to
// the problem's decimals, exact ties decided exactly. Each block is first tried in double interval
// arithmetic with outward rounding; what that cannot decide goes to MPFI (through
// Boost.Multiprecision) with Ziv's precision schedule. Shares no arithmetic with the production
// kernels.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "judge/exact.hpp"
#include "numeric/interval.hpp"

namespace attn::verify {

/// Precision schedule of Ziv's strategy, in bits.
struct OracleOptions {
  int initial_bits = 64;  ///< enough to round almost every value at once (AI006 needs ~24 bits);
                          ///< below 53 the first pass in doubles is skipped
  int max_bits = 4096;    ///< the cap: a value still undecided here is within 2^-4096 of a boundary
};

/// One output value.
struct OracleCell {
  std::string canonical;    ///< exact value correctly rounded, ties to even, never "-0.00"
  Interval value;           ///< encloses the exact value
  bool rational = false;    ///< the exact value is rational (every score group has the same mean V)
  bool exact_tie = false;   ///< the exact value lies exactly halfway between two roundings
  bool unresolved = false;  ///< past max_bits: a tie or closer than 2^-max_bits; canonical is a guess
};

/// The oracle's answer for one block (one query row, one head).
struct BlockAnswer {
  std::vector<OracleCell> cells;  ///< head_v values
  std::vector<Interval> weights;  ///< one per visible key of the block, in the block's key order
};

/// Certifies one block at `decimals` digits after the point.
[[nodiscard]] BlockAnswer oracle_block(const ExactInstance& exact, const ExactBlock& block, int decimals,
                                       const OracleOptions& options = {});

/// A value's exact decimal digits, correctly rounded (ties to even).
struct SignificantDigits {
  std::string text;      ///< positional notation, `significant` digits ("0" for zero)
  bool resolved = true;  ///< false past max_bits (text then comes from the last enclosure)
};

/// Output column c (0 <= c < head_v) of a block to `significant` significant digits.
[[nodiscard]] SignificantDigits exact_digits(const ExactInstance& exact, const ExactBlock& block, std::size_t c,
                                             int significant, const OracleOptions& options = {});

}  // namespace attn::verify
