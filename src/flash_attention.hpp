// The fast production kernel: batched multi-head attention in fp32 or fp64 by tiled online
// softmax (running max and sum, rescaled accumulators, no n x m buffer), SIMD with runtime
// dispatch and threads over (batch, head, query block). The judge path keeps the simple double
// kernel in attention.hpp; this one is checked against it and against the oracle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernel_status.hpp"
#include "problem.hpp"

namespace attn {

/// Memory order of Q, K, V and the output: [B, H, rows, head_dim] or [B, rows, H, head_dim].
enum class TensorLayout { batch_head_seq, batch_seq_head };

/// Instruction set of the inner loops. `automatic` picks the widest the CPU supports.
enum class SimdLevel { automatic, baseline, avx2, avx512 };

/// Sizes of one batched call: n queries and m keys per batch item, per-head widths of Q/K and V.
struct FlashShape {
  std::size_t batch = 1, heads = 1, n = 0, m = 0, head_dim_k = 0, head_dim_v = 0;
};

/// Mask, scale, tiling and threading of one call.
struct FlashOptions {
  TensorLayout layout = TensorLayout::batch_head_seq;
  MaskKind mask = MaskKind::none;            ///< causal means key j is visible to query i iff j <= i
  std::span<const std::uint8_t> mask_bits;   ///< explicit: n x m (shared) or B x n x m, 0 = masked
  std::span<const std::size_t> key_lengths;  ///< key padding: item b sees only j < key_lengths[b]
  double scale_divisor = 1.0;                ///< scores are Q·Kᵀ / scale_divisor (> 0)
  std::size_t query_tile = 128;              ///< queries per work item (128: fastest at n = 2048, hd = 64)
  std::size_t key_tile = 64;                 ///< keys per online step, rounded up to the SIMD tile
  unsigned threads = 1;                      ///< 0 = std::thread::hardware_concurrency()
  SimdLevel simd = SimdLevel::automatic;
};

/// out = softmax(mask(Q·Kᵀ / scale_divisor)) · V per batch item and head, in fp32. A query row
/// with no visible key is exactly +0.0. Results do not depend on the thread count (bitwise).
[[nodiscard]] KernelStatus flash_attention(const FlashShape& shape, std::span<const float> Q, std::span<const float> K,
                                           std::span<const float> V, std::span<float> out, const FlashOptions& options);

/// The same in fp64.
[[nodiscard]] KernelStatus flash_attention(const FlashShape& shape, std::span<const double> Q,
                                           std::span<const double> K, std::span<const double> V, std::span<double> out,
                                           const FlashOptions& options);

/// The widest SimdLevel this CPU runs.
[[nodiscard]] SimdLevel best_simd_level();

/// Can this CPU run `level`? (automatic and baseline: always.)
[[nodiscard]] bool simd_level_supported(SimdLevel level);

/// The kernel's vector exp applied elementwise, for x <= 0 (or -inf): exposed so its accuracy is
/// tested directly. size_mismatch when out.size() != x.size(), simd_unsupported for a level this
/// CPU lacks; nothing is written then.
[[nodiscard]] KernelStatus kernel_exp(std::span<const float> x, std::span<float> out,
                                      SimdLevel level = SimdLevel::automatic);
/// The same in fp64.
[[nodiscard]] KernelStatus kernel_exp(std::span<const double> x, std::span<double> out,
                                      SimdLevel level = SimdLevel::automatic);

/// Relative error bound of kernel_exp on [-87.33, 0] (fp32) and [-708.39, 0] (fp64), in ulps of
/// the result; below that range the result is flushed to +0. Source: measured against the x87
/// expl, at most 1.01 ulps over every fp32 in [-87.33, 0] and 1.16 ulps over 4·10^6 random fp64
/// points (SSE2 and AVX2 paths); 2 leaves room for other compilers' FMA contraction choices.
inline constexpr double kKernelExpUlps = 2.0;

/// The per-row quantities the fast path's a-priori error bound depends on.
struct FlashBoundTerms {
  std::size_t head_dim_k = 0;  ///< d_k per head (dot-product length)
  std::size_t keys = 0;        ///< visible keys of the row
  std::size_t key_tiles = 0;   ///< online steps that saw a visible key (<= ceil(m / key_tile))
  double max_abs_dot = 0;      ///< max over visible j of Σ_c |q_c·k_jc|
  double scale_divisor = 1;
  double score_range = 0;     ///< max over visible j of (s_max - s_j) / scale_divisor
  double weighted_abs_v = 0;  ///< Σ_j w_j·|v_jc| for the output column
  double max_abs_v = 0;       ///< max over visible j of |v_jc|
};

/// A-priori bound on |computed - exact| for one output value of the fast path in precision T
/// (float or double), for inputs exactly representable in T. Rigorous under the standard model
/// of floating-point arithmetic plus kKernelExpUlps; the derivation is in flash_attention.cpp.
template <class T> [[nodiscard]] double flash_error_bound(const FlashBoundTerms& terms);

}  // namespace attn
