// Backward kernels of scaled_dot_product_attention on a TensorProblem, written the ways real ones
// are — FlashAttention-2's (P recomputed from the stored LSE, D_i from the stored output) and the
// autograd of the math path (the saved softmax, D_i = Σ_j P_ij dP_ij) — in float or double, with
// storage roundings, plus the bugs the trackers report. Which keys take part, the bias and the
// layout come from the problem's own rules (tensor.hpp); the arithmetic is the kernels' own.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <numbers>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor_kernels.hpp"

namespace attn::testing_support {

enum class BackwardAlgorithm { flash, math };

/// A backward kernel's choices (first group: freedoms a correct kernel takes; second: bugs).
struct BackwardChoices {
  BackwardAlgorithm algorithm = BackwardAlgorithm::flash;
  /// Storage rounding (fp16/bf16 inputs): the forward's output, P before dV and dS before dQ/dK
  /// (flash), every intermediate tensor (math), the gradients. nullptr: none (fp32/fp64).
  double (*round_storage)(double) = nullptr;
  bool reverse = false;  ///< keys and rows last to first (atomics and tile orders differ)
  /// Under GQA each query head's dK and dV rounded to storage, then the group's heads summed and
  /// rounded again (FlashAttention 2 writes dk_expanded in the input dtype and sums it).
  bool per_head_storage = false;
  /// K scaled by σ and rounded to storage before Q·Kᵀ and dQ = dS·K̃ (the Triton tutorial's
  /// pre-scaled K): needs query_in_storage.
  bool prescaled_key = false;
  /// The math path's dS as PyTorch's CUDA softmax backward forms it: fl(fl(P dP) - P·D), dP·P in storage.
  bool cuda_softmax_backward = false;
  /// dK and dV rounded to this format instead of storage (a kernel keeping K and V in their own
  /// format, llama.cpp's fp16 cache read by an fp32 query).
  double (*round_kv)(double) = nullptr;
  bool no_D = false;                ///< bug: dS = P ∘ dP
  bool D_from_bf16_out = false;     ///< bug: D from the output rounded to bf16 (an fp32 kernel)
  bool no_scale_dq = false;         ///< bug: the scale missing in dQ
  bool no_scale_dk = false;         ///< bug: the scale missing in dK
  bool dk_from_ds = false;          ///< bug: dK = σ dS Q instead of σ dSᵀ Q (needs L = S)
  bool gqa_first_head = false;      ///< bug: dK, dV from the group's first query head only
  bool ignore_causal = false;       ///< bug: the causal rule left out of the backward
  bool ignore_window = false;       ///< bug: the sliding window left out of the backward
  bool p_from_log2_lse = false;     ///< bug: P = exp(s - lse₂), a log2 LSE read as natural
  bool dv_unnormalized = false;     ///< bug: dV from e^{s - max}, not divided by the sum
  bool nan_masked_rows = false;     ///< bug: a row without keys gives NaN (the math path's 0/0)
  bool dmask_scaled = false;        ///< bug: the additive mask's gradient σ·dS (as if added before the scale)
  bool dmask_first_head = false;    ///< bug: a mask broadcast over heads takes head 0's dS only
  bool dmask_no_D = false;          ///< bug: the mask's gradient P ∘ dP (D left out there only)
  bool ds_in_bf16 = false;          ///< bug: dS rounded to bf16 before dQ and dK (an fp32 kernel)
  bool no_dtanh = false;            ///< bug: softcap's derivative 1 - tanh² left out of dQ and dK
  bool dsink_sign = false;          ///< bug: dz = +Σ P_z D (the sign of the sink's gradient lost)
  bool dsink_unweighted = false;    ///< bug: dz = -Σ D (the sink's weight left out)
  bool lse_without_sink = false;    ///< bug: P recomputed from the keys' LSE, the sink left out of it
};

/// What a forward-and-backward run returns: the forward's out [B, Hq, L, Ev] and natural LSE
/// [B, Hq, L] (as a FlashAttention kernel stores them: out in storage, LSE in T; -inf without keys),
/// and dq, dk, dv in the problem's layout; with an additive mask its gradient dmask in the mask's
/// shape (dS summed over each element's broadcast positions, in T, then stored).
struct BackwardRun {
  std::vector<double> out, lse, dq, dk, dv, dmask, dsinks;  ///< dsinks [Hq] in fp32, with sinks
};

template <class T>
BackwardRun backward_kernel(const verify::TensorProblem& p, const std::vector<double>& dout,
                            const BackwardChoices& choices) {
  using verify::tensor_index;
  const T inf = std::numeric_limits<T>::infinity();
  const auto store = [&](T x) -> T { return choices.round_storage ? static_cast<T>(choices.round_storage(x)) : x; };
  const auto inter = [&](T x) -> T {
    return choices.algorithm == BackwardAlgorithm::math ? store(x) : x;
  };
  const T scale = p.scale ? static_cast<T>(*p.scale) : T(1) / std::sqrt(static_cast<T>(p.E));
  const std::size_t group = p.q_heads / p.kv_heads;
  BackwardRun run;
  run.out.assign(p.batch * p.q_heads * p.L * p.Ev, 0.0);
  run.lse.assign(p.batch * p.q_heads * p.L, -std::numeric_limits<double>::infinity());
  std::vector<T> dq(p.query.size(), T(0)), dk(p.key.size(), T(0)), dv(p.value.size(), T(0));
  // Per query head's dK and dV (per_head_storage): [B, Hq, S, E] and [B, Hq, S, Ev], row-major.
  std::vector<T> dk_head(choices.per_head_storage ? p.batch * p.q_heads * p.S * p.E : 0, T(0)),
      dv_head(choices.per_head_storage ? p.batch * p.q_heads * p.S * p.Ev : 0, T(0));
  const auto q_at = [&](std::size_t b, std::size_t h, std::size_t i, std::size_t c) {
    return static_cast<T>(p.query[tensor_index(p, p.q_heads, p.L, p.E, b, h, i, c)]);
  };
  const auto k_at = [&](std::size_t b, std::size_t g, std::size_t j, std::size_t c) {
    return static_cast<T>(p.key[tensor_index(p, p.kv_heads, p.S, p.E, b, g, j, c)]);
  };
  const auto v_at = [&](std::size_t b, std::size_t g, std::size_t j, std::size_t c) {
    return static_cast<T>(p.value[tensor_index(p, p.kv_heads, p.S, p.Ev, b, g, j, c)]);
  };
  const auto sees = [&](std::size_t b, std::size_t h, std::size_t i, std::size_t j, bool backward) {
    if (verify::takes_part(p, b, h, i, j)) return true;
    const bool causal = backward && choices.ignore_causal && p.causal != verify::Causal::none;
    const bool window = backward && choices.ignore_window && verify::has_window(p);
    if (!causal && !window) return false;
    verify::TensorProblem open = p;  // the same problem without its causal rule or window
    if (causal) open.causal = verify::Causal::none;
    if (window) open.window_left = open.window_right = -1;
    return verify::takes_part(open, b, h, i, j);
  };
  const auto k_used = [&](std::size_t b, std::size_t g, std::size_t j, std::size_t c) {
    return choices.prescaled_key ? store(k_at(b, g, j, c) * scale) : k_at(b, g, j, c);
  };
  // Softcap: c·tanh(x/c) of the raw score x, as FlashAttention forms it (the quotient, tanh, the product).
  const T cap = static_cast<T>(p.softcap);
  const auto raw_of = [&](std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
    T dot = 0;
    for (std::size_t c = 0; c < p.E; ++c) dot += q_at(b, h, i, c) * k_used(b, h / group, j, c);
    return choices.prescaled_key ? dot : inter(inter(dot) * scale);
  };
  const auto score_of = [&](std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
    T s = raw_of(b, h, i, j);
    if (p.softcap > 0) s = inter(cap * inter(std::tanh(inter(s / cap))));
    return inter(s + static_cast<T>(verify::additive_bias(p, b, h, i, j)));
  };
  // The cap's derivative 1 - t² from the recomputed t (1 without softcap).
  const auto slope_of = [&](std::size_t b, std::size_t h, std::size_t i, std::size_t j) -> T {
    if (!(p.softcap > 0) || choices.no_dtanh) return T(1);
    const T t = inter(std::tanh(inter(raw_of(b, h, i, j) / cap)));
    return inter(T(1) - inter(t * t));
  };
  const bool sinks = verify::has_sinks(p);
  std::vector<T> dsinks(p.sinks.size(), T(0));
  // dS of every row, kept for the dk_from_ds bug: [B, Hq, L, S].
  std::vector<T> dS_all(p.batch * p.q_heads * p.L * p.S, T(0));
  const bool with_dmask = p.mask_kind == verify::TensorMask::additive;
  std::vector<T> dmask(with_dmask ? p.mask.size() : 0, T(0));
  for (std::size_t b = 0; b < p.batch; ++b) {
    for (std::size_t h = 0; h < p.q_heads; ++h) {
      const std::size_t g = h / group;
      for (std::size_t n = 0; n < p.L; ++n) {
        const std::size_t i = choices.reverse ? p.L - 1 - n : n;
        const std::size_t row = (b * p.q_heads + h) * p.L + i;
        // The forward: scores, maximum, sum, LSE, output (stored), and the saved softmax.
        std::vector<T> s(p.S, -inf), P(p.S, T(0));
        T m = -inf;
        for (std::size_t j = 0; j < p.S; ++j) {
          if (!verify::takes_part(p, b, h, i, j)) continue;
          s[j] = score_of(b, h, i, j);
          m = std::max(m, s[j]);
        }
        const auto out_at = [&](std::size_t c) { return tensor_index(p, p.q_heads, p.L, p.Ev, b, h, i, c); };
        const auto dq_at = [&](std::size_t c) { return tensor_index(p, p.q_heads, p.L, p.E, b, h, i, c); };
        if (m == -inf) {
          if (sinks) run.lse[row] = static_cast<double>(static_cast<T>(verify::sink_of(p, h)));  // log e^z
          if (choices.nan_masked_rows) {
            for (std::size_t c = 0; c < p.E; ++c) dq[dq_at(c)] = std::numeric_limits<T>::quiet_NaN();
            for (std::size_t j = 0; j < p.S && with_dmask; ++j)
              dmask[verify::mask_offset(p, b, h, i, j)] = std::numeric_limits<T>::quiet_NaN();
          }
          continue;
        }
        const T z = static_cast<T>(sinks ? verify::sink_of(p, h) : 0.0);
        if (sinks) m = std::max(m, z);  // the sink is one more logit of the softmax
        T sum = 0, sum_keys = 0;
        for (std::size_t j = 0; j < p.S; ++j)
          if (s[j] != -inf) sum += std::exp(s[j] - m);
        sum_keys = sum;
        const T P_sink = sinks ? inter(std::exp(z - m) / (sum + std::exp(z - m))) : T(0);
        if (sinks) sum += std::exp(z - m);
        const T lse = m + std::log(sum);
        run.lse[row] = static_cast<double>(lse);
        std::vector<T> out(p.Ev, T(0));
        for (std::size_t j = 0; j < p.S; ++j) {
          if (s[j] == -inf) continue;
          P[j] = inter(std::exp(s[j] - m) / sum);
          for (std::size_t c = 0; c < p.Ev; ++c) out[c] += std::exp(s[j] - m) * v_at(b, g, j, c);
        }
        for (std::size_t c = 0; c < p.Ev; ++c) {
          out[c] = store(out[c] / sum);
          run.out[out_at(c)] = static_cast<double>(out[c]);
        }
        // The backward of this row.
        const auto d_out = [&](std::size_t c) { return static_cast<T>(dout[out_at(c)]); };
        std::vector<T> dP(p.S, T(0));
        std::vector<char> part(p.S, 0);
        for (std::size_t j = 0; j < p.S; ++j) {
          part[j] = sees(b, h, i, j, true);
          if (!part[j]) continue;
          T dot = 0;
          for (std::size_t c = 0; c < p.Ev; ++c) dot += d_out(c) * v_at(b, g, j, c);
          dP[j] = inter(dot);
        }
        const T lse_keys = choices.lse_without_sink ? m + std::log(sum_keys) : lse;
        const T lse_used = choices.p_from_log2_lse ? lse_keys * static_cast<T>(std::numbers::log2e) : lse_keys;
        const auto weight = [&](std::size_t j) -> T {
          if (choices.algorithm == BackwardAlgorithm::math && !choices.ignore_causal && !choices.ignore_window) return P[j];
          return std::exp(score_of(b, h, i, j) - lse_used);
        };
        T D = 0;
        if (choices.algorithm == BackwardAlgorithm::flash) {
          for (std::size_t c = 0; c < p.Ev; ++c)
            D += d_out(c) * (choices.D_from_bf16_out ? static_cast<T>(round_bf16(static_cast<double>(out[c]))) : out[c]);
        } else {
          for (std::size_t j = 0; j < p.S; ++j)
            if (part[j]) D += weight(j) * dP[j];
        }
        if (choices.no_D) D = 0;
        if (sinks) {  // dz_h -= P_z D_i: the saved weight (math) or exp(z - LSE) (flash)
          const T P_z = choices.algorithm == BackwardAlgorithm::math ? P_sink : std::exp(z - lse_used);
          const T term = choices.dsink_unweighted ? D : inter(P_z * D);
          dsinks[h] += choices.dsink_sign ? term : -term;
        }
        for (std::size_t t = 0; t < p.S; ++t) {
          const std::size_t j = choices.reverse ? p.S - 1 - t : t;
          if (!part[j]) continue;
          const T Pj = weight(j);
          T dS = choices.round_storage ? store(Pj * inter(dP[j] - D)) : Pj * (dP[j] - D);
          if (choices.cuda_softmax_backward) dS = store(store(Pj * dP[j]) - Pj * D);
          if (choices.ds_in_bf16) dS = static_cast<T>(round_bf16(static_cast<double>(dS)));
          dS_all[row * p.S + j] = dS;
          const std::size_t rank = p.mask_shape.size();
          const bool heads_broadcast = rank < 3 || p.mask_shape[rank - 3] == 1;
          if (with_dmask && !(choices.dmask_first_head && h != 0 && heads_broadcast)) {
            const T g = choices.dmask_no_D ? Pj * dP[j] : dS;
            dmask[verify::mask_offset(p, b, h, i, j)] += choices.dmask_scaled ? g * scale : g;
          }
          const T dS_k = p.softcap > 0 ? inter(dS * slope_of(b, h, i, j)) : dS;  // dS (1 - t²) for q and k
          for (std::size_t c = 0; c < p.E; ++c) dq[dq_at(c)] += dS_k * k_used(b, g, j, c);
          if (choices.gqa_first_head && h % group != 0) continue;
          const T P_v = choices.dv_unnormalized ? std::exp(score_of(b, h, i, j) - m) : Pj;
          const T P_stored = choices.round_storage ? store(P_v) : P_v;
          if (choices.per_head_storage) {
            for (std::size_t c = 0; c < p.E; ++c) dk_head[(((b * p.q_heads + h) * p.S) + j) * p.E + c] += dS_k * q_at(b, h, i, c);
            for (std::size_t c = 0; c < p.Ev; ++c) dv_head[(((b * p.q_heads + h) * p.S) + j) * p.Ev + c] += P_stored * d_out(c);
            continue;
          }
          for (std::size_t c = 0; c < p.E; ++c)
            if (!choices.dk_from_ds) dk[tensor_index(p, p.kv_heads, p.S, p.E, b, g, j, c)] += dS_k * q_at(b, h, i, c);
          for (std::size_t c = 0; c < p.Ev; ++c)
            dv[tensor_index(p, p.kv_heads, p.S, p.Ev, b, g, j, c)] += P_stored * d_out(c);
        }
      }
    }
  }
  if (choices.dk_from_ds) {  // dK_j = σ Σ_i dS[j][i] q_i, rows and keys swapped (L = S)
    for (std::size_t b = 0; b < p.batch; ++b)
      for (std::size_t h = 0; h < p.q_heads; ++h)
        for (std::size_t j = 0; j < std::min(p.S, p.L); ++j)
          for (std::size_t i = 0; i < std::min(p.S, p.L); ++i)
            for (std::size_t c = 0; c < p.E; ++c)
              dk[tensor_index(p, p.kv_heads, p.S, p.E, b, h / group, j, c)] +=
                  dS_all[((b * p.q_heads + h) * p.L + j) * p.S + i] * q_at(b, h, i, c);
  }
  if (choices.per_head_storage) {  // each head's result scaled and stored, then the group's sum stored
    for (std::size_t b = 0; b < p.batch; ++b)
      for (std::size_t h = 0; h < p.q_heads; ++h)
        for (std::size_t j = 0; j < p.S; ++j) {
          for (std::size_t c = 0; c < p.E; ++c)
            dk[tensor_index(p, p.kv_heads, p.S, p.E, b, h / group, j, c)] +=
                store(dk_head[(((b * p.q_heads + h) * p.S) + j) * p.E + c] * scale);
          for (std::size_t c = 0; c < p.Ev; ++c)
            dv[tensor_index(p, p.kv_heads, p.S, p.Ev, b, h / group, j, c)] +=
                store(dv_head[(((b * p.q_heads + h) * p.S) + j) * p.Ev + c]);
        }
  }
  const auto finish = [&](const std::vector<T>& g, T factor, bool scaled, double (*round)(double)) {
    std::vector<double> out(g.size());
    for (std::size_t n = 0; n < g.size(); ++n) {
      const T x = scaled ? inter(g[n]) * factor : g[n];
      out[n] = round ? round(static_cast<double>(x)) : static_cast<double>(store(x));
    }
    return out;
  };
  const bool prescaled = choices.prescaled_key;  // dQ read the scaled K already
  run.dq = finish(dq, scale, !choices.no_scale_dq && !prescaled, nullptr);
  run.dk = finish(dk, scale, !choices.no_scale_dk && !choices.per_head_storage, choices.round_kv);
  run.dv = finish(dv, T(1), false, choices.round_kv);
  run.dmask = finish(dmask, T(1), false, nullptr);
  for (const T x : dsinks) run.dsinks.push_back(static_cast<double>(static_cast<float>(x)));
  return run;
}

}  // namespace attn::testing_support
