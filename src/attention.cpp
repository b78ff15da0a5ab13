#include "attention.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace attn {

KernelStatus masked_multihead_attention(const AttentionShape& shape, std::span<const double> Q,
                                        std::span<const double> K, std::span<const double> V, MaskView mask,
                                        double scale_divisor, std::span<double> out, std::span<double> weights) {
  if (shape.heads == 0 || shape.d_k % shape.heads != 0 || shape.d_v % shape.heads != 0) return KernelStatus::bad_heads;
  // Sizes come from a validated instance (at most 2^20 each), so these products cannot overflow.
  if (Q.size() != shape.n * shape.d_k || K.size() != shape.m * shape.d_k || V.size() != shape.m * shape.d_v ||
      out.size() != shape.n * shape.d_v || (!weights.empty() && weights.size() != shape.heads * shape.n * shape.m))
    return KernelStatus::size_mismatch;
  if (mask.kind == MaskKind::explicit_mask && mask.bits.size() != shape.n * shape.m)
    return KernelStatus::mask_size_mismatch;
  if (!(std::isfinite(scale_divisor) && scale_divisor > 0)) return KernelStatus::bad_scale_divisor;
  const std::size_t head_k = shape.d_k / shape.heads;
  const std::size_t head_v = shape.d_v / shape.heads;
  std::fill(out.begin(), out.end(), 0.0);
  std::fill(weights.begin(), weights.end(), 0.0);
  std::vector<std::size_t> visible;
  std::vector<double> score;
  visible.reserve(shape.m);
  score.reserve(shape.m);
  for (std::size_t i = 0; i < shape.n; ++i) {
    visible.clear();
    for (std::size_t j = 0; j < shape.m; ++j) {
      if (mask.visible(i, j, shape.m)) visible.push_back(j);
    }
    if (visible.empty()) continue;  // all masked: the row stays exactly +0.0, no softmax
    for (std::size_t g = 0; g < shape.heads; ++g) {
      const double* q = &Q[i * shape.d_k + g * head_k];
      score.clear();
      for (std::size_t j : visible) {
        const double* k = &K[j * shape.d_k + g * head_k];
        double dot = 0.0;
        for (std::size_t c = 0; c < head_k; ++c) dot += q[c] * k[c];
        score.push_back(dot);
      }
      // Shifted softmax: (dot - max dot) / divisor <= 0, so every exp lies in (0, 1] and the
      // largest is exactly 1; the total is in [1, m] and never overflows.
      const double top = *std::max_element(score.begin(), score.end());
      double total = 0.0;
      for (double& s : score) {
        s = std::exp((s - top) / scale_divisor);
        total += s;
      }
      double* o = &out[i * shape.d_v + g * head_v];
      for (std::size_t t = 0; t < visible.size(); ++t) {
        const double w = score[t] / total;
        const double* v = &V[visible[t] * shape.d_v + g * head_v];
        for (std::size_t c = 0; c < head_v; ++c) o[c] += w * v[c];
        if (!weights.empty()) weights[(g * shape.n + i) * shape.m + visible[t]] = w;
      }
    }
  }
  return KernelStatus::ok;
}

}  // namespace attn
