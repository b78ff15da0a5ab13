// The mutant zoo of tensor certification: correct attention kernels (fp32 three-step, fp32 tiled
// online softmax, fp64 three-step, and the production attn::flash_attention in fp32 and fp64) on
// TensorProblems with PyTorch's full semantics and FlashAttention's sliding windows, ALiBi and
// softcap pass
// certify_tensor under their profile; kernels with one bug each are caught on at least one problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <numbers>
#include <vector>

#include "flash_attention.hpp"
#include "tensor/tensor.hpp"
#include "tensor/tensor_band.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor_kernels.hpp"

namespace attn::verify {
namespace {

// ---------------------------------------------------------------------------------------------
// Kernels: one parameterised implementation, correct with every flag off.

struct Kernel {
  std::string name;
  std::size_t tile = 0;             ///< 0: three-step (scores, max, exp, sum, divide, P·V); else online softmax
  bool exp_in_fp16 = false;         ///< bug: exp's argument and result rounded to fp16
  bool sum_not_rescaled = false;    ///< bug: the running sum is not multiplied by α (tiled)
  bool top_left_always = false;     ///< bug: causal rule j <= i whatever alignment was asked
  bool gqa_interleaved = false;     ///< bug: kv head = h mod Hkv
  bool scale_divides = false;       ///< bug: scores divided by the scale
  bool masked_row_nan = false;      ///< bug: a row without keys computes 0/0 (tiled)
  bool p_in_bf16 = false;           ///< bug: P rounded to bf16 before P·V
  bool accumulate_in_fp16 = false;  ///< bug: P·V sum rounded to fp16 after each add
  bool window_left_wide = false;    ///< bug: the window's left end one key too far (j >= c - left - 1)
  bool window_right_wide = false;   ///< bug: the window's right end one key too far (j <= c + right + 1)
  bool window_top_left = false;     ///< bug: the window centred on i, not i + S - L (FlashAttention #1133's kind)
  bool window_ignored = false;      ///< bug: no window at all
  bool window_bug() const { return window_left_wide || window_right_wide || window_top_left || window_ignored; }
  bool alibi_plus = false;          ///< bug: ALiBi's bias +slope·|d| (the sign lost)
  bool alibi_heads_reversed = false;  ///< bug: head h takes slope Hq - 1 - h
  bool alibi_top_left = false;      ///< bug: ALiBi's distance |i - j|, not |i + S - L - j|
  bool alibi_in_bf16 = false;       ///< bug: ALiBi's bias rounded to bf16 (a half-precision bias buffer)
  bool softcap_s_tanh_s = false;    ///< bug: softcap as s·tanh(s) (FlashAttention #2396)
  bool softcap_after_bias = false;  ///< bug: c·tanh((s + b)/c), the bias capped too
  bool softcap_ignored = false;     ///< bug: no softcap
  bool sink_left_out = false;       ///< bug: the sink not in the denominator
  bool sink_heads_reversed = false; ///< bug: head h takes sink Hq - 1 - h
  bool lse_without_sink = false;    ///< bug: the LSE taken before the sink joins the sum
  bool lse_keyless_minus_inf = false;  ///< bug: a row without keys returns LSE -inf though its sink is there
  bool lse_base2 = false;              ///< the LSE in log2 units: m·log2 e + log2 ℓ (FlashAttention's exp2 form)
};

// The bias the kernel adds to a scaled score: the problem's (additive mask or ALiBi), or ALiBi's as
// a buggy kernel forms it.
double kernel_bias(const TensorProblem& p, const Kernel& k, std::size_t b, std::size_t h, std::size_t i,
                   std::size_t j) {
  if (p.alibi_slopes.empty() || !(k.alibi_plus || k.alibi_heads_reversed || k.alibi_top_left || k.alibi_in_bf16))
    return additive_bias(p, b, h, i, j);
  if (k.alibi_in_bf16) return round_to(DType::bf16, additive_bias(p, b, h, i, j));
  const std::size_t head = k.alibi_heads_reversed ? p.q_heads - 1 - h : h;
  const double slope = p.alibi_slopes[p.alibi_slopes.size() == p.q_heads ? head : b * p.q_heads + head];
  const double centre = static_cast<double>(i) + (k.alibi_top_left ? 0.0 : static_cast<double>(p.S) -
                                                                             static_cast<double>(p.L));
  return (k.alibi_plus ? 1 : -1) * slope * std::fabs(centre - static_cast<double>(j));
}

// Does key j take part in row (b, h, i), as the kernel decides it. `windowless` is p without its
// window (the window bugs decide the window themselves, then ask the other rules).
bool kernel_takes_part(const TensorProblem& p, const TensorProblem& windowless, const Kernel& k, std::size_t b,
                       std::size_t h, std::size_t i, std::size_t j) {
  if (k.window_bug() && has_window(p)) {
    const std::int64_t left = p.window_left + (k.window_left_wide && p.window_left >= 0 ? 1 : 0);
    const std::int64_t right = p.window_right + (k.window_right_wide && p.window_right >= 0 ? 1 : 0);
    const std::int64_t centre = static_cast<std::int64_t>(i) + (k.window_top_left ? 0 : static_cast<std::int64_t>(p.S) -
                                                                                       static_cast<std::int64_t>(p.L));
    const std::int64_t key = static_cast<std::int64_t>(j);
    if (!k.window_ignored && ((left >= 0 && key < centre - left) || (right >= 0 && key > centre + right))) return false;
    return takes_part(windowless, b, h, i, j);
  }
  if (k.top_left_always && p.causal == Causal::bottom_right) {
    if (j > i) return false;
    TensorProblem without = p;  // the other rules unchanged
    without.causal = Causal::none;
    return takes_part(without, b, h, i, j);
  }
  return takes_part(p, b, h, i, j);
}

// The output, and with `lse` the natural log-sum-exp per row in fp32 (FlashAttention's softmax_lse;
// -inf for a row without keys or sink; with a sink and no key, z: the three-step's maximum is z, the
// tiled kernel resets its maximum to 0; with `base2`, the LSE in log2 units, its maximum z·log2 e
// rounded as FlashAttention 4 keeps it).
template <class T>
std::vector<double> run_kernel(const TensorProblem& p, const Kernel& k, std::vector<double>* lse = nullptr) {
  const T inf = std::numeric_limits<T>::infinity();
  const T log2e = std::numbers::log2e_v<T>;
  const T scale = p.scale ? static_cast<T>(*p.scale) : T(1) / std::sqrt(static_cast<T>(p.E));
  const std::size_t group = p.q_heads / p.kv_heads;
  const auto expo = [&](T x) -> T {
    if (k.exp_in_fp16) return static_cast<T>(round_to(DType::fp16, std::exp(static_cast<T>(round_to(DType::fp16, x)))));
    return std::exp(x);
  };
  const auto round_p = [&](T x) -> T { return k.p_in_bf16 ? static_cast<T>(round_to(DType::bf16, x)) : x; };
  const auto round_acc = [&](T x) -> T { return k.accumulate_in_fp16 ? static_cast<T>(round_to(DType::fp16, x)) : x; };
  std::vector<double> out(p.batch * p.q_heads * p.L * p.Ev, 0.0);
  if (lse != nullptr) lse->assign(p.batch * p.q_heads * p.L, -HUGE_VAL);
  const auto store_lse = [&](std::size_t b, std::size_t h, std::size_t i, T value) {
    if (lse != nullptr) (*lse)[(b * p.q_heads + h) * p.L + i] = round_to(DType::fp32, static_cast<double>(value));
  };
  std::vector<T> score(p.S), weight(p.S), acc(p.Ev);
  std::vector<bool> part(p.S);
  TensorProblem windowless = p;
  windowless.window_left = windowless.window_right = -1;
  for (std::size_t b = 0; b < p.batch; ++b) {
    for (std::size_t h = 0; h < p.q_heads; ++h) {
      const std::size_t kvh = k.gqa_interleaved ? h % p.kv_heads : h / group;
      for (std::size_t i = 0; i < p.L; ++i) {
        for (std::size_t j = 0; j < p.S; ++j) {
          part[j] = kernel_takes_part(p, windowless, k, b, h, i, j);
          if (!part[j]) {
            score[j] = -inf;
            continue;
          }
          T dot = 0;
          for (std::size_t c = 0; c < p.E; ++c) {
            dot += static_cast<T>(p.query[tensor_index(p, p.q_heads, p.L, p.E, b, h, i, c)]) *
                   static_cast<T>(p.key[tensor_index(p, p.kv_heads, p.S, p.E, b, kvh, j, c)]);
          }
          T scaled = k.scale_divides ? dot / scale : dot * scale;
          const T bias = static_cast<T>(kernel_bias(p, k, b, h, i, j));
          const T c = static_cast<T>(p.softcap);
          if (p.softcap > 0 && !k.softcap_ignored) {
            if (k.softcap_after_bias) scaled += bias;
            scaled = k.softcap_s_tanh_s ? scaled * std::tanh(scaled) : c * std::tanh(scaled / c);
          }
          score[j] = k.softcap_after_bias && p.softcap > 0 && !k.softcap_ignored ? scaled : scaled + bias;
        }
        const auto value = [&](std::size_t j, std::size_t c) {
          return static_cast<T>(p.value[tensor_index(p, p.kv_heads, p.S, p.Ev, b, kvh, j, c)]);
        };
        std::fill(acc.begin(), acc.end(), T(0));
        T sum = 0;
        // The sink's logit (gpt-oss: a column of the softmax; FlashAttention 4: added to the sum at the end).
        const bool sink = has_sinks(p) && !k.sink_left_out;
        const T z = sink ? static_cast<T>(sink_of(p, k.sink_heads_reversed ? p.q_heads - 1 - h : h)) : -inf;
        if (k.tile == 0) {
          // Three steps: max (with the sink), exp and sum, divide, then P·V.
          T m = z;
          for (std::size_t j = 0; j < p.S; ++j) m = std::max(m, score[j]);
          if (m != -inf) {
            T key_sum = 0;  // the keys' part of the sum, for the LSE
            if (sink) sum += expo(z - m);
            for (std::size_t j = 0; j < p.S; ++j) {
              weight[j] = part[j] ? expo(score[j] - m) : T(0);
              sum += weight[j];
              key_sum += weight[j];
            }
            const bool keyless = key_sum == 0 && m == z;
            const T total = k.lse_without_sink && !keyless ? key_sum : key_sum + (sink ? expo(z - m) : T(0));
            if (k.lse_keyless_minus_inf && keyless) store_lse(b, h, i, -inf);
            else store_lse(b, h, i, k.lse_base2 ? m * log2e + std::log2(total) : m + std::log(total));
            for (std::size_t j = 0; j < p.S; ++j) weight[j] = round_p(weight[j] / sum);
            for (std::size_t c = 0; c < p.Ev; ++c) {
              T a = 0;
              for (std::size_t j = 0; j < p.S; ++j) {
                if (part[j]) a = round_acc(a + weight[j] * value(j, c));
              }
              acc[c] = a;
            }
          }
          for (std::size_t c = 0; c < p.Ev; ++c) {
            out[tensor_index(p, p.q_heads, p.L, p.Ev, b, h, i, c)] = round_to(p.dtype, static_cast<double>(acc[c]));
          }
          continue;
        }
        // Online softmax over tiles of keys, rescaling when the running max grows.
        T m = -inf;
        for (std::size_t start = 0; start < p.S; start += k.tile) {
          const std::size_t end = std::min(p.S, start + k.tile);
          T m_new = m;
          for (std::size_t j = start; j < end; ++j) m_new = std::max(m_new, score[j]);
          if (m_new == -inf) continue;  // every key so far masked
          const T alpha = m == -inf ? T(0) : expo(m - m_new);
          T tile_sum = 0;
          for (std::size_t j = start; j < end; ++j) {
            weight[j] = part[j] ? expo(score[j] - m_new) : T(0);
            tile_sum += weight[j];
          }
          sum = k.sum_not_rescaled ? sum + tile_sum : alpha * sum + tile_sum;
          for (std::size_t c = 0; c < p.Ev; ++c) {
            T a = alpha * acc[c];
            for (std::size_t j = start; j < end; ++j) {
              if (part[j]) a = round_acc(a + round_p(weight[j]) * value(j, c));
            }
            acc[c] = a;
          }
          m = m_new;
        }
        const T key_sum = sum;
        if (sink && m != -inf) sum += expo(z - m);  // after the keys, with their maximum
        if (m != -inf) {
          const T total = k.lse_without_sink ? key_sum : sum;
          store_lse(b, h, i, k.lse_base2 ? m * log2e + std::log2(total) : m + std::log(total));
        } else if (sink && !k.lse_keyless_minus_inf) {
          // The maximum reset to 0 (natural), or set to z·log2 e (log2 units).
          store_lse(b, h, i, k.lse_base2 ? z * log2e : T(0) + std::log(expo(z - T(0))));
        }
        for (std::size_t c = 0; c < p.Ev; ++c) {
          const T y = (m == -inf && !k.masked_row_nan) ? T(0) : acc[c] / sum;
          out[tensor_index(p, p.q_heads, p.L, p.Ev, b, h, i, c)] = round_to(p.dtype, static_cast<double>(y));
        }
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Problems.

struct Spec {
  std::string name;
  std::uint64_t seed = 0;
  std::size_t batch = 1, q_heads = 1, kv_heads = 1, L = 1, S = 1, E = 1, Ev = 1;
  AxisOrder layout = AxisOrder::batch_head_seq;
  Causal causal = Causal::none;
  TensorMask mask_kind = TensorMask::none;
  bool mask_full = false;  ///< mask [B, Hq, L, S] instead of [L, S]
  std::vector<std::size_t> key_lengths;
  std::optional<double> scale;
  bool increasing_scores = false;  ///< positive queries, keys growing with j: the max grows per tile
  std::int64_t window_left = -1, window_right = -1;
  bool alibi = false;             ///< ALiBi slopes 0.7^(h+1) in fp32 (not dyadic: biases need every bit)
  bool alibi_per_batch = false;   ///< [B, Hq] slopes, item b's 0.7^(h+1+b)
  double softcap = 0;             ///< c of c·tanh(s/c); 0 off
  double spread = 1;              ///< scales the query (softcap bites on large scores)
  bool sinks = false;             ///< sinks z_h = 1.5 - 0.75 h (fp32-exact)
};

std::string describe(const Spec& s, DType dtype) {
  return s.name + " (" + std::string(dtype_name(dtype)) + ", seed " + std::to_string(s.seed) + ")";
}

TensorProblem make_problem(const Spec& s, DType dtype) {
  TensorProblem p;
  p.batch = s.batch, p.q_heads = s.q_heads, p.kv_heads = s.kv_heads;
  p.L = s.L, p.S = s.S, p.E = s.E, p.Ev = s.Ev, p.dtype = dtype, p.layout = s.layout;
  p.causal = s.causal, p.key_lengths = s.key_lengths, p.scale = s.scale;
  p.window_left = s.window_left, p.window_right = s.window_right;
  p.softcap = s.softcap;
  for (std::size_t h = 0; s.sinks && h < s.q_heads; ++h) p.sinks.push_back(1.5 - 0.75 * static_cast<double>(h));
  if (s.alibi) {
    for (std::size_t b = 0; b < (s.alibi_per_batch ? s.batch : 1); ++b)
      for (std::size_t h = 0; h < s.q_heads; ++h)
        p.alibi_slopes.push_back(round_to(DType::fp32, std::pow(0.7, static_cast<double>(h + 1 + b))));
  }
  std::mt19937_64 random(s.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto draw = [&](double x) { return round_to(dtype, x); };
  p.query.resize(s.batch * s.q_heads * s.L * s.E);
  p.key.resize(s.batch * s.kv_heads * s.S * s.E);
  p.value.resize(s.batch * s.kv_heads * s.S * s.Ev);
  for (std::size_t b = 0; b < s.batch; ++b) {
    for (std::size_t h = 0; h < s.q_heads; ++h) {
      for (std::size_t i = 0; i < s.L; ++i) {
        for (std::size_t c = 0; c < s.E; ++c) {
          const double x = normal(random);
          p.query[tensor_index(p, s.q_heads, s.L, s.E, b, h, i, c)] =
              draw(s.increasing_scores ? 1 + 0.1 * x : s.spread * x);
        }
      }
    }
    for (std::size_t h = 0; h < s.kv_heads; ++h) {
      for (std::size_t j = 0; j < s.S; ++j) {
        for (std::size_t c = 0; c < s.E; ++c) {
          const double x = normal(random);
          p.key[tensor_index(p, s.kv_heads, s.S, s.E, b, h, j, c)] =
              draw(s.increasing_scores ? 0.2 * static_cast<double>(j) + 0.1 * x : x);
        }
        for (std::size_t c = 0; c < s.Ev; ++c)
          p.value[tensor_index(p, s.kv_heads, s.S, s.Ev, b, h, j, c)] = draw(normal(random));
      }
    }
  }
  p.mask_kind = s.mask_kind;
  if (s.mask_kind != TensorMask::none) {
    p.mask_shape =
        s.mask_full ? std::vector<std::size_t>{s.batch, s.q_heads, s.L, s.S} : std::vector<std::size_t>{s.L, s.S};
    const std::size_t rows = s.mask_full ? s.batch * s.q_heads * s.L : s.L;
    p.mask.resize(rows * s.S);
    std::uniform_int_distribution<int> die(0, 99);
    for (std::size_t r = 0; r < rows; ++r) {
      const bool row_masked = r % 7 == 3;  // a few rows where no key takes part
      for (std::size_t j = 0; j < s.S; ++j) {
        const bool in = !row_masked && die(random) >= 30;
        double& m = p.mask[r * s.S + j];
        if (s.mask_kind == TensorMask::boolean)
          m = in ? 1 : 0;
        else
          m = in ? draw(static_cast<double>(die(random) - 50) / 16) : -std::numeric_limits<double>::infinity();
      }
    }
  }
  return p;
}

// A spec with its name, seed and sizes; the rest is set by the caller.
Spec sized(std::string name, std::uint64_t seed, std::size_t batch, std::size_t q_heads, std::size_t kv_heads,
           std::size_t L, std::size_t S, std::size_t E, std::size_t Ev) {
  Spec s;
  s.name = std::move(name), s.seed = seed;
  s.batch = batch, s.q_heads = q_heads, s.kv_heads = kv_heads, s.L = L, s.S = S, s.E = E, s.Ev = Ev;
  return s;
}

std::vector<Spec> specs() {
  std::vector<Spec> v;
  v.push_back(sized("plain", 101, 2, 2, 2, 13, 29, 8, 5));
  {
    Spec s = sized("boolean [L,S], GQA, [B,L,H,E]", 202, 2, 4, 2, 20, 20, 16, 8);
    s.layout = AxisOrder::batch_seq_head, s.mask_kind = TensorMask::boolean, s.scale = 0.375;
    v.push_back(s);
  }
  {
    Spec s = sized("additive [B,H,L,S], bottom-right L < S, key lengths, GQA", 303, 2, 4, 2, 24, 37, 16, 16);
    s.mask_kind = TensorMask::additive, s.mask_full = true, s.causal = Causal::bottom_right;
    s.key_lengths = {37, 30};
    v.push_back(s);
  }
  {
    Spec s = sized("top-left L > S, key lengths, [B,L,H,E]", 404, 2, 2, 1, 30, 18, 4, 6);
    s.layout = AxisOrder::batch_seq_head, s.causal = Causal::top_left, s.key_lengths = {18, 5};
    v.push_back(s);
  }
  {
    Spec s = sized("bottom-right L > S, additive [L,S], GQA", 505, 1, 4, 2, 35, 12, 8, 8);
    s.causal = Causal::bottom_right, s.mask_kind = TensorMask::additive;
    v.push_back(s);
  }
  {
    Spec s = sized("increasing scores, bottom-right L < S", 606, 1, 2, 1, 9, 40, 4, 4);
    s.causal = Causal::bottom_right, s.scale = 0.5, s.increasing_scores = true;
    v.push_back(s);
  }
  // Sliding windows (FlashAttention's window_size, bottom-right aligned).
  {
    Spec s = sized("window (4, 0) L < S, key lengths", 707, 2, 2, 2, 11, 26, 8, 4);
    s.window_left = 4, s.window_right = 0, s.key_lengths = {26, 17};
    v.push_back(s);
  }
  {
    Spec s = sized("window (3, 2) L > S, GQA, additive [L,S]", 808, 1, 4, 2, 30, 19, 8, 8);
    s.window_left = 3, s.window_right = 2, s.mask_kind = TensorMask::additive;
    v.push_back(s);
  }
  {
    Spec s = sized("window (-1, 1) with top-left causal L < S", 909, 1, 2, 1, 14, 21, 4, 6);
    s.window_right = 1, s.causal = Causal::top_left;
    v.push_back(s);
  }
  {
    Spec s = sized("window (0, 5) L = S, increasing scores", 1010, 1, 1, 1, 17, 17, 4, 4);
    s.window_left = 0, s.window_right = 5, s.increasing_scores = true;
    v.push_back(s);
  }
  // Softcap (FlashAttention's softcap, Gemma 2's 50 and 30): large scores, where the cap bites.
  {
    Spec s = sized("softcap 5, scores ~N(0, 16), GQA, boolean [L,S]", 1515, 2, 4, 2, 11, 30, 16, 8);
    s.softcap = 5, s.spread = 4, s.mask_kind = TensorMask::boolean;
    v.push_back(s);
  }
  {
    Spec s = sized("softcap 2 with an additive [L,S] and bottom-right causal", 1616, 1, 2, 1, 20, 26, 8, 8);
    s.softcap = 2, s.spread = 3, s.mask_kind = TensorMask::additive, s.causal = Causal::bottom_right;
    v.push_back(s);
  }
  {
    Spec s = sized("softcap 30 with ALiBi and a window (8, 0)", 1717, 1, 2, 2, 16, 40, 8, 4);
    s.softcap = 30, s.spread = 8, s.alibi = true, s.window_left = 8, s.window_right = 0;
    v.push_back(s);
  }
  // Sinks (gpt-oss, FlashAttention 4): a logit per head in every row's denominator.
  {
    Spec s = sized("sinks, GQA, boolean [L,S] (rows without keys)", 1818, 2, 4, 2, 14, 19, 8, 8);
    s.sinks = true, s.mask_kind = TensorMask::boolean;
    v.push_back(s);
  }
  {
    Spec s = sized("sinks with a window (5, 0) and ALiBi", 1919, 1, 3, 1, 12, 30, 8, 4);
    s.sinks = true, s.window_left = 5, s.window_right = 0, s.alibi = true;
    v.push_back(s);
  }
  // ALiBi (FlashAttention's alibi_slopes, bottom-right aligned distances).
  {
    Spec s = sized("ALiBi [Hq] L < S, GQA, boolean [L,S]", 1111, 2, 4, 2, 12, 40, 8, 8);
    s.alibi = true, s.mask_kind = TensorMask::boolean;
    v.push_back(s);
  }
  {
    Spec s = sized("ALiBi [B, Hq] L > S with bottom-right causal", 1212, 2, 2, 1, 30, 21, 8, 4);
    s.alibi = true, s.alibi_per_batch = true, s.causal = Causal::bottom_right;
    v.push_back(s);
  }
  {
    Spec s = sized("ALiBi and a window (6, 0), increasing scores", 1313, 1, 2, 2, 25, 33, 4, 4);
    s.alibi = true, s.window_left = 6, s.window_right = 0, s.increasing_scores = true;
    v.push_back(s);
  }
  return v;
}

// A profile by name; "fp64 flash" is fp64 with exp within attn::kKernelExpUlps (2: the fast
// kernel's documented exp accuracy, measured 1.16 ulps in fp64) instead of the profile's 1.
CertifyOptions options_for(const std::string& profile) {
  CertifyOptions options;
  const bool flash = profile == "fp64 flash";
  const auto arithmetic = arithmetic_profile(flash ? "fp64" : profile);
  if (!arithmetic.ok()) throw std::runtime_error(profile);
  options.arithmetic = *arithmetic;
  if (flash) options.arithmetic.exp_ulps = std::max(options.arithmetic.exp_ulps, kKernelExpUlps);
  return options;
}

// Rows of p in which no key takes part.
std::size_t empty_rows(const TensorProblem& p) {
  std::size_t count = 0;
  for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
    const RowIndex r = row_index(p, row);
    bool any = false;
    for (std::size_t j = 0; j < p.S && !any; ++j) any = takes_part(p, r.b, r.h, r.i, j);
    count += any ? 0 : 1;
  }
  return count;
}

TEST(TensorMutantZoo, CorrectKernelsPass) {
  const auto started = std::chrono::steady_clock::now();
  const Kernel three_step{.name = "fp32 three-step"};
  const Kernel tiled{.name = "fp32 tiled (tile 16)", .tile = 16};
  const Kernel fp64{.name = "fp64 three-step"};
  std::size_t masked_rows = 0;
  std::printf("%-20s | %-58s | %s\n", "kernel", "problem", "max |err|/δ, mean");
  const auto check = [&](const Kernel& k, const Spec& s, const TensorProblem& p, const std::vector<double>& out,
                         const char* profile) {
    const TensorReport report = certify_tensor(p, out, options_for(profile));
    EXPECT_TRUE(report.passed) << k.name << " on " << describe(s, p.dtype) << ": " << report.summary();
    EXPECT_EQ(report.rows_checked, report.rows_total) << k.name << " on " << describe(s, p.dtype);
    EXPECT_EQ(report.capped_rows, 0u) << k.name << " on " << describe(s, p.dtype);
    std::printf("%-20s | %-58s | %.3g, %.3g\n", k.name.c_str(), describe(s, p.dtype).c_str(), report.max_band_usage,
                report.mean_band_usage);
  };
  // The production kernel with small tiles, so every row crosses query and key tiles (key tiles
  // are rounded up to the SIMD micro-tile: 8 to 32 keys).
  const Kernel flash32{.name = "flash fp32"}, flash64{.name = "flash fp64"};
  const testing_support::FlashRun flash_run{.query_tile = 5, .key_tile = 8, .threads = 2};
  for (const Spec& s : specs()) {
    const TensorProblem p32 = make_problem(s, DType::fp32);
    ASSERT_TRUE(validate(p32).ok()) << describe(s, DType::fp32) << ": " << validate(p32).error().message;
    masked_rows += empty_rows(p32);
    for (const Kernel* k : {&three_step, &tiled}) check(*k, s, p32, run_kernel<float>(p32, *k), "fp32");
    const TensorProblem p64 = make_problem(s, DType::fp64);
    ASSERT_TRUE(validate(p64).ok()) << describe(s, DType::fp64) << ": " << validate(p64).error().message;
    check(fp64, s, p64, run_kernel<double>(p64, fp64), "fp64");
    KernelStatus status = KernelStatus::ok;
    check(flash32, s, p32, testing_support::run_flash<float>(p32, flash_run, &status), "fp32");
    EXPECT_EQ(status, KernelStatus::ok) << describe(s, DType::fp32);
    check(flash64, s, p64, testing_support::run_flash<double>(p64, flash_run, &status), "fp64 flash");
    EXPECT_EQ(status, KernelStatus::ok) << describe(s, DType::fp64);
  }
  EXPECT_GT(masked_rows, 0u) << "the problem set has no fully masked row";
  std::printf("fully masked rows per dtype: %zu; correct kernels: %.2f s\n", masked_rows,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

// ALiBi at a real length: biases up to 0.7·2047 ≈ 1400, so the kernel's own rounding of each
// bias (u|b|, far above the scores' other errors) is what the band must hold. The correct fp32
// kernels pass, with the bias formed in fp32. The bias in bf16 (caught at S <= 40 in the zoo) stays
// inside the band here: a running maximum may be a far key's score (the first tile's, about -1400),
// and the rescales' argument errors of u|m_t| that a correct kernel may make are as large. Its
// usage is still hundreds of times a correct kernel's: checked, and printed.
TEST(TensorMutantZoo, AlibiAtLongRowsHoldsTheBiasRounding) {
  Spec s = sized("ALiBi L = 64, S = 2048, GQA", 1414, 1, 4, 2, 64, 2048, 16, 8);
  s.alibi = true;
  const TensorProblem p = make_problem(s, DType::fp32);
  ASSERT_TRUE(validate(p).ok());
  const CertifyOptions options = options_for("fp32");
  const Kernel three_step{.name = "fp32 three-step"}, tiled{.name = "fp32 tiled", .tile = 128};
  for (const Kernel* k : {&three_step, &tiled}) {
    const TensorReport report = certify_tensor(p, run_kernel<float>(p, *k), options);
    EXPECT_TRUE(report.passed) << k->name << ": " << report.summary();
    std::printf("%-16s ALiBi S = 2048: max |err|/δ %.3g (certified), %.3g (statistical)\n", k->name.c_str(),
                report.certified.max_band_usage, report.statistical.max_band_usage);
  }
  KernelStatus status = KernelStatus::ok;
  const TensorReport flash =
      certify_tensor(p, testing_support::run_flash<float>(p, testing_support::FlashRun{}, &status), options);
  EXPECT_EQ(status, KernelStatus::ok);
  EXPECT_TRUE(flash.passed) << "flash fp32: " << flash.summary();
  const Kernel bf16_bias{.name = "bias in bf16", .alibi_in_bf16 = true};
  const TensorReport wrong = certify_tensor(p, run_kernel<float>(p, bf16_bias), options);
  EXPECT_GT(wrong.max_band_usage, 100 * flash.max_band_usage);
  std::printf("flash fp32 max |err|/δ %.3g; ALiBi's bias in bf16: %zu failures, max |err|/δ %.3g\n",
              flash.max_band_usage, wrong.failure_count, wrong.max_band_usage);
}

TEST(TensorMutantZoo, EveryMutantIsCaught) {
  const std::vector<Kernel> mutants = {
      {.name = "exp in fp16", .exp_in_fp16 = true},
      {.name = "running sum not rescaled (tile 8)", .tile = 8, .sum_not_rescaled = true},
      {.name = "top-left for bottom-right", .top_left_always = true},
      {.name = "GQA heads interleaved", .gqa_interleaved = true},
      {.name = "scale as divisor", .scale_divides = true},
      {.name = "fully masked row 0/0", .tile = 16, .masked_row_nan = true},
      {.name = "P in bf16", .p_in_bf16 = true},
      {.name = "PV accumulated in fp16", .accumulate_in_fp16 = true},
      {.name = "window's left end one key wide", .window_left_wide = true},
      {.name = "window's right end one key wide", .tile = 8, .window_right_wide = true},
      {.name = "window aligned top-left", .window_top_left = true},
      {.name = "window ignored", .tile = 16, .window_ignored = true},
      {.name = "ALiBi's sign lost (+slope·|d|)", .alibi_plus = true},
      {.name = "ALiBi's slopes in reversed head order", .tile = 8, .alibi_heads_reversed = true},
      {.name = "ALiBi's distance top-left (|i - j|)", .alibi_top_left = true},
      {.name = "ALiBi's bias in bf16", .tile = 16, .alibi_in_bf16 = true},
      {.name = "softcap as s·tanh(s)", .softcap_s_tanh_s = true},
      {.name = "softcap over the bias too", .tile = 8, .softcap_after_bias = true},
      {.name = "softcap ignored", .softcap_ignored = true},
      {.name = "the sink left out of the denominator", .tile = 8, .sink_left_out = true},
      {.name = "sinks in reversed head order", .sink_heads_reversed = true},
  };
  const auto started = std::chrono::steady_clock::now();
  const std::vector<Spec> all = specs();
  std::vector<TensorProblem> problems;
  for (const Spec& s : all) problems.push_back(make_problem(s, DType::fp32));
  const CertifyOptions options = options_for("fp32");
  std::printf("%-34s | %-58s | %-7s | %s\n", "mutant", "first problem that caught it", "caught", "worst failure there");
  for (const Kernel& k : mutants) {
    std::size_t caught = 0;
    std::string first = "NOT CAUGHT", worst_text;
    double best_usage = 0;
    for (std::size_t n = 0; n < problems.size(); ++n) {
      const TensorReport report = certify_tensor(problems[n], run_kernel<float>(problems[n], k), options);
      best_usage = std::max(best_usage, report.max_band_usage);
      if (report.passed) continue;
      if (caught++ > 0) continue;
      const TensorFailure& worst = report.failures.front();
      char text[200];
      std::snprintf(text, sizeof text, "%s at (%zu, %zu, %zu, %zu), |err|/δ = %.3g (%zu failures)",
                    worst.reason.c_str(), worst.index[0], worst.index[1], worst.index[2], worst.index[3], worst.usage,
                    report.failure_count);
      first = describe(all[n], DType::fp32);
      worst_text = text;
    }
    if (caught == 0) {
      char text[80];
      std::snprintf(text, sizeof text, "max |err|/δ = %.3g", best_usage);
      worst_text = text;
    }
    const std::string count = std::to_string(caught) + "/" + std::to_string(problems.size());
    std::printf("%-34s | %-58s | %-7s | %s\n", k.name.c_str(), first.c_str(), count.c_str(), worst_text.c_str());
    EXPECT_GT(caught, 0u) << k.name << " passed every problem; max |err|/δ = " << best_usage;
  }
  std::printf("mutants: %.2f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

// The LSE with sinks, log(Σ_j e^{s_j} + e^{z}): both forms (the sink as a softmax column, so the
// maximum includes it; FlashAttention 4's, the keys' maximum with the sink added at the end) pass in
// fp32 and fp64 on the sink problems, on rows without keys (LSE z) and with sinks far above every
// score (z = 60: FlashAttention 4's log ℓ ≈ z - m) or far below (z = -60), in natural and log2 units;
// the sink left out of the LSE
// and -inf for a keyless row with its sink are caught.
TEST(TensorMutantZoo, LseWithSinksIsCertifiedAndItsBugsCaught) {
  std::vector<Spec> sink_specs;
  for (const Spec& s : specs())
    if (s.sinks) sink_specs.push_back(s);
  ASSERT_GE(sink_specs.size(), 2u);
  const Kernel three_step{.name = "three-step"}, tiled{.name = "tiled (tile 8)", .tile = 8};
  const Kernel three_step2{.name = "three-step log2", .lse_base2 = true},
      tiled2{.name = "tiled log2 (tile 8)", .tile = 8, .lse_base2 = true};
  const Kernel without{.name = "LSE without the sink", .tile = 8, .lse_without_sink = true};
  const Kernel keyless{.name = "keyless row LSE -inf", .lse_keyless_minus_inf = true};
  std::size_t keyless_rows = 0, without_caught = 0, keyless_caught = 0;
  for (const Spec& base : sink_specs) {
    for (const double dominating : {0.0, 60.0, -60.0}) {
      for (const DType dtype : {DType::fp32, DType::fp64}) {
        TensorProblem p = make_problem(base, dtype);
        if (dominating != 0) std::fill(p.sinks.begin(), p.sinks.end(), dominating);
        keyless_rows += dtype == DType::fp32 && dominating == 0 ? empty_rows(p) : 0;
        const CertifyOptions options = options_for(dtype == DType::fp32 ? "fp32" : "fp64");
        for (const Kernel* k : {&three_step, &tiled, &three_step2, &tiled2}) {
          std::vector<double> lse;
          const std::vector<double> out = dtype == DType::fp32 ? run_kernel<float>(p, *k, &lse)
                                                               : run_kernel<double>(p, *k, &lse);
          const auto [o, l] = certify_tensor_and_lse(p, out, lse, options, {.base2 = k->lse_base2});
          EXPECT_TRUE(o.passed) << k->name << " on " << describe(base, dtype) << " z " << dominating << ": "
                                << o.summary();
          EXPECT_TRUE(l.passed) << k->name << " LSE on " << describe(base, dtype) << " z " << dominating << ": "
                                << l.summary();
          std::printf("%-14s | %-52s z %4.0f | LSE usage max %.3g\n", k->name.c_str(), describe(base, dtype).c_str(),
                      dominating, l.max_band_usage);
        }
        if (dtype != DType::fp32) continue;
        for (const Kernel* k : {&without, &keyless}) {
          std::vector<double> lse;
          const std::vector<double> out = run_kernel<float>(p, *k, &lse);
          const TensorReport l = certify_tensor_and_lse(p, out, lse, options).second;
          (k == &without ? without_caught : keyless_caught) += l.passed ? 0 : 1;
          if (!l.passed)
            std::printf("%-22s caught on %s z %.0f: %s\n", k->name.c_str(), describe(base, dtype).c_str(), dominating,
                        l.failures.front().reason.c_str());
        }
      }
    }
  }
  EXPECT_GT(keyless_rows, 0u) << "no sink problem has a row without keys";
  EXPECT_GT(without_caught, 0u) << "the LSE without the sink passed every problem";
  EXPECT_GT(keyless_caught, 0u) << "a keyless row's LSE -inf passed every problem";
}

}  // namespace
}  // namespace attn::verify
