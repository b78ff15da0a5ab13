// Solving a parsed instance with the production kernel.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "problem.hpp"

namespace attn {

/// The kernel's answer for a whole instance: batch items stacked, B·n rows of d_v values, and
/// (when asked for) the attention weights, B x h x n x m.
struct Solution {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<double> values;
  std::vector<double> weights;
};

/// A zero solution of the instance's shape: B·n x d_v values and, when asked, B x h x n x m weights.
[[nodiscard]] Solution zero_solution(const Instance& instance, bool with_weights);

/// Runs masked_multihead_attention on every batch item with the instance's mask and scale. Throws
/// ContractError when the kernel refuses the instance (one read_instance accepted never is).
[[nodiscard]] Solution solve(const Instance& instance, bool with_weights = false);

/// The judge's output text: B·n lines of d_v values with instance.decimals digits.
[[nodiscard]] std::string format_solution(const Instance& instance, const Solution& solution);

}  // namespace attn
