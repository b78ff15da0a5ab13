// The production attention kernel (double precision): one masked multi-head routine that every
// problem calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernel_status.hpp"
#include "problem.hpp"

namespace attn {

/// Sizes of one attention call: n queries, m keys/values, Q and K have d_k columns, V has d_v,
/// h heads each taking a contiguous column block (d_k/h of Q and K, d_v/h of V).
struct AttentionShape {
  std::size_t n = 0, m = 0, d_k = 0, d_v = 0, heads = 1;
};

/// out[i][g·d_v/h + c] = Σ_j w_gij · V[j][g·d_v/h + c] with w_gi = softmax over visible j of
/// (Q[i]·K[j] restricted to head g's block) / scale_divisor. A row with no visible key is exactly
/// +0.0 and skips the softmax. out is n x d_v; weights, when non-empty, is h x n x m (0 where masked).
/// Finite inputs give finite outputs for any positive divisor: scores are shifted by the row's
/// largest dot product before dividing, so exp never sees a positive argument. Zero keys give
/// +0.0 rows, zero queries write nothing. A span that does not match the shape, heads that do not
/// divide d_k and d_v, or a divisor that is not finite and positive: refused, nothing written.
[[nodiscard]] KernelStatus masked_multihead_attention(const AttentionShape& shape, std::span<const double> Q,
                                                      std::span<const double> K, std::span<const double> V,
                                                      MaskView mask, double scale_divisor, std::span<double> out,
                                                      std::span<double> weights = {});

}  // namespace attn
