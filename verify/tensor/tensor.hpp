// Binary tensors with PyTorch's scaled_dot_product_attention semantics: the problem a kernel
// engineer's attention call solves, held exactly (every fp64/fp32/fp16/bf16 value is a dyadic
// rational, stored here as the double it equals). The rules (which keys take part, GQA head
// mapping, causal alignment, the mask's broadcast) are written from PyTorch's documentation, not
// from src/ (README, "What verify/ may import from src/").
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "numeric/formats.hpp"
#include "result.hpp"

namespace attn::verify {

/// Memory order of query, key, value and output: [B, H, L, E] (PyTorch's SDPA) or [B, L, H, E].
enum class AxisOrder { batch_head_seq, batch_seq_head };

/// Causal masking: none; top-left (key j takes part in query i iff j <= i, PyTorch's is_causal);
/// bottom-right (j <= i + S - L, FlashAttention >= 2.1).
enum class Causal { none, top_left, bottom_right };

/// The mask argument: none, boolean (true = takes part, PyTorch's convention) or additive (added
/// to the scaled scores; -inf allowed).
enum class TensorMask { none, boolean, additive };

/// One SDPA call. query [B, Hq, L, E], key [B, Hkv, S, E], value [B, Hkv, S, Ev] (in `layout`),
/// Hq = G·Hkv and query head h uses key/value head h / G (GQA; G = 1 without it).
struct TensorProblem {
  std::size_t batch = 1, q_heads = 1, kv_heads = 1;
  std::size_t L = 0, S = 0, E = 0, Ev = 0;
  DType dtype = DType::fp32;                          ///< storage format of query, output (and key, value)
  /// Storage format of key and value when it is not dtype (llama.cpp's fp16 KV cache read by an fp32
  /// query); nullopt: dtype.
  std::optional<DType> kv_dtype;
  AxisOrder layout = AxisOrder::batch_head_seq;
  std::vector<double> query, key, value;              ///< each exactly representable in its storage format
  std::optional<double> scale;                        ///< multiplier of Q·Kᵀ; nullopt: the exact 1/√E
  TensorMask mask_kind = TensorMask::none;
  std::vector<std::size_t> mask_shape;                ///< rank 2..4, broadcastable to [B, Hq, L, S]
  std::vector<double> mask;                           ///< boolean: 0/1; additive: values (-inf allowed)
  std::vector<std::size_t> key_lengths;               ///< empty, or B entries <= S: keys j >= length masked
  Causal causal = Causal::none;
  /// Sliding window (FlashAttention's window_size, bottom-right aligned): query i sees key j iff
  /// i + S - L - left <= j <= i + S - L + right; -1 leaves that side unbounded. (S - 1, 0) is exactly
  /// bottom-right causal. Combines with causal, masks and key lengths (every rule must admit the key).
  std::int64_t window_left = -1, window_right = -1;
  /// ALiBi (FlashAttention's alibi_slopes): empty, Hq slopes (one per query head) or B·Hq ([B, Hq]
  /// row-major); the bias -slope·|i + S - L - j| joins the scaled score, as an additive mask would.
  /// Slopes are fp32 values (FlashAttention's dtype), so every bias is exact in double. Not together
  /// with an additive mask (the two biases' sum need not be exact).
  std::vector<double> alibi_slopes;
  /// Logit softcapping (FlashAttention's softcap, Gemma 2's): c > 0 turns the scaled score s into
  /// c·tanh(s/c) before the mask's or ALiBi's bias is added; 0 is off. An fp32 value.
  double softcap = 0;
  /// Attention sinks (gpt-oss, llama.cpp, FlashAttention 4): empty or Hq fp32 logits z_h, in score
  /// units, that join every row's softmax denominator (Σ_j e^{s_j} + e^{z_h}) and carry no value.
  /// The oracle treats the sink as a key after the last one, at position S, with score z_h and a
  /// zero value row (RowEnclosure::keys then ends with S).
  std::vector<double> sinks;
};

/// A problem that is well-formed: sizes agree with the data, Hkv divides Hq, the mask broadcasts,
/// key lengths fit, the window's sides are -1 or non-negative, ALiBi's slopes are Hq or B·Hq fp32
/// values (and come without an additive mask), the scale is finite, values are finite and representable in their storage
/// format (query and an additive mask: dtype; key and value: kv_format). The error
/// names the argument (as PyTorch calls it: query, key, value, attn_mask, scale, key_lengths;
/// FlashAttention's window_size, alibi_slopes).
[[nodiscard]] Result<Ok, Error> validate(const TensorProblem& problem);

/// What validate admits beyond a strict problem: the forward's certification (certify_tensor) takes
/// NaN and ±inf in query, key and value (judged by IEEE semantics, tensor_ieee.hpp) and empty batch,
/// query or key sequences (B = 0 or L = 0: no output; S = 0: every row without keys).
enum class Admit { strict, ieee };
[[nodiscard]] Result<Ok, Error> validate(const TensorProblem& problem, Admit admit);
/// validate except the values of query, key and value, which the caller holds elsewhere and checks
/// itself (a problem certified one group at a time: certify_in_groups); their vectors may be empty.
[[nodiscard]] Result<Ok, Error> validate_without_values(const TensorProblem& problem, Admit admit = Admit::strict);

/// Does query, key or value hold a NaN or an infinity? Is the problem empty (B, L or S zero)?
[[nodiscard]] bool has_nonfinite_inputs(const TensorProblem& problem);
[[nodiscard]] bool is_empty(const TensorProblem& problem);

/// The storage format of key and value: kv_dtype, else dtype.
[[nodiscard]] DType kv_format(const TensorProblem& problem);

/// Index of element (b, h, row, c) of a tensor with `heads` heads, `rows` rows and `width` columns.
[[nodiscard]] std::size_t tensor_index(const TensorProblem& problem, std::size_t heads, std::size_t rows,
                                       std::size_t width, std::size_t b, std::size_t h, std::size_t row,
                                       std::size_t c);

/// The key/value head query head h reads: h / (Hq / Hkv).
[[nodiscard]] std::size_t kv_head_of(const TensorProblem& problem, std::size_t h);

/// Does query head h have a sink? Its logit.
[[nodiscard]] bool has_sinks(const TensorProblem& problem);
[[nodiscard]] double sink_of(const TensorProblem& problem, std::size_t h);

/// Is either side of the sliding window bounded?
[[nodiscard]] bool has_window(const TensorProblem& problem);

/// Does key j take part in row (b, h, i)? False when a boolean mask says false, an additive mask
/// is -inf, j >= key_lengths[b], or the causal rule or the window excludes it.
[[nodiscard]] bool takes_part(const TensorProblem& problem, std::size_t b, std::size_t h, std::size_t i,
                              std::size_t j);

/// Position of (b, h, i, j) in the mask (row-major in mask_shape), broadcasting dimensions of size 1.
[[nodiscard]] std::size_t mask_offset(const TensorProblem& problem, std::size_t b, std::size_t h, std::size_t i,
                                      std::size_t j);

/// The bias added to the scaled score of (b, h, i, j): the additive mask's value, or ALiBi's
/// -slope·|i + S - L - j| (exact), or 0.
[[nodiscard]] double additive_bias(const TensorProblem& problem, std::size_t b, std::size_t h, std::size_t i,
                                   std::size_t j);

/// Rows: one per (batch item, query head, query), B·Hq·L in all. Row r is (b, h, i) with
/// r = (b·Hq + h)·L + i.
struct RowIndex {
  std::size_t b = 0, h = 0, i = 0;
};
[[nodiscard]] RowIndex row_index(const TensorProblem& problem, std::size_t row);

/// The dimensions of a [B, heads, rows, width] tensor as it is stored: [B, rows, heads, width] in the
/// batch_seq_head layout.
[[nodiscard]] std::vector<std::size_t> stored_dims(const TensorProblem& problem, std::size_t heads, std::size_t rows,
                                                   std::size_t width);
/// A shape as text: "[2, 3, 4]".
[[nodiscard]] std::string shape_text(std::span<const std::size_t> dims);
/// Flat element k of a row-major tensor of `dims` named in its own shape: "(b, h, i, c) of [B, H, L, E]".
[[nodiscard]] std::string element_name(std::span<const std::size_t> dims, std::size_t k);
/// "NaN", "+inf" or "-inf" for a value that is not finite.
[[nodiscard]] const char* nonfinite_name(double x);

/// Does any key take part in the row? (A row without one is exactly zero.)
[[nodiscard]] bool row_has_keys(const TensorProblem& problem, std::size_t row);

/// Index of output element c of the row in the [B, Hq, L, Ev] output (in problem.layout).
[[nodiscard]] std::size_t output_index(const TensorProblem& problem, std::size_t row, std::size_t c);

}  // namespace attn::verify
