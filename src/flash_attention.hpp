// The fast production kernel: batched multi-head attention in fp32 or fp64 by tiled online
// softmax (running max and sum, rescaled accumulators, no n x m buffer), SIMD with runtime
// dispatch and threads over (batch, head, query block), with the semantics of PyTorch's
// scaled_dot_product_attention (GQA, causal top-left or bottom-right, boolean and additive masks,
// a scale multiplier) plus key padding and FlashAttention's sliding window, logit softcap, ALiBi,
// attention sinks and packed variable-length batches. The judge path keeps the simple double
// kernel in attention.hpp; this one is checked against it and certified against the oracle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "kernel_status.hpp"

namespace attn {

/// Memory order of Q, K, V and the output: [B, H, rows, head_dim] or [B, rows, H, head_dim].
enum class TensorLayout { batch_head_seq, batch_seq_head };

/// Instruction set of the inner loops. `automatic` picks the widest the CPU supports.
enum class SimdLevel { automatic, baseline, avx2, avx512 };

/// Which keys a causal mask keeps for query i of n (m keys): none; top_left, j <= i (PyTorch's
/// is_causal); bottom_right, j <= i + m - n (FlashAttention >= 2.1; with n > m the first n - m
/// queries see no key).
enum class CausalAlignment { none, top_left, bottom_right };

/// Sizes of one batched call: n queries and m keys per batch item, per-head widths of Q/K and V.
/// Grouped-query attention: q_heads = G·kv_heads, query head h reads key/value head h / G. With
/// packed sequences (FlashOptions::cu_seqlens_q/k), n and m are the longest sequence's lengths
/// (FlashAttention's max_seqlen_q/k) and every sequence is at most that long.
struct FlashShape {
  std::size_t batch = 1, q_heads = 1, kv_heads = 1, n = 0, m = 0, head_dim_k = 0, head_dim_v = 0;
};

/// Masks, scale, tiling and threading of one call. Key j takes part in query i of batch item b and
/// head h unless key padding, the causal rule, the sliding window, mask_bits or the additive mask
/// excludes it; a mask
/// (mask_bits or the additive mask argument) holds n·m values (one for every item and head),
/// B·n·m (one per batch item) or B·Hq·n·m (one per item and query head), row-major [.., i, j].
struct FlashOptions {
  TensorLayout layout = TensorLayout::batch_head_seq;
  CausalAlignment causal = CausalAlignment::none;
  std::span<const std::uint8_t> mask_bits;   ///< empty (no boolean mask) or a mask as above, 0 = excluded
  std::span<const std::size_t> key_lengths;  ///< key padding: item b sees only j < key_lengths[b]
  /// FlashAttention's sliding window (window_size), bottom-right aligned: query i sees keys
  /// i + m - n - window_left <= j <= i + m - n + window_right; -1 an unbounded side. Key tiles wholly
  /// outside a query tile's window are skipped.
  std::int64_t window_left = -1, window_right = -1;
  /// ALiBi (FlashAttention's alibi_slopes): empty, Hq slopes or B·Hq ([B, Hq] row-major), converted
  /// to the kernel's precision; the bias -slope·|i + m - n - j| is formed in it and added to the
  /// scaled score (beside an additive mask, if any).
  std::span<const double> alibi_slopes;
  /// Logit softcap (FlashAttention's softcap, Gemma 2's): c > 0 turns the scaled score s into
  /// c·tanh(s/c), in T, before the additive mask and ALiBi are added; 0 is off. tanh(|x|) is
  /// (1 - t)/(1 + t) with t = exp(-2|x|) (the derivation of its error is beside softcap_scores).
  double softcap = 0;
  /// Attention sinks (gpt-oss, llama.cpp, FlashAttention 4): empty or Hq logits z_h in score units,
  /// converted to T; each joins every row's softmax denominator as a key of weight e^{z_h} and value
  /// 0 (out = Σ_j e^{s_j} v_j / (Σ_j e^{s_j} + e^{z_h})). A row with no key taking part is +0.0.
  std::span<const double> sinks;
  /// Packed variable-length batches (FlashAttention's flash_attn_varlen_func): both empty, or both
  /// B + 1 offsets from 0, non-decreasing. Sequence b's queries are rows [cu_seqlens_q[b],
  /// cu_seqlens_q[b+1]) of Q and out, its keys rows [cu_seqlens_k[b], cu_seqlens_k[b+1]) of K and
  /// V, all packed [total, heads, head_dim] (layout must be batch_seq_head). No key of one sequence
  /// takes part in another's queries; causal, window and ALiBi are aligned per sequence (its n_b
  /// and m_b in place of n and m). Not with masks or key_lengths.
  std::span<const std::size_t> cu_seqlens_q, cu_seqlens_k;
  double scale_divisor = 1.0;                ///< scores are Q·Kᵀ / scale_divisor (> 0) unless `scale` is set
  std::optional<double> scale;               ///< PyTorch's multiplier: scores are (Q·Kᵀ)·scale (finite, any sign),
                                             ///< converted once to the kernel's precision
  /// Queries per work item. Unset: flash_query_tile's choice, 512-2048 rows, or fewer under a sliding
  /// window. Results do not depend on it (bitwise).
  std::optional<std::size_t> query_tile;
  /// Keys per online step, rounded up to the SIMD tile. Unset: flash_key_tile's choice, 512, 256, 128
  /// or 64 keys, the most whose K and V rows fit half the L2 cache (so the default, and with it the
  /// output's last bits, can differ between machines whose L2 differs).
  std::optional<std::size_t> key_tile;
  unsigned threads = 1;                      ///< 0 = std::thread::hardware_concurrency(); kept across calls (run_on_workers)
  SimdLevel simd = SimdLevel::automatic;
};

/// out = softmax(Q·Kᵀ·scale + additive_mask, masked) · V per batch item and query head, in fp32
/// (scale = 1 / scale_divisor unless options.scale is set). additive_mask is empty or a mask as in
/// FlashOptions, added to the scaled (and capped) scores; -inf excludes the key, NaN and +inf are
/// refused. A query row with no key taking part is exactly +0.0. Results do not depend on the
/// thread count (bitwise). Each calling thread keeps its per-worker scratch between calls (up to
/// 4 MiB per worker, about 430 KiB at fp32 hd 64 with 512-row tiles, 920 KiB with 2048; a larger
/// one is freed when its call returns), so repeated calls allocate nothing; std::bad_alloc leaves
/// before any work.
[[nodiscard]] KernelStatus flash_attention(const FlashShape& shape, std::span<const float> Q, std::span<const float> K,
                                           std::span<const float> V, std::span<float> out, const FlashOptions& options,
                                           std::span<const float> additive_mask = {});

/// The same in fp64.
[[nodiscard]] KernelStatus flash_attention(const FlashShape& shape, std::span<const double> Q,
                                           std::span<const double> K, std::span<const double> V, std::span<double> out,
                                           const FlashOptions& options, std::span<const double> additive_mask = {});

/// The key tile a call uses before the SIMD rounding: options.key_tile, or when unset the most of
/// 512, 256, 128 and 64 keys whose K and V rows, key_tile·(head_dim_k + head_dim_v)·element_size
/// bytes, fit in half this CPU's L2 cache (flash_tile_budget), else 64. A key tile's fixed costs
/// (each register tile's online step, α and P·V's rescale of its accumulators, the calls of the
/// products, the diagonal's rounding) are spread over its keys, and every key tile streams the
/// work item's queries and accumulators once more; the tile itself, re-read by every row group,
/// stays in L2 beside them. Zen 5 (1 MiB L2, so 512 KiB): 512 keys at fp32 hd 64 and 128 and
/// fp64 hd 64, 256 at fp64 hd 128, against half as many (a quarter of the L2, the rule before),
/// calls alternating in one process, best of each: fp32 1-8% faster at n = 512 (causal hd 64 on
/// 2 threads 7.6%), up to 7% at n = 2048; fp64 0-4% faster in 13 of the 16 configurations and
/// within 1.1% slower in 3 (n = 2048 on 2 threads, where tile, queries and accumulators together
/// pass the L2). Earlier kernels had measured 512 keys at fp64 hd 64 6-11% slower than 256, and
/// on the first machines a 128 KiB budget slower at n = 512 than 64 KiB.
[[nodiscard]] std::size_t flash_key_tile(const FlashShape& shape, const FlashOptions& options,
                                         std::size_t element_size);

/// flash_key_tile's budget in bytes: half the L2 cache the C library reports, within
/// [64 KiB, 512 KiB]; 64 KiB when it reports none.
[[nodiscard]] std::size_t flash_tile_budget();

/// The query tile a call uses: options.query_tile, or when unset 512 rows (a packed key tile serves
/// that many; 256 measured slower), doubled up to 2048 while the accumulators' rows·head_dim_v·
/// element_size bytes stay within 1 MiB and, on more than one thread (options.threads, 0 = every
/// core), the work items (batch · q_heads · ⌈n / rows⌉) stay at least 16 per thread: each key tile
/// is packed once per tile of queries, and packing is then a quarter of what it was. Zen 5, calls
/// alternating with 512-row tiles in one process, best of each: on 1 thread at n = 2048 (8 heads)
/// 2048 rows ran 1.1-5% faster in 7 of 8 configurations (fp32 causal hd 64 0.4% slower); on 2
/// threads at n = 8192, 2.4-3.6% faster (3 configurations). On 2 threads at n = 2048 the eight
/// items of 2048 rows ran 0.3-2% slower in 4 of 8 (means up to 5%), and 16 items of 1024 rows
/// gained nothing above the noise (best call -2.2% to +4.8%, 25th percentile -2.8% to +1.3%), so
/// the rule keeps 512 there. Under a left window w >= 0: max(64, w) rows rounded up to 64 when that
/// is fewer than 512, as a tile's rows see w + rows keys, so its work stays within about twice the
/// window's own.
/// The result does not depend on the query tile (bitwise).
[[nodiscard]] std::size_t flash_query_tile(const FlashShape& shape, const FlashOptions& options,
                                           std::size_t element_size);

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

/// The softcap's tanh (c·tanh(s/c) with c = 1) applied elementwise, as the kernel computes it:
/// exposed so the bound below is tested directly. Statuses as kernel_exp's.
[[nodiscard]] KernelStatus kernel_tanh(std::span<const float> x, std::span<float> out,
                                       SimdLevel level = SimdLevel::automatic);
/// The same in fp64.
[[nodiscard]] KernelStatus kernel_tanh(std::span<const double> x, std::span<double> out,
                                       SimdLevel level = SimdLevel::automatic);
/// kernel_tanh's error: at most kKernelTanhUlps·u·|tanh x| + (kKernelExpUlps + 0.08)·u for every x
/// (u the unit roundoff of T; derived beside softcap_scores in flash_attention_simd.hpp), within
/// the band's softcap model (Arithmetic::tanh_ulps = 4 relative, exp_ulps + 1.5 absolute).
inline constexpr double kKernelTanhUlps = 4.0;
/// In fp32 on |x| <= 1 (a score within the cap) kernel_tanh is a polynomial and its error is
/// relative only: at most kKernelTanhNearZeroUlps·u·|tanh x| (derived beside tanh_near_zero in
/// flash_attention_simd.hpp: 2.33u with FMA, 2.85u without). fp64 has kKernelTanhUlps' bound only.
inline constexpr double kKernelTanhNearZeroUlps = 3.0;

/// Relative error bound of kernel_exp on [-87.33, 0] (fp32) and [-708.39, 0] (fp64), in ulps of
/// the result; below that range the result is flushed to +0. Source: measured against the x87
/// expl over every fp32 in [-87.3365, 0] and 1.7·10^7 fp64 points (uniform on the range, on
/// [-0.5, 0] and scaled down to 2^-60): at most 1.01 and 1.16 ulps (the polynomial of SSE2 and
/// AVX2), 0.98 and 1.03 ulps (AVX-512's table-driven exp as GCC -O2 fuses it; fp64 1.26 ulps with
/// no fusing), derived beside vector_exp_n to <= 1.91u and 1.84u relative, 2.83u and 2.78u near
/// the bottom of the range unfused, <= 1.57 ulps everywhere; 2 leaves room for other compilers' FMA
/// contraction choices.
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
/// (float or double), for inputs exactly representable in T, for calls without an additive mask
/// and with a positive scale (the path that shifts raw dot products; the tensor band of verify/
/// covers every call). Rigorous under the standard model
/// of floating-point arithmetic plus kKernelExpUlps; the derivation is in flash_attention.cpp.
template <class T> [[nodiscard]] double flash_error_bound(const FlashBoundTerms& terms);

}  // namespace attn
