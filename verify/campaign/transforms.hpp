// Instance transformations for metamorphic properties: each returns a new valid instance whose
// exact answer relates to the original's in a known way.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "problem.hpp"

namespace attn::verify {

/// The same computation stated as a `general` instance (ai006/ai031 are special cases of it).
[[nodiscard]] Instance as_general(Instance instance);

/// The mask made explicit (causal becomes lower-triangular, none becomes all ones).
[[nodiscard]] Instance with_explicit_mask(Instance instance);

/// Sets element `index` of a matrix from exact decimal text (value and text stay consistent);
/// throws attn::ContractError when `text` is not a decimal.
void set_text(Matrix& matrix, std::size_t index, const std::string& text);

/// Keys and values (and mask columns) reordered: new key j is old key permutation[j].
[[nodiscard]] Instance permute_keys(const Instance& instance, const std::vector<std::size_t>& permutation);

/// Head blocks reordered in Q, K and V alike: new block g is old block permutation[g].
[[nodiscard]] Instance permute_heads(const Instance& instance, const std::vector<std::size_t>& permutation);

/// Head g alone: a single-head instance on head g's column blocks, with the same divisor rule.
[[nodiscard]] Instance head_slice(const Instance& instance, std::size_t g);

/// Every V value times 2^power (exact in decimal and in binary).
[[nodiscard]] Instance scale_values(const Instance& instance, int power);

/// Each query row gets one extra column per head, and each key a 1 there: every score of row i
/// in head g grows by shift(i, g). Needs a scale rule that does not depend on d_k (none, explicit);
/// throws attn::ContractError on the √(d_k/h) rule.
[[nodiscard]] Instance shift_scores(const Instance& instance, const std::vector<std::string>& shift_per_row);

}  // namespace attn::verify
