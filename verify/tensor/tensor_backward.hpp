// The backward pass of scaled_dot_product_attention, exactly: for a forward TensorProblem and an
// upstream gradient dout (the shape of the output), enclosures of the exact gradients dQ, dK, dV of
// Σ dout ∘ O with respect to the exact inputs. The derivation is in tensor_backward.cpp. This is the
// oracle of backward certification (MPFI, exact to any precision); certify_backward judges a
// kernel's dQ, dK and dV against it within the band of tensor_backward_certify.cpp.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "result.hpp"
#include "tensor/tensor.hpp"
#include "tensor/tensor_band.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor/tensor_oracle.hpp"

namespace attn::verify {

/// Enclosures of the exact gradients, each in its tensor's layout (problem.layout): dq as the
/// query [B, Hq, L, E], dk as the key [B, Hkv, S, E], dv as the value [B, Hkv, S, Ev]. Under GQA a
/// kv head's dK and dV sum over the query heads of its group. A row without keys contributes
/// nothing and its dQ row is exactly zero; a key no query sees has dK = dV = 0 exactly. With an
/// additive mask, dmask encloses its gradient in the mask's own shape (row-major in mask_shape):
/// dβ = dS summed over the positions each element broadcasts to; empty for other masks.
/// With sinks, dsinks encloses the gradient of each head's sink logit, [Hq]: dz_h = -Σ_{b,i} P_iz D_i
/// over the rows of head h (empty without sinks). Under softcap dQ and dK carry the cap's derivative.
struct GradientEnclosure {
  std::vector<FineEnclosure> dq, dk, dv, dmask, dsinks;
  int bits = 0;  ///< the working precision
};

/// Ok when dout fits the problem (B·Hq·L·Ev finite doubles), else what is wrong, naming dout.
[[nodiscard]] Result<Ok, Error> validate_dout(const TensorProblem& problem, std::span<const double> dout);

/// The exact gradients at `bits` bits of working precision (at least 64): each enclosure's radius is
/// about 2^-bits times the scale of its sums. Throws ContractError when validate(problem) or
/// validate_dout fails.
[[nodiscard]] GradientEnclosure enclose_gradients(const TensorProblem& problem, std::span<const double> dout,
                                                  int bits = 128);

/// The backward algorithms the band covers (tensor_backward_certify.cpp, the derivation's (FA) and
/// (M)): either (the default, every correct kernel of both), FlashAttention-2's (P recomputed from the
/// stored LSE, D from the stored output), or the math path's autograd (the saved softmax, D = Σ P dP).
/// Declaring one narrows the band to kernels of that algorithm (8-35x on long rows).
enum class GradientAlgorithm { either, flash, math };

/// What a backward kernel read from its forward. FlashAttention-2's backward recomputes P from the
/// stored LSE and D_i = dO_i · O_i from the stored output; given, their actual errors enter the band
/// (and both are certified as well); absent, the band takes the forward's worst case (the output's
/// and the LSE's certified bands).
struct BackwardInputs {
  std::span<const double> out;  ///< the kernel's output [B, Hq, L, Ev] in problem.layout, or empty
  std::span<const double> lse;  ///< the kernel's LSE [B, Hq, L] in lse_format, or empty
  LseFormat lse_format;
  GradientAlgorithm algorithm = GradientAlgorithm::either;
};

/// The verdict on a backward pass: one report per gradient, and the forward's stored tensors when
/// they were given. dq's rows are the query rows (b, h, i), failures indexed (b, h, i, c); dk's and
/// dv's rows are the key rows (b, g, j) of kv head g, failures indexed (b, g, j, c). dmask's rows are
/// the additive mask's rows: its shape padded to rank 4 with leading 1s, [mB, mH, mL, mS], row
/// (b', h', i') and failures indexed (b', h', i', j') in that padded shape.
struct BackwardReport {
  TensorReport dq, dk, dv;
  std::optional<TensorReport> dmask;     ///< certified when a mask gradient was given
  std::optional<TensorReport> dsinks;    ///< certified when the sinks' gradient was given: rows (0, h, 0)
  std::optional<TensorReport> out, lse;  ///< certified when BackwardInputs gave them
  bool passed = true;                    ///< every report passed
  [[nodiscard]] std::string summary() const;
};

/// Ok when dout and `inputs` fit the problem, else what is wrong, naming dout, out or lse: validate_dout,
/// dout representable in dtype (a kernel reads it in its output's format), the sizes of out and lse.
/// Their values are the forward's to be judged on (NaN, Inf, a wrong masked row are failures of its
/// reports); a row whose stored values are not finite gets the forward's worst case in the band.
[[nodiscard]] Result<Ok, Error> validate_backward(const TensorProblem& problem, std::span<const double> dout,
                                                  const BackwardInputs& inputs);

/// Certifies a backward kernel's dq ([B, Hq, L, E]), dk ([B, Hkv, S, E]) and dv ([B, Hkv, S, Ev]),
/// each in problem.layout, for the upstream gradient dout, within the gradient band of
/// options.arithmetic (tensor_backward_certify.cpp, Steps B1-B9; its kv_storage from
/// problem.kv_dtype). options.rows samples that many query rows for dq and that many key rows for dk
/// and dv (each key row needs every query row of its group: the cost is that of the groups touched).
/// Every element is checked finite, and zero where it must be (a row without keys, a key no query
/// sees). Enclosures are decided to δ/1000: a fast double pass, else the MPFI gradients at 128 bits
/// and more (problems up to kMpfiWork; larger ones are judged on the fast enclosures, counted as
/// capped). Both tiers: the statistical band (Steps SB1-SB5: the sums' additions, the math path's
/// normalization and D, and with GradientAlgorithm::flash the terms' own roundings taken under Model S)
/// is never wider than the certified one; options.tier decides. Throws ContractError when
/// validate or validate_backward fails, or a gradient's size does not match. dq is judged in dtype, dk
/// and dv in kv_format.
///
/// dmask, when not empty, is the kernel's gradient of the additive mask in the mask's shape (the
/// mask's size; dtype): dβ = dS summed over each element's broadcast positions (Step B10). Sampled by
/// mask rows (the mask's shape padded to [mB, mH, mL, mS], a row per (b', h', i')): with options.rows,
/// max(2, ⌈rows / F⌉) of them, F the query rows each one sums over. Every element is checked finite, and
/// zero where no key takes part. ContractError when the problem has no additive mask or the size differs.
///
/// dsinks, when not empty, is the kernel's gradient of the sinks' logits, [Hq] in fp32: dz_h = -Σ_{b,i}
/// P_iz D_i over the rows of head h (Step B12). With options.rows max(1, ⌈rows / (B·L)⌉) heads are
/// certified, all of them otherwise; every element is checked finite. ContractError when the problem
/// has no sinks or the size is not Hq. Under softcap dQ and dK carry the cap's derivative (Step B11).
[[nodiscard]] BackwardReport certify_backward(const TensorProblem& problem, std::span<const double> dout,
                                              std::span<const double> dq, std::span<const double> dk,
                                              std::span<const double> dv, const CertifyOptions& options,
                                              const BackwardInputs& inputs = {},
                                              std::span<const double> dmask = {},
                                              std::span<const double> dsinks = {});

/// The largest B·Hq·L·S·(E + Ev) for which certify_backward refines with MPFI.
inline constexpr double kMpfiWork = 1 << 24;

}  // namespace attn::verify
