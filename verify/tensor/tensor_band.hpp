// The error band δ for tensor certification: an a-priori bound on how far any correct
// implementation of scaled_dot_product_attention in a named arithmetic (storage format, compute
// format, exp accuracy, whether P is rounded to storage) can land from the exact value, per output
// element of one row. The derivation is in tensor_band.cpp; band.cpp is the fp64 decimal original.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "result.hpp"
#include "tensor/tensor.hpp"

namespace attn::verify {

/// How a kernel walks a row's keys, as its author declares it. The default declares nothing: any
/// tiling (one key per tile at worst), every term added straight into the running sums, any number
/// of split partitions; that band holds for every correct kernel. A declaration narrows the band to
/// kernels with exactly that structure (Steps 3, 4, 6 and 7 of the derivation in tensor_band.cpp).
struct KernelStructure {
  /// 0: any tiling. t: an online softmax over tiles of t consecutive key positions, [n·t, (n+1)·t)
  /// (the last one possibly shorter), any order inside a tile and any order of tiles.
  std::size_t key_tile = 0;
  /// Terms (exps and products p·v) summed apart, in any order, in chunks of at most this many
  /// consecutive positions of a tile before a chunk's sum joins the running sum or accumulator:
  /// 1: each term straight in; key_tile: FlashAttention's tile sums; 16: an MMA's k. Needs key_tile
  /// or single_pass (in any tiling a tile may hold one key).
  std::size_t sum_chunk = 1;
  /// One pass: the row's maximum first, then exps, sum and P·V with no rescale (T = 1).
  bool single_pass = false;
  /// Key partitions each with its own softmax, merged by their log-sum-exp (split-K,
  /// flash-decoding): 1 none, p at most p, 0 any number.
  std::size_t splits = 0;
  /// Inside each chunk terms are added one at a time in position order, chunks and tiles join in
  /// that order (ascending or descending, one direction per row): a CPU loop, a BLAS microkernel.
  /// The partial sums are then known, which narrows the statistical tier (not the certified one).
  /// Needs splits = 1.
  bool ordered = false;
};

/// The arithmetic a kernel is judged in.
struct Arithmetic {
  DType storage = DType::fp32;      ///< the query (exact in it), the output (rounded to it), and key and value
  /// The format key and value are stored in when it is not `storage` (llama.cpp's fp16 KV cache with
  /// an fp32 query); certify_tensor takes it from TensorProblem::kv_dtype. nullopt: storage.
  std::optional<DType> kv_storage;
  DType compute = DType::fp32;      ///< scores, exp, sums, accumulators
  double exp_ulps = 2;              ///< exp (and log, when splits merge) accurate to this many ulps of `compute`
  /// softcap's tanh accurate to this many ulps of `compute` relative, plus (exp_ulps + 1.5) u absolute
  /// (the 1 - 2/(e^{2x} + 1) form near 0). 4 covers libm's tanhf and tanh; a GPU kernel on
  /// tanh.approx.f32 (FlashAttention 2 and 3's fast_tanh, about 2^-11 relative) needs 8192 in fp32.
  double tanh_ulps = 4;
  bool weights_in_storage = false;  ///< P rounded to V's format before P·V (FlashAttention fp16/bf16)
  /// The scaled Q and K (either or both) rounded to K's format before Q·Kᵀ (PyTorch's math path; ggml
  /// converts an fp32 query to its fp16 cache's format)
  bool query_in_storage = false;
  bool scores_in_storage = false;   ///< the scores rounded to `storage` up to three times (Q·Kᵀ, the scale, the mask's add)
  KernelStructure structure;        ///< declared tiling, summation and splits (default: any)
  bool output_rounded = true;       ///< the output is rounded to `storage` (false: kept in compute, widened)
  /// The format P·V is accumulated in, when coarser than `compute` (ggml's fp16 decode path: fp16);
  /// nullopt: compute. The sum of the exps stays in compute.
  std::optional<DType> accumulator;
};

/// "" when `structure` is consistent, else what is wrong with it (naming the field).
[[nodiscard]] std::string structure_error(const KernelStructure& structure);

/// fp64 (compute fp64, exp <= 1 ulp), fp32 (compute fp32, exp <= 2 ulps), fp16 and bf16 (storage half,
/// compute fp32, exp <= 2 ulps, P and the output rounded to storage), fp16-math and bf16-math (as
/// fp16 and bf16, and the scaled Q and the scores rounded to storage too: PyTorch's math path in
/// that dtype); the error names the profiles.
[[nodiscard]] Result<Arithmetic, Error> arithmetic_profile(std::string_view name);

/// The standard profiles for inputs stored in `dtype` (fp16: fp16, fp16-math; bf16: bf16, bf16-math;
/// fp32: fp32; fp64: fp64), narrowest first.
[[nodiscard]] std::vector<std::string> profiles_for(DType dtype);

/// What δ depends on for one row (all exact quantities rounded in the safe direction by the caller).
struct RowTerms {
  std::size_t keys = 0;         ///< keys taking part (k)
  std::vector<std::size_t> position;  ///< per key: its position j in [0, S), increasing
  std::size_t E = 0;            ///< dot-product length
  std::vector<double> abs_dot;  ///< per key: Σ_c |q_c k_c| (upper bound)
  std::vector<double> abs_key;  ///< per key: Σ_c |k_jc| (upper bound; read when query_in_storage)
  double abs_query = 0;         ///< Σ_c |q_c| (upper bound; read when query_in_storage)
  std::vector<double> gap;  ///< per key: (max score - score_j) >= 0, scores scaled and biased (lower bound)
  std::vector<double> abs_bias;                    ///< per key: |the bias| (additive mask or ALiBi; 0 without)
  std::vector<double> weight;                      ///< per key: exact weight w_j (upper bound), Σ ≈ 1
  /// per key j, per output column c: v_jc, key-major as V is stored (v[j·columns + c], columns =
  /// abs_v_max.size()); the band bounds |v_jc - y_c| by max(|v_jc - y_lo_c|, |v_jc - y_hi_c|)
  std::vector<double> v;
  std::vector<double> abs_v_max;                   ///< per output column: max_j |v_jc|
  std::vector<double> abs_y;                       ///< per output column: |y_c| (upper bound)
  std::vector<double> y_lo, y_hi;                  ///< per output column: enclosure of y_c
  // For the statistical tier only (tensor_row_tier_bands); the certified band does not read them.
  std::vector<double> weight_lo;                   ///< per key: exact weight w_j (lower bound)
  std::vector<double> gap_hi;                      ///< per key: max score - score_j (upper bound)
  std::vector<double> dot_lo, dot_hi;              ///< per key: enclosure of q·k_j (groups equal dot products)
  std::vector<double> l2_dot;                      ///< per key: √Σ_c (q_c k_jc)² (upper bound)
  double scale = 0;                                ///< |multiplier| (upper bound)
  bool scale_defaulted = true;  ///< the scale is 1/√E computed by the implementation (one more rounding)
  bool computed_bias = false;   ///< the bias is ALiBi's, formed by the kernel (ScoreErrorModel)
  double softcap = 0;           ///< c of c·tanh(s/c) (0 off), applied by the kernel before the bias
  bool sink = false;            ///< one of the keys is the row's sink (score z, value 0): Λ widens (Step L)
};

/// Steps 1, 2 and 2' of the derivation (tensor_band.cpp): for one row, a bound e_j >= |ŝ_j - s_j| on
/// the error of a computed score over every route the derivation allows (where the scale is applied,
/// FMA or not, intermediates in storage). Shared by the output's band and the gradients'.
class ScoreErrorModel {
 public:
  /// `scale`: |σ| (an upper bound); `scale_defaulted`: σ = 1/√E computed by the kernel;
  /// `computed_bias`: the kernel forms the bias itself (ALiBi's fl(-slope·|d|)), two more roundings.
  /// `softcap`: c > 0 when the kernel computes c·tanh(ŝ/c) before the bias (Step 2's softcap).
  ScoreErrorModel(const Arithmetic& arithmetic, std::size_t E, double scale, bool scale_defaulted,
                  bool computed_bias = false, double softcap = 0);
  struct Bound {
    double R = 0;         ///< σ A_j + |b_j| >= |s_j|
    double e = 0;         ///< >= |ŝ_j - s_j|
    double absolute = 0;  ///< the part of e from Q's and K's rounding into storage's subnormals
  };
  /// From A_j = Σ_c |q_c k_jc|, |b_j| and Σ_c |k_jc| + Σ_c |q_c| (read when query_in_storage), all
  /// upper bounds.
  [[nodiscard]] Bound operator()(double abs_dot, double abs_bias, double abs_sides) const;

 private:
  Arithmetic arithmetic_;
  double E_ = 0, sigma_ = 0;
  double g_dot_ = 0, flushed_ = 0, h_k_ = 0, gs2_ = 0, gs3_ = 0, h_storage_ = 0, side_scale_ = 0;
  double softcap_ = 0, u_ = 0;
};

/// γ_n = n·u / (1 - n·u) for unit roundoff u (Higham, Lemma 3.1), rounded upwards (a factor 1 + 2^-20
/// covers its evaluation); +inf when n·u >= 1/2.
[[nodiscard]] double gamma_bound(double n, double u);

/// Both tiers' δ per output column (the derivation of the statistical one: tensor_band.cpp, Steps S1-S6).
struct TierBands {
  std::vector<double> certified;    ///< tensor_row_bands: holds for every correct kernel
  std::vector<double> statistical;  ///< holds except with probability <= 2·exp(-λ²/2) per element, under Model S;
                                    ///< never above `certified`; empty when no λ was given
  /// δ of the row's log-sum-exp log Σ_j e^{s_j} in natural units, as the kernel computes it (Step L of
  /// the derivation), before it is stored (stored_lse_band); one tier: the statistical verdict uses
  /// it too. 0 for a row without keys (its LSE must be exactly ∓inf, or z with a sink); +inf when
  /// unbounded.
  double lse = 0;
};

/// How a kernel stores the log-sum-exp it returns beside the output.
struct LseFormat {
  DType storage = DType::fp32;  ///< FlashAttention's softmax_lse is fp32 whatever the inputs
  bool base2 = false;           ///< log2 Σ_j 2^{s_j log2 e} = LSE / ln 2 (kernels that keep log2 units)
  /// A row without keys: -inf (the exact value; PyTorch, xformers) or +inf (FlashAttention 2 writes it).
  bool masked_plus_inf = false;
};

/// δ of a stored LSE: the natural-units δ (TierBands::lse) in the stored base, plus the conversion to
/// base 2 (one rounding, and log2 e's) and the rounding to storage when it is coarser than compute.
/// `abs_lse`: an upper bound of |exact LSE| in natural units.
[[nodiscard]] double stored_lse_band(double lse_delta, double abs_lse, const LseFormat& format, DType compute);

/// δ, in natural units before storage (stored_lse_band), of the LSE of a row whose only term is its
/// sink z: λ = z, computed as m + log e^{z - m} with m z through at most five roundings (natural or
/// log2 units) or 0 (a reset maximum), in `arithmetic.compute` with its exp_ulps, z itself rounded to
/// storage first on the -math paths (derivation beside it).
[[nodiscard]] double sink_only_lse_band(double z, const Arithmetic& arithmetic);

/// Model S's blocks of operations that may repeat one another (tensor_band.cpp, Model S): single
/// linkage of the intervals [lo_k, hi_k] (overlapping ones chained into one block, as the forward's
/// dot and gap blocks), each interval's block id (0, 1, ... in increasing lo). ContractError when the
/// sizes differ.
[[nodiscard]] std::vector<std::size_t> overlap_blocks(const std::vector<double>& lo, const std::vector<double>& hi);

/// λ for a false-alarm probability `alpha` over `elements` elements: 2·elements·exp(-λ²/2) = alpha.
[[nodiscard]] double statistical_lambda(double alpha, std::size_t elements);

/// The certified band and, when `lambda` is given, the statistical one (which reads the statistical
/// fields of RowTerms; ContractError when their sizes do not match).
[[nodiscard]] TierBands tensor_row_tier_bands(const RowTerms& terms, const Arithmetic& arithmetic,
                                              std::optional<double> lambda);

/// δ for each output column of the row: a rigorous bound on |computed - exact| for any correct
/// implementation in `arithmetic` (see the derivation), including the final rounding to storage.
/// Empty terms (keys == 0) give zeros: a row with no key taking part is exactly zero.
/// Throws ContractError when the per-key or per-column vectors do not match keys and the columns,
/// or when structure_error(arithmetic.structure) is not empty.
[[nodiscard]] std::vector<double> tensor_row_bands(const RowTerms& terms, const Arithmetic& arithmetic);

}  // namespace attn::verify
