#include "solve.hpp"

#include <span>

#include "attention.hpp"
#include "format.hpp"
#include "result.hpp"

namespace attn {

Solution zero_solution(const Instance& instance, bool with_weights) {
  Solution solution;
  solution.rows = instance.batch.size() * instance.n;
  solution.cols = instance.d_v;
  solution.values.assign(solution.rows * solution.cols, 0.0);
  if (with_weights) solution.weights.assign(instance.batch.size() * instance.heads * instance.n * instance.m, 0.0);
  return solution;
}

Solution solve(const Instance& instance, bool with_weights) {
  const AttentionShape shape{instance.n, instance.m, instance.d_k, instance.d_v, instance.heads};
  Solution solution = zero_solution(instance, with_weights);
  const std::size_t weights_per_item = instance.heads * instance.n * instance.m;
  const double divisor = instance.scale_divisor();
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    const BatchItem& item = instance.batch[b];
    std::span<double> out(solution.values.data() + b * instance.n * instance.d_v, instance.n * instance.d_v);
    std::span<double> weights;
    if (with_weights) weights = std::span<double>(solution.weights.data() + b * weights_per_item, weights_per_item);
    const KernelStatus status = masked_multihead_attention(shape, item.Q.values, item.K.values, item.V.values,
                                                           {instance.mask, item.mask}, divisor, out, weights);
    if (status != KernelStatus::ok) throw ContractError("solve: the kernel refused a read instance");
  }
  return solution;
}

std::string format_solution(const Instance& instance, const Solution& solution) {
  return format_rows(solution.values, solution.cols, instance.decimals);
}

}  // namespace attn
