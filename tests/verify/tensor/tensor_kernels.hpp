// Attention kernels for one head on plain row-major arrays (Q [L, E], K [S, E], V [S, Ev], an
// optional additive bias [L, S] with -inf allowed), written the ways real kernels are, plus
// deliberately wrong ones, and an exact reference in __float128 that yields tensor_band's RowTerms.
// Nothing of that shares code with verify/ or src/. At the end: run_flash, the adapter that runs
// the production kernel (attn::flash_attention) on a TensorProblem.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <quadmath.h>
#include <type_traits>
#include <vector>

#include "flash_attention.hpp"
#include "tensor/tensor.hpp"
#include "tensor/tensor_band.hpp"

namespace attn::testing_support {

/// x rounded to nearest (ties to even) in a binary format with `digits` significand bits (hidden
/// bit included), smallest normal exponent `min_exponent` and largest finite `max_finite`, with
/// subnormals; overflow gives ±inf. Every step is exact in double but the one nearbyint.
inline double round_binary(double x, int digits, int min_exponent, double max_finite) {
  if (x == 0 || !std::isfinite(x)) return x;
  int exponent = 0;
  std::frexp(x, &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  const int quantum = std::max(exponent - 1, min_exponent) - (digits - 1);
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
  // Round-to-nearest overflows at max_finite + half an ulp of it.
  const double limit = max_finite + std::ldexp(1.0, std::ilogb(max_finite) - digits);
  if (std::fabs(x) >= limit) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return rounded;
}
/// x rounded to IEEE binary16.
inline double round_fp16(double x) { return round_binary(x, 11, -14, 65504.0); }
/// x rounded to bfloat16.
inline double round_bf16(double x) { return round_binary(x, 8, -126, 0x1.FEp127); }

/// One head's inputs. bias is empty or L·S values; scale is used when !scale_defaulted.
struct Head {
  std::size_t L = 0, S = 0, E = 0, Ev = 0;
  std::vector<double> Q, K, V, bias;
  double scale = 1;
  bool scale_defaulted = true;
  [[nodiscard]] double bias_at(std::size_t i, std::size_t j) const { return bias.empty() ? 0.0 : bias[i * S + j]; }
};

/// Where the multiplier goes: on the scores, on Q before QKᵀ, or folded with log2(e) into exp2.
enum class Scaling { scores, query_first, folded_exp2 };

/// A kernel's choices (first group: freedoms a correct kernel takes; second: bugs).
struct KernelChoices {
  std::size_t tile = 0;  ///< keys per online-softmax tile, from position 0; 0: the whole row in one tile
  Scaling scaling = Scaling::scores;
  bool normalize_first = false;           ///< divide P by the sum before P·V (one tile only)
  bool reciprocal = false;                ///< normalize by acc·fl(1/sum), FlashAttention 2's epilogue (two roundings)
  double (*round_p)(double) = nullptr;    ///< P rounded before P·V (the sum keeps unrounded P)
  double (*round_out)(double) = nullptr;  ///< the output rounded at the end
  /// 0: the sum by tile sums, P·V straight into the accumulator; c: both in chunks of c positions
  /// summed apart, then joined (1: every term straight in; tile: tile sums).
  std::size_t chunk = 0;
  bool reverse = false;     ///< tiles last to first and keys last to first inside a chunk (FlashAttention 2's order)
  std::size_t splits = 1;   ///< contiguous key partitions of ⌈S/splits⌉ positions merged by their LSE
  bool exp_in_fp16 = false;               ///< bug: exp's argument and result rounded to fp16
  bool sum_not_rescaled = false;          ///< bug: the running sum is not multiplied by α
  bool accumulate_in_fp16 = false;        ///< bug: the accumulator rounded to fp16 after each update
  double (*round_alpha)(double) = nullptr;  ///< bug: the rescale factor rounded (to bf16, say)
  double (*round_query)(double) = nullptr;  ///< Q and K each scaled by √scale and rounded (PyTorch's math path)
  double (*round_scores)(double) = nullptr; ///< the scores rounded after Q·Kᵀ (after the scale) and after the bias add
  double (*convert_query)(double) = nullptr;  ///< Q converted, unscaled, before Q·Kᵀ (ggml: to its fp16 cache's format)
  bool lse_in_log2 = false;       ///< bug: the LSE returned in the exps' log2 units, not converted (folded)
  bool lse_max_unscaled = false;  ///< bug: the LSE's maximum taken from the unscaled q·k (folded, no bias)
};

/// Output [L, Ev] of the kernel described by `choices`, computed in T (float or double); with `lse`,
/// also each row's log-sum-exp as the kernel forms it (its maximum plus the log of its sum, in the
/// exps' units; log2 units converted to natural by a multiplication by ln 2 in T), -inf for a row
/// without keys.
template <class T>
std::vector<double> attention_kernel(const Head& h, const KernelChoices& choices, std::vector<double>* lse_out = nullptr) {
  const T inf = std::numeric_limits<T>::infinity();
  const T log2e = static_cast<T>(1.4426950408889634);
  const T scale = h.scale_defaulted ? T(1) / std::sqrt(static_cast<T>(h.E)) : static_cast<T>(h.scale);
  const bool folded = choices.scaling == Scaling::folded_exp2;
  const T factor = folded ? scale * log2e : scale;
  const std::size_t tile = choices.tile == 0 ? std::max<std::size_t>(h.S, 1) : choices.tile;
  auto expo = [&](T x) -> T {
    if (choices.exp_in_fp16) return static_cast<T>(round_fp16(std::exp(static_cast<T>(round_fp16(x)))));
    return folded ? std::exp2(x) : std::exp(x);
  };
  const auto accumulate = [&](T a) { return choices.accumulate_in_fp16 ? static_cast<T>(round_fp16(a)) : a; };
  std::vector<double> out(h.L * h.Ev, 0.0);
  std::vector<T> score(h.S), p(h.S), acc(h.Ev), part(h.Ev);
  // One partition [begin, end): its running max m (in the scores' units), sum and accumulator.
  struct Partial {
    T m, sum;
    std::vector<T> acc;
  };
  const bool raw = folded && h.bias.empty();
  const auto run = [&](std::size_t begin, std::size_t end) {
    T m = -inf, sum = 0;
    std::fill(acc.begin(), acc.end(), T(0));
    const std::size_t first_tile = begin / tile, tiles = end == begin ? 0 : (end - 1) / tile - first_tile + 1;
    for (std::size_t n = 0; n < tiles; ++n) {
      const std::size_t index = choices.reverse ? first_tile + tiles - 1 - n : first_tile + n;
      const std::size_t start = std::max(begin, index * tile), stop = std::min(end, (index + 1) * tile);
      T m_new = m;
      for (std::size_t j = start; j < stop; ++j) m_new = std::max(m_new, score[j]);
      if (m_new == -inf) continue;  // every key so far masked
      // Rescale: FlashAttention forms (m_old - m_new)·factor; an empty history has α = 0.
      T alpha = m == -inf ? T(0) : expo(raw ? (m - m_new) * factor : m - m_new);
      if (choices.round_alpha) alpha = static_cast<T>(choices.round_alpha(alpha));
      const T shift = raw ? m_new * factor : m_new;  // FMA residual form when raw
      for (std::size_t j = start; j < stop; ++j)
        p[j] = score[j] == -inf ? T(0) : expo(raw ? std::fma(score[j], factor, -shift) : score[j] - m_new);
      const auto weight = [&](std::size_t j) {
        const T pj = choices.round_p ? static_cast<T>(choices.round_p(p[j])) : p[j];
        return choices.normalize_first ? pj / sum : pj;  // one tile: sum is complete when used
      };
      if (choices.chunk == 0) {
        T tile_sum = 0;
        for (std::size_t j = start; j < stop; ++j) tile_sum += p[j];
        sum = choices.sum_not_rescaled ? sum + tile_sum : alpha * sum + tile_sum;
        for (std::size_t c = 0; c < h.Ev; ++c) {
          T a = accumulate(alpha * acc[c]);
          for (std::size_t j = start; j < stop; ++j) a = accumulate(a + weight(j) * static_cast<T>(h.V[j * h.Ev + c]));
          acc[c] = a;
        }
      } else {
        if (!choices.sum_not_rescaled) sum = alpha * sum;
        for (std::size_t c = 0; c < h.Ev; ++c) acc[c] = accumulate(alpha * acc[c]);
        const std::size_t width = stop - start, chunks = (width + choices.chunk - 1) / choices.chunk;
        for (std::size_t q = 0; q < chunks; ++q) {
          const std::size_t from = start + q * choices.chunk, to = std::min(stop, from + choices.chunk);
          T part_sum = 0;
          std::fill(part.begin(), part.end(), T(0));
          for (std::size_t r = 0; r < to - from; ++r) {
            const std::size_t j = choices.reverse ? to - 1 - r : from + r;
            part_sum += p[j];
            for (std::size_t c = 0; c < h.Ev; ++c) part[c] += weight(j) * static_cast<T>(h.V[j * h.Ev + c]);
          }
          sum += part_sum;
          for (std::size_t c = 0; c < h.Ev; ++c) acc[c] = accumulate(acc[c] + part[c]);
        }
      }
      m = m_new;
    }
    return Partial{m, sum, acc};
  };
  for (std::size_t i = 0; i < h.L; ++i) {
    // Scores in the kernel's units: natural (scores, query_first) or raw q·k (folded, no bias), or
    // log2 units (folded with a bias). -inf for a masked key.
    for (std::size_t j = 0; j < h.S; ++j) {
      T dot = 0;
      for (std::size_t c = 0; c < h.E; ++c) {
        const T q = static_cast<T>(choices.convert_query ? choices.convert_query(h.Q[i * h.E + c]) : h.Q[i * h.E + c]);
        T qs = choices.scaling == Scaling::query_first ? q * scale : q;
        T ks = static_cast<T>(h.K[j * h.E + c]);
        if (choices.round_query) {  // PyTorch 1.13: q·E^-1/4 and k·E^-1/4, each rounded to storage
          const T root = std::sqrt(scale);
          qs = static_cast<T>(choices.round_query(q * root)), ks = static_cast<T>(choices.round_query(ks * root));
        }
        dot += qs * ks;
      }
      const T b = static_cast<T>(h.bias_at(i, j));
      const auto stored = [&](T x) { return choices.round_scores ? static_cast<T>(choices.round_scores(x)) : x; };
      if (choices.round_scores) {  // PyTorch's math path: the matmul's output, then the mask's add, in storage
        // Scaled in compute (query_first) or, as Hugging Face's eager attention, the product rounded,
        // scaled and rounded again: three roundings with the mask's add.
        const T product = choices.scaling == Scaling::query_first ? dot : stored(stored(dot) * scale);
        score[j] = b == -inf ? -inf : stored(stored(product) + b);
      } else if (choices.scaling == Scaling::query_first)
        score[j] = dot + b;
      else if (raw)
        score[j] = dot;
      else if (folded)
        score[j] = dot * factor + b * log2e;
      else
        score[j] = dot * scale + b;
    }
    std::vector<T> y(h.Ev, T(0));
    T row_lse = -inf;  // in the exps' units
    if (choices.splits <= 1) {
      const Partial all = run(0, h.S);
      for (std::size_t c = 0; c < h.Ev; ++c)
        y[c] = all.m == -inf             ? T(0)
               : choices.normalize_first ? all.acc[c]
               : choices.reciprocal      ? all.acc[c] * (T(1) / all.sum)
                                         : all.acc[c] / all.sum;
      const T m = raw && !choices.lse_max_unscaled ? all.m * factor : all.m;
      if (all.m != -inf) row_lse = m + (folded ? std::log2(all.sum) : std::log(all.sum));
    } else {
      // Flash-decoding: each partition's normalized output and LSE (in the exps' units: log2 when
      // folded), then lse = M + log Σ exp(lse_p - M) and y = Σ exp(lse_p - lse) o_p.
      const std::size_t width = (h.S + choices.splits - 1) / choices.splits;
      std::vector<Partial> parts;
      std::vector<T> lse;
      for (std::size_t begin = 0; begin < h.S; begin += width) {
        Partial part_ = run(begin, std::min(h.S, begin + width));
        if (part_.m == -inf) continue;  // a partition with no key takes no part
        const T m = raw ? part_.m * factor : part_.m;
        lse.push_back(m + (folded ? std::log2(part_.sum) : std::log(part_.sum)));
        parts.push_back(std::move(part_));
      }
      if (!parts.empty()) {
        const T M = *std::max_element(lse.begin(), lse.end());
        T total = 0;
        for (T l : lse) total += expo(l - M);
        const T all = M + (folded ? std::log2(total) : std::log(total));
        row_lse = all;
        for (std::size_t n = 0; n < parts.size(); ++n) {
          const T weight = expo(lse[n] - all);
          for (std::size_t c = 0; c < h.Ev; ++c) y[c] += weight * (parts[n].acc[c] / parts[n].sum);
        }
      }
    }
    for (std::size_t c = 0; c < h.Ev; ++c)
      out[i * h.Ev + c] = choices.round_out ? choices.round_out(y[c]) : static_cast<double>(y[c]);
    const bool convert = folded && !choices.lse_in_log2;
    if (lse_out) lse_out->push_back(static_cast<double>(convert ? row_lse * static_cast<T>(0.69314718055994531) : row_lse));
  }
  return out;
}

/// The exact row i (in __float128: products of doubles are exact, sums and exp err by ~2^-112
/// relative, far below any band) and its RowTerms rounded outwards by 2^-50 relative.
struct ExactRow {
  std::vector<__float128> y;  ///< the exact output, to about 2^-100 relative to max|v|
  __float128 lse = -std::numeric_limits<double>::infinity();  ///< log Σ_j e^{s_j}, natural; -inf without keys
  verify::RowTerms terms;
};

/// The exact output of row i and the terms of its band.
inline ExactRow exact_row(const Head& h, std::size_t i) {
  using Q128 = __float128;
  const double up = 1 + 0x1p-50, down = 1 - 0x1p-50;
  const Q128 sigma = h.scale_defaulted ? 1 / sqrtq(static_cast<Q128>(h.E)) : static_cast<Q128>(h.scale);
  std::vector<std::size_t> keys;
  std::vector<Q128> s;
  ExactRow row;
  verify::RowTerms& t = row.terms;
  for (std::size_t j = 0; j < h.S; ++j) {
    const double b = h.bias_at(i, j);
    if (b == -std::numeric_limits<double>::infinity()) continue;
    Q128 dot = 0, abs_dot = 0;
    for (std::size_t c = 0; c < h.E; ++c) {
      const Q128 product = static_cast<Q128>(h.Q[i * h.E + c]) * h.K[j * h.E + c];
      dot += product;
      abs_dot += fabsq(product);
    }
    keys.push_back(j);
    s.push_back(sigma * dot + b);
    t.abs_dot.push_back(static_cast<double>(abs_dot) * up);
    double key_sum = 0;
    for (std::size_t c = 0; c < h.E; ++c) key_sum += std::fabs(h.K[j * h.E + c]);
    t.abs_key.push_back(key_sum * up);
    Q128 squares = 0;
    for (std::size_t c = 0; c < h.E; ++c) {
      const Q128 product = static_cast<Q128>(h.Q[i * h.E + c]) * h.K[j * h.E + c];
      squares += product * product;
    }
    t.l2_dot.push_back(static_cast<double>(sqrtq(squares)) * up + 0x1p-1000);
    t.dot_lo.push_back(static_cast<double>(dot) * (dot > 0 ? down : up) - 0x1p-1000);
    t.dot_hi.push_back(static_cast<double>(dot) * (dot > 0 ? up : down) + 0x1p-1000);
    t.abs_bias.push_back(std::fabs(b));
  }
  t.keys = keys.size();
  t.position = keys;
  for (std::size_t c = 0; c < h.E; ++c) t.abs_query += std::fabs(h.Q[i * h.E + c]) * up;
  t.E = h.E;
  t.scale = static_cast<double>(sigma) * up;
  t.scale_defaulted = h.scale_defaulted;
  row.y.assign(h.Ev, 0);
  t.abs_v_max.assign(h.Ev, 0.0);
  t.abs_y.assign(h.Ev, 0.0);
  t.v.assign(keys.size() * h.Ev, 0.0);
  t.y_lo.assign(h.Ev, 0.0);
  t.y_hi.assign(h.Ev, 0.0);
  if (keys.empty()) return row;
  const Q128 top = *std::max_element(s.begin(), s.end());
  Q128 total = 0;
  std::vector<Q128> w(keys.size());
  for (std::size_t t_ = 0; t_ < keys.size(); ++t_) total += (w[t_] = expq(s[t_] - top));
  row.lse = top + logq(total);
  for (std::size_t t_ = 0; t_ < keys.size(); ++t_) {
    w[t_] /= total;
    t.gap.push_back(std::max(0.0, static_cast<double>(top - s[t_]) * down));
    t.gap_hi.push_back(static_cast<double>(top - s[t_]) * up + 0x1p-1000);
    t.weight.push_back(static_cast<double>(w[t_]) * up + 0x1p-1074);
    t.weight_lo.push_back(static_cast<double>(w[t_]) * down);
  }
  for (std::size_t c = 0; c < h.Ev; ++c) {
    for (std::size_t key : keys) t.abs_v_max[c] = std::max(t.abs_v_max[c], std::fabs(h.V[key * h.Ev + c]));
    const double slack = 0x1p-100 * t.abs_v_max[c];  // the error of y in __float128, generously
    Q128 y = 0;
    for (std::size_t t_ = 0; t_ < keys.size(); ++t_) y += w[t_] * h.V[keys[t_] * h.Ev + c];
    row.y[c] = y;
    for (std::size_t t_ = 0; t_ < keys.size(); ++t_) t.v[t_ * h.Ev + c] = h.V[keys[t_] * h.Ev + c];
    t.abs_y[c] = static_cast<double>(fabsq(y)) * up + slack;
    t.y_lo[c] = static_cast<double>(y) - static_cast<double>(fabsq(y)) * 0x1p-50 - slack;
    t.y_hi[c] = static_cast<double>(y) + static_cast<double>(fabsq(y)) * 0x1p-50 + slack;
  }
  return row;
}

// ---------------------------------------------------------------------------------------------
// The production kernel on a TensorProblem.

/// Tiling, threading and instruction set of a flash_attention run.
struct FlashRun {
  std::size_t query_tile = 128, key_tile = 64;
  unsigned threads = 1;
  SimdLevel simd = SimdLevel::automatic;
};

/// p's mask laid out as flash_attention takes it: [L, S] when it is the same for every batch item
/// and head, [B, L, S] when it is the same for every head, else [B, Hq, L, S] (each broadcast
/// dimension of size 1 expanded, NumPy's right-aligned rule).
inline std::vector<double> flash_mask_values(const verify::TensorProblem& p) {
  const std::size_t rank = p.mask_shape.size();
  std::size_t dims[4] = {1, 1, 1, 1};
  for (std::size_t k = 0; k < rank; ++k) dims[4 - rank + k] = p.mask_shape[k];
  const std::size_t items = dims[0] == 1 && dims[1] == 1 ? 1 : p.batch, heads = dims[1] == 1 ? 1 : p.q_heads;
  std::vector<double> out;
  for (std::size_t b = 0; b < items; ++b)
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < p.L; ++i)
        for (std::size_t j = 0; j < p.S; ++j) {
          const std::size_t index[4] = {b, h, i, j};
          std::size_t offset = 0;
          for (std::size_t k = 0; k < 4; ++k) offset = offset * dims[k] + (dims[k] == 1 ? 0 : index[k]);
          out.push_back(p.mask[offset]);
        }
  return out;
}

/// attn::flash_attention in T (float for fp32 problems, double for fp64) on a valid problem: the
/// output [B, Hq, L, Ev] in p.layout, as doubles. The defaulted scale 1/√E is computed in T (two
/// correctly rounded operations, as the band's defaulted scale assumes); a given scale is passed
/// as the double it is and converted once by the kernel. `status` receives the kernel's status.
template <class T>
std::vector<double> run_flash(const verify::TensorProblem& p, const FlashRun& run, KernelStatus* status = nullptr) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const auto convert = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
  const std::vector<T> Q = convert(p.query), K = convert(p.key), V = convert(p.value);
  const FlashShape shape{p.batch, p.q_heads, p.kv_heads, p.L, p.S, p.E, p.Ev};
  FlashOptions options;
  options.layout =
      p.layout == verify::AxisOrder::batch_head_seq ? TensorLayout::batch_head_seq : TensorLayout::batch_seq_head;
  options.causal = p.causal == verify::Causal::top_left       ? CausalAlignment::top_left
                   : p.causal == verify::Causal::bottom_right ? CausalAlignment::bottom_right
                                                              : CausalAlignment::none;
  options.key_lengths = p.key_lengths;
  options.window_left = p.window_left, options.window_right = p.window_right;
  options.alibi_slopes = p.alibi_slopes;
  options.softcap = p.softcap;
  options.sinks = p.sinks;
  options.scale = p.scale ? *p.scale : static_cast<double>(T(1) / std::sqrt(static_cast<T>(p.E)));
  options.query_tile = run.query_tile, options.key_tile = run.key_tile;
  options.threads = run.threads, options.simd = run.simd;
  std::vector<std::uint8_t> bits;
  std::vector<T> bias;
  if (p.mask_kind != verify::TensorMask::none) {
    const std::vector<double> mask = flash_mask_values(p);
    if (p.mask_kind == verify::TensorMask::boolean) {
      for (double x : mask) bits.push_back(x != 0);
      options.mask_bits = bits;
    } else {
      bias = convert(mask);
    }
  }
  std::vector<T> out(p.batch * p.q_heads * p.L * p.Ev, T(-7));
  const KernelStatus s = flash_attention(shape, std::span<const T>(Q), K, V, out, options, bias);
  if (status != nullptr) *status = s;
  return std::vector<double>(out.begin(), out.end());
}

}  // namespace attn::testing_support
