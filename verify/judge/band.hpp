// Ambiguity bands: an a-priori bound δ on how far any correct IEEE-double implementation of the
// standard attention algorithm can land from the exact value, per output value and per weight,
// computed from the instance (the derivation is in band.cpp).
#pragma once

#include <cstddef>
#include <vector>

#include "judge/exact.hpp"
#include "judge/oracle.hpp"

namespace attn::verify {

/// Unit roundoff of IEEE double, u = 2^-53.
inline constexpr double kUnitRoundoff = 0x1p-53;

/// Higham's γ_n = n·u / (1 - n·u) (Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1),
/// rounded upwards; +infinity when n·u >= 1/2.
[[nodiscard]] double gamma(std::size_t n);

/// δ for each output value (head_v) and each weight (one per visible key) of one block.
struct BlockBands {
  std::vector<double> cells;    ///< head_v values; 0 for a fully masked row (exactly zero)
  std::vector<double> weights;  ///< in the block's key order
};

/// The bands of a block, from its exact data and the oracle's enclosures of it.
[[nodiscard]] BlockBands block_bands(const ExactInstance& exact, const ExactBlock& block, const BlockAnswer& answer);

}  // namespace attn::verify
