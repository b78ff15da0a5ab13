#include "campaign/implementation.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include "flash_attention.hpp"
#include "judge/rules.hpp"
#include "result.hpp"

namespace attn::verify {

Solution OnlineSoftmaxKernel::run(const Instance& instance) const {
  const std::size_t n = instance.n, m = instance.m, h = instance.heads;
  Solution solution = zero_solution(instance, true);
  const double divisor = divisor_as_double(instance);
  std::vector<double> dots(m);
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    const BatchItem& item = instance.batch[b];
    for (std::size_t g = 0; g < h; ++g) {
      const HeadColumns head = head_columns(instance, g);
      std::vector<double> accumulator(head.v_count);
      for (std::size_t i = 0; i < n; ++i) {
        // One pass: when a larger dot product arrives, rescale what was summed so far.
        double running_max = -std::numeric_limits<double>::infinity();
        double running_sum = 0.0;
        std::fill(accumulator.begin(), accumulator.end(), 0.0);
        for (std::size_t j = 0; j < m; ++j) {
          if (!key_visible(instance, b, i, j)) continue;
          double dot = 0.0;
          for (std::size_t c = 0; c < head.k_count; ++c) {
            dot += item.Q.at(i, head.k_first + c) * item.K.at(j, head.k_first + c);
          }
          dots[j] = dot;
          if (dot > running_max) {
            const double rescale = running_sum == 0.0 ? 0.0 : std::exp((running_max - dot) / divisor);
            running_sum *= rescale;
            for (double& a : accumulator) a *= rescale;
            running_max = dot;
          }
          const double e = std::exp((dot - running_max) / divisor);
          running_sum += e;
          for (std::size_t c = 0; c < head.v_count; ++c) accumulator[c] += e * item.V.at(j, head.v_first + c);
        }
        if (running_sum == 0.0) continue;  // no visible key: the row stays +0.0
        double* out = &solution.values[(b * n + i) * instance.d_v + head.v_first];
        for (std::size_t c = 0; c < head.v_count; ++c) out[c] = accumulator[c] / running_sum;
        double* weights = &solution.weights[((b * h + g) * n + i) * m];
        for (std::size_t j = 0; j < m; ++j) {
          if (key_visible(instance, b, i, j)) weights[j] = std::exp((dots[j] - running_max) / divisor) / running_sum;
        }
      }
    }
  }
  return solution;
}

Solution FlashKernel::run(const Instance& instance) const {
  // Instance matrices are [n, H·hd] per batch item: the [B, n, H, d] layout once concatenated.
  std::vector<double> Q, K, V;
  std::vector<std::uint8_t> mask;
  for (const BatchItem& item : instance.batch) {
    Q.insert(Q.end(), item.Q.values.begin(), item.Q.values.end());
    K.insert(K.end(), item.K.values.begin(), item.K.values.end());
    V.insert(V.end(), item.V.values.begin(), item.V.values.end());
    mask.insert(mask.end(), item.mask.begin(), item.mask.end());
  }
  FlashShape shape;
  shape.batch = instance.batch.size(), shape.q_heads = shape.kv_heads = instance.heads;
  shape.n = instance.n, shape.m = instance.m;
  shape.head_dim_k = instance.d_k / instance.heads, shape.head_dim_v = instance.d_v / instance.heads;
  FlashOptions options;
  options.layout = TensorLayout::batch_seq_head;
  if (instance.mask == MaskKind::causal) options.causal = CausalAlignment::top_left;
  if (instance.mask == MaskKind::explicit_mask) options.mask_bits = mask;  // B x n x m
  options.scale_divisor = instance.scale_divisor();
  options.key_tile = key_tile_;
  options.query_tile = query_tile_;
  Solution solution = zero_solution(instance, false);
  if (flash_attention(shape, Q, K, V, solution.values, options) != KernelStatus::ok) {
    throw ContractError("flash_attention refused a valid instance");
  }
  return solution;
}

}  // namespace attn::verify
