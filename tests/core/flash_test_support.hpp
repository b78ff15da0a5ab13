// Helpers of test_flash_attention.cpp: random cases, the simple double kernel as reference, a
// straightforward fp32 implementation, and the per-value tolerance from flash_error_bound.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "attention.hpp"
#include "flash_attention.hpp"

namespace attn::flash_test {

/// One batched call. Q, K, V and outputs are held [B, n, H, d] (the simple kernel's layout per
/// item); run_fast permutes them when options.layout is [B, H, n, d].
struct Case {
  FlashShape shape;             // q_heads == kv_heads
  std::vector<double> Q, K, V;  // every value exactly representable in fp32
  MaskKind mask_kind = MaskKind::none;
  CausalAlignment alignment = CausalAlignment::top_left;  // of a causal mask_kind
  std::vector<std::uint8_t> mask;                         // B x n x m when explicit
  std::vector<std::size_t> key_lengths;                   // empty or B
  FlashOptions options;                                   // spans and the causal rule are filled in by run_fast
};

/// The sizes of a Case: `heads` query and key/value heads.
struct Sizes {
  std::size_t batch = 1, heads = 1, n = 0, m = 0, head_dim_k = 0, head_dim_v = 0;
};

inline const char* level_name(SimdLevel level) {
  return level == SimdLevel::avx512 ? "avx512" : level == SimdLevel::avx2 ? "avx2" : "baseline";
}

inline std::vector<SimdLevel> supported_levels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel level : {SimdLevel::baseline, SimdLevel::avx2, SimdLevel::avx512})
    if (simd_level_supported(level)) levels.push_back(level);
  return levels;
}

/// Values uniform in [-2, 2] rounded to fp32, explicit masks 70% visible, scale √d_k.
inline Case random_case(Sizes sizes, MaskKind mask, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  Case c;
  const FlashShape shape{sizes.batch, sizes.heads, sizes.heads, sizes.n, sizes.m, sizes.head_dim_k, sizes.head_dim_v};
  c.shape = shape;
  auto fill = [&](std::vector<double>& v, std::size_t rows, std::size_t d) {
    v.resize(shape.batch * rows * shape.q_heads * d);
    for (double& x : v) x = value(rng);
  };
  fill(c.Q, shape.n, shape.head_dim_k);
  fill(c.K, shape.m, shape.head_dim_k);
  fill(c.V, shape.m, shape.head_dim_v);
  if (mask == MaskKind::explicit_mask) {
    c.mask.resize(shape.batch * shape.n * shape.m);
    for (auto& bit : c.mask) bit = rng() % 10 < 7;
  }
  c.mask_kind = mask;
  c.options.layout = TensorLayout::batch_seq_head;
  c.options.scale_divisor = std::sqrt(static_cast<double>(std::max<std::size_t>(shape.head_dim_k, 1)));
  return c;
}

inline bool visible(const Case& c, std::size_t b, std::size_t i, std::size_t j) {
  if (!c.key_lengths.empty() && j >= c.key_lengths[b]) return false;
  if (c.mask_kind == MaskKind::causal)
    return c.alignment == CausalAlignment::top_left ? j <= i : j + c.shape.n <= i + c.shape.m;
  if (c.mask_kind == MaskKind::explicit_mask) return c.mask[(b * c.shape.n + i) * c.shape.m + j] != 0;
  return true;
}

/// [B, rows, H, d] <-> [B, H, rows, d]; `back` inverts.
template <class T>
std::vector<T> permute(const std::vector<T>& in, const FlashShape& s, std::size_t rows, std::size_t d, bool back) {
  std::vector<T> out(in.size());
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t h = 0; h < s.q_heads; ++h)
        for (std::size_t c = 0; c < d; ++c) {
          const std::size_t seq_head = ((b * rows + r) * s.q_heads + h) * d + c;
          const std::size_t head_seq = ((b * s.q_heads + h) * rows + r) * d + c;
          (back ? out[seq_head] : out[head_seq]) = back ? in[head_seq] : in[seq_head];
        }
  return out;
}

/// The fast kernel in precision T on the case's inputs; output [B, n, H, d_v] as T.
template <class T> std::vector<T> run_fast(const Case& c) {
  const FlashShape& s = c.shape;
  const bool head_major = c.options.layout == TensorLayout::batch_head_seq;
  auto input = [&](const std::vector<double>& v, std::size_t rows, std::size_t d) {
    const std::vector<double> laid = head_major ? permute(v, s, rows, d, false) : v;
    return std::vector<T>(laid.begin(), laid.end());
  };
  const std::vector<T> Q = input(c.Q, s.n, s.head_dim_k), K = input(c.K, s.m, s.head_dim_k),
                       V = input(c.V, s.m, s.head_dim_v);
  std::vector<T> out(s.batch * s.n * s.q_heads * s.head_dim_v, T(-1));
  FlashOptions options = c.options;
  options.mask_bits = c.mask;
  options.causal = c.mask_kind == MaskKind::causal ? c.alignment : CausalAlignment::none;
  options.key_lengths = c.key_lengths;
  const KernelStatus status = flash_attention(s, std::span<const T>(Q), K, V, out, options);
  EXPECT_EQ(status, KernelStatus::ok);
  return head_major ? permute(out, s, s.n, s.head_dim_v, true) : out;
}

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// The simple double kernel's output and weights (B x H x n x m), masks folded into one
/// explicit mask per batch item.
struct Reference {
  std::vector<double> out, weights;
};

inline Reference reference_of(const Case& c) {
  const FlashShape& s = c.shape;
  const AttentionShape item{s.n, s.m, s.q_heads * s.head_dim_k, s.q_heads * s.head_dim_v, s.q_heads};
  Reference r{std::vector<double>(s.batch * s.n * item.d_v), std::vector<double>(s.batch * s.q_heads * s.n * s.m)};
  std::vector<std::uint8_t> bits(s.n * s.m);
  for (std::size_t b = 0; b < s.batch; ++b) {
    for (std::size_t i = 0; i < s.n; ++i)
      for (std::size_t j = 0; j < s.m; ++j) bits[i * s.m + j] = visible(c, b, i, j);
    auto part = [&](const std::vector<double>& v, std::size_t size) { return std::span(v).subspan(b * size, size); };
    const KernelStatus status =
        masked_multihead_attention(item, part(c.Q, s.n * item.d_k), part(c.K, s.m * item.d_k),
                                   part(c.V, s.m * item.d_v), {MaskKind::explicit_mask, bits}, c.options.scale_divisor,
                                   std::span(r.out).subspan(b * s.n * item.d_v, s.n * item.d_v),
                                   std::span(r.weights).subspan(b * s.q_heads * s.n * s.m, s.q_heads * s.n * s.m));
    EXPECT_EQ(status, KernelStatus::ok);
  }
  return r;
}

/// Tolerance for output (b, i, h, col): the fast path's bound plus the fp64 bound, which
/// dominates the simple kernel's own error (same model, correctly rounded exp, one tile).
/// row_weights[j]: the exact (or reference) weight of key j in row i of head h of item b. Against
/// the exact value (the oracle) pass with_reference = false.
template <class T> double tolerance(const Case& c, std::span<const double> row_weights, std::size_t b, std::size_t i,
                                    std::size_t h, std::size_t col, bool with_reference = true) {
  const FlashShape& s = c.shape;
  FlashBoundTerms t;
  t.head_dim_k = s.head_dim_k;
  t.scale_divisor = c.options.scale_divisor;
  double top = -INFINITY, bottom = INFINITY;
  std::size_t last = 0;
  for (std::size_t j = 0; j < s.m; ++j) {
    if (!visible(c, b, i, j)) continue;
    double dot = 0, abs_dot = 0;
    for (std::size_t k = 0; k < s.head_dim_k; ++k) {
      const double q = c.Q[((b * s.n + i) * s.q_heads + h) * s.head_dim_k + k];
      const double key = c.K[((b * s.m + j) * s.q_heads + h) * s.head_dim_k + k];
      dot += q * key, abs_dot += std::fabs(q * key);
    }
    const double v = std::fabs(c.V[((b * s.m + j) * s.q_heads + h) * s.head_dim_v + col]);
    ++t.keys, last = j;
    t.max_abs_dot = std::max(t.max_abs_dot, abs_dot);
    top = std::max(top, dot), bottom = std::min(bottom, dot);
    t.weighted_abs_v += row_weights[j] * v;
    t.max_abs_v = std::max(t.max_abs_v, v);
  }
  if (t.keys == 0) return 0;  // fully masked: exactly zero
  t.score_range = (top - bottom) / t.scale_divisor;
  t.key_tiles = last / flash_key_tile(s, c.options, sizeof(T)) + 1;  // the kernel's tiles are at least this wide
  return flash_error_bound<T>(t) + (with_reference ? flash_error_bound<double>(t) : 0.0);
}

/// How many outputs of the fast kernel in precision T lie outside their tolerance.
template <class T> std::size_t count_outside_bound(const Case& c, const Reference& ref, int report = 0) {
  const std::vector<T> out = run_fast<T>(c);
  const FlashShape& s = c.shape;
  std::size_t outside = 0;
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t i = 0; i < s.n; ++i)
      for (std::size_t h = 0; h < s.q_heads; ++h)
        for (std::size_t col = 0; col < s.head_dim_v; ++col) {
          const std::size_t at = ((b * s.n + i) * s.q_heads + h) * s.head_dim_v + col;
          const double error = std::fabs(static_cast<double>(out[at]) - ref.out[at]);
          const auto row_weights = std::span(ref.weights).subspan(((b * s.q_heads + h) * s.n + i) * s.m, s.m);
          const double allowed = tolerance<T>(c, row_weights, b, i, h, col);
          if (error <= allowed) continue;
          if (outside++ < static_cast<std::size_t>(report))
            ADD_FAILURE() << (sizeof(T) == 4 ? "fp32" : "fp64") << " b=" << b << " i=" << i << " h=" << h
                          << " c=" << col << ": " << out[at] << " vs " << ref.out[at] << ", tolerance " << allowed;
        }
  return outside;
}

template <class T> void expect_within_bound(const Case& c, const Reference& ref) {
  EXPECT_EQ(count_outside_bound<T>(c, ref, /*report=*/3), 0u);
}
template <class T> void expect_within_bound(const Case& c) { expect_within_bound<T>(c, reference_of(c)); }

/// softmax then weighted sum, all in fp32 with std::exp: the baseline of FlashAttention's
/// accuracy criterion (their tests compare with a same-precision PyTorch reference).
inline std::vector<double> straightforward_fp32(const Case& c) {
  const FlashShape& s = c.shape;
  std::vector<double> out(s.batch * s.n * s.q_heads * s.head_dim_v, 0.0);
  std::vector<float> p(s.m);
  const float inverse = static_cast<float>(1 / c.options.scale_divisor);
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t i = 0; i < s.n; ++i)
      for (std::size_t h = 0; h < s.q_heads; ++h) {
        float top = -INFINITY, total = 0;
        for (std::size_t j = 0; j < s.m; ++j) {
          float dot = 0;
          for (std::size_t k = 0; k < s.head_dim_k; ++k)
            dot += static_cast<float>(c.Q[((b * s.n + i) * s.q_heads + h) * s.head_dim_k + k]) *
                   static_cast<float>(c.K[((b * s.m + j) * s.q_heads + h) * s.head_dim_k + k]);
          p[j] = visible(c, b, i, j) ? dot * inverse : -INFINITY;
          top = std::max(top, p[j]);
        }
        if (top == -INFINITY) continue;
        for (std::size_t j = 0; j < s.m; ++j) total += p[j] = std::exp(p[j] - top);
        for (std::size_t col = 0; col < s.head_dim_v; ++col) {
          float acc = 0;
          for (std::size_t j = 0; j < s.m; ++j)
            acc += p[j] / total * static_cast<float>(c.V[((b * s.m + j) * s.q_heads + h) * s.head_dim_v + col]);
          out[((b * s.n + i) * s.q_heads + h) * s.head_dim_v + col] = acc;
        }
      }
  return out;
}

struct ErrorStats {
  double max = 0, mean = 0;
};

inline ErrorStats error_stats(const std::vector<double>& got, const std::vector<double>& want) {
  ErrorStats e;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(got[i] - want[i]);
    e.max = std::max(e.max, d), e.mean += d;
  }
  e.mean /= static_cast<double>(std::max<std::size_t>(got.size(), 1));
  return e;
}

}  // namespace attn::flash_test
