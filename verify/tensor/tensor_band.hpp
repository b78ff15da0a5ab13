// The error band δ for tensor certification: an a-priori bound on how far any correct
// implementation of scaled_dot_product_attention in a named arithmetic (storage format, compute
// format, exp accuracy, whether P is rounded to storage) can land from the exact value, per output
// element of one row. The derivation is in tensor_band.cpp; band.cpp is the fp64 decimal original.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "result.hpp"
#include "tensor/tensor.hpp"

namespace attn::verify {

/// The arithmetic a kernel is judged in.
struct Arithmetic {
  DType storage = DType::fp32;      ///< inputs (exact in it) and the output (rounded to it)
  DType compute = DType::fp32;      ///< scores, exp, sums, accumulators
  double exp_ulps = 2;              ///< exp accurate to this many ulps of `compute`
  bool weights_in_storage = false;  ///< P rounded to `storage` before P·V (FlashAttention fp16/bf16)
};

/// fp64 (compute fp64, exp <= 1 ulp), fp32 (compute fp32, exp <= 2 ulps), fp16 and bf16 (storage half,
/// compute fp32, exp <= 2 ulps, output rounded to storage); the error names the profile.
[[nodiscard]] Result<Arithmetic, Error> arithmetic_profile(std::string_view name);

/// What δ depends on for one row (all exact quantities rounded in the safe direction by the caller).
struct RowTerms {
  std::size_t keys = 0;         ///< keys taking part (k)
  std::size_t E = 0;            ///< dot-product length
  std::vector<double> abs_dot;  ///< per key: Σ_c |q_c k_c| (upper bound)
  std::vector<double> gap;  ///< per key: (max score - score_j) >= 0, scores scaled and biased (lower bound)
  std::vector<double> abs_bias;                    ///< per key: |additive mask value| (0 without one)
  std::vector<double> weight;                      ///< per key: exact weight w_j (upper bound), Σ ≈ 1
  std::vector<std::vector<double>> abs_v_minus_y;  ///< per output column c, per key: |v_jc - y_c| (upper bound)
  std::vector<double> abs_v_max;                   ///< per output column: max_j |v_jc|
  std::vector<double> abs_y;                       ///< per output column: |y_c| (upper bound)
  double scale = 0;                                ///< |multiplier| (upper bound)
  bool scale_defaulted = true;  ///< the scale is 1/√E computed by the implementation (one more rounding)
};

/// δ for each output column of the row: a rigorous bound on |computed - exact| for any correct
/// implementation in `arithmetic` (see the derivation), including the final rounding to storage.
/// Empty terms (keys == 0) give zeros: a row with no key taking part is exactly zero.
/// Throws ContractError when the per-key or per-column vectors do not match keys and the columns.
[[nodiscard]] std::vector<double> tensor_row_bands(const RowTerms& terms, const Arithmetic& arithmetic);

}  // namespace attn::verify
