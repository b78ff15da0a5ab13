// NaN and infinity in the inputs: what IEEE 754 arithmetic makes of them in softmax(Q·Kᵀ·scale)·V,
// element by element, so that a kernel's NaN propagation is judged (a kernel that swallows a NaN
// fails, and so does one that lets a key with no part in the row leak one). Internal to attn_tensor;
// the rules are stated in the README ("NaN and infinity in the inputs").
//
// For row (b, h, i) and a key j that takes part (takes_part: masks, causal, window, key lengths):
//   score s_ij = scale · Σ_c q_ic k_jc (+ bias). A NaN factor, inf·0, or +inf and -inf terms together
//   make it NaN; infinite terms of one sign make it that infinity (finite ones stay finite exactly).
// Rule 1 (NaN row): some key's score is NaN or +inf. Every output of the row is NaN: the row's maximum
//   is NaN or +inf, and s - max or e^{+inf}/Σ is NaN in every form of the softmax.
// Rule 2 (keys that drop out): a score of -inf weighs e^{-inf} = 0 exactly, as an additive -inf does.
//   When every key's score is -inf the row has no keys: exactly zero, as a fully masked row.
//   When only some are, the row's output is finite, but its exact value is that of a problem the
//   oracle does not hold (fewer keys): the row is checked finite and not certified (unmodelled).
//   With softcap an infinite score is capped to ±c, a finite score from infinite inputs: unmodelled too.
// Rule 3 (values): in a row whose scores are all finite, output column c is NaN when a key that takes
//   part has v_jc NaN (0·NaN is NaN, however small its weight) or +inf and -inf both occur there;
//   ±inf when infinities of one sign do — or NaN: a weight that rounds to 0 times inf is NaN, so a
//   correct kernel may give either (never a finite value). Every other column is certified as usual.
//   The same holds in an unmodelled row, where a key with a -inf score and a non-finite v_jc may also
//   make column c NaN (its weight e^{-inf - m} = 0 times NaN or inf), or leave it finite; and so in
//   a row whose every score is -inf (a kernel that starts its maximum at a sink forms those weights).
// Rule 4 (leaks): a key past its sequence's length (key_lengths: padding, a KV cache's unused
//   slots) contributes nothing, NaN and infinities included; a NaN from it is a failure. A key that a
//   mask, the causal rule or the window excludes may leak a NaN, never require one: FlashAttention
//   masks a tile by writing -inf into its scores and multiplies P·V over the whole tile (0·NaN), and
//   an additive -inf over a NaN or +inf score is NaN. So its non-finite value makes its column NaN or
//   the value, and its non-finite key makes every element NaN or the value.
// Rules 1-2 leave NaN allowed too wherever a score is -inf: an infinity against a tiny factor that a
//   kernel rounds or flushes to 0 (fp16 pre-scaling, flush-to-zero) is inf·0 = NaN there, and PyTorch's
//   softmax over a row of -inf is NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace attn::verify::detail {

/// What a row's outputs must be.
enum class IeeeRow : std::uint8_t {
  normal,      ///< every score finite: certified, column by column (IeeeColumn)
  nan,         ///< rule 1: every output NaN
  keyless,     ///< rule 2: every score -inf, so exactly zero
  unmodelled,  ///< rule 2 with keys left, or softcap over an infinite score: checked finite
};

/// What an output column of a normal or unmodelled row must be: its value (certified in a normal
/// row, finite in an unmodelled one), NaN, ±inf (or NaN), or its value or NaN (a key whose score is
/// -inf has a non-finite value there: its weight 0 times it).
enum class IeeeColumn : std::uint8_t { value, nan, plus_inf, minus_inf, maybe_nan };

/// One row's expectation and the input that caused it (an element named in its tensor's shape).
struct IeeeExpectation {
  IeeeRow row = IeeeRow::normal;
  std::vector<IeeeColumn> columns;  ///< Ev entries (read in every row but a NaN one)
  bool nan_allowed = false;         ///< every element may be NaN too (rules 1-2's -inf, rule 4's keys)
  std::string cause;                ///< "key (0, 1, 5, 3) is NaN"; empty for a plain row
};

/// Where a problem's non-finite inputs sit, gathered once: per query row whether it holds one, and per
/// (batch item, kv head) the key rows whose key or value does.
class IeeeInputs {
 public:
  explicit IeeeInputs(const TensorProblem& problem);
  /// Rules 1-3 for row `row` of the problem given to the constructor (which must outlive this).
  [[nodiscard]] IeeeExpectation expect(std::size_t row) const;
  /// The problem with every NaN and infinity of query, key and value replaced by 0: where rules 1-3
  /// leave an element to the oracle, its exact value is this problem's (no replaced value reaches it).
  [[nodiscard]] TensorProblem finite_problem() const;
  /// The first non-finite value of a key past the row's sequence length, named (rule 4), or "".
  [[nodiscard]] std::string leak_source(std::size_t row) const;

 private:
  const TensorProblem& p_;
  std::vector<char> bad_query_;                          // per row (b, h, i)
  std::vector<std::vector<std::size_t>> bad_keys_, bad_values_;  // per b·Hkv + g: key rows j
};

}  // namespace attn::verify::detail
