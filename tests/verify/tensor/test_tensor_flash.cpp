// The fast kernel under the certified band: attn::flash_attention in fp32 (fp64) on random
// TensorProblems with PyTorch's full semantics (every mask kind and broadcast, key lengths, causal
// top-left and bottom-right with L != S, GQA, both layouts, scales defaulted, given and negative)
// and FlashAttention's sliding windows, softcap, ALiBi, sinks and packed varlen batches
// certified by certify_tensor against arithmetic_profile("fp32") (resp. "fp64"), at every SIMD level
// this CPU has and several tile sizes; 1 and 2 threads give identical bits. A failure prints
// RapidCheck's seed and reproduce string (README, "Replaying a failure") and the worst element.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "flash_attention.hpp"
#include "tensor/tensor.hpp"
#include "tensor/tensor_band.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor_kernels.hpp"

namespace attn::verify {
namespace {

using testing_support::FlashRun;
using testing_support::run_flash;

// The shape and rules of a problem; values come from `seed`. RapidCheck draws and shrinks these.
struct Draw {
  std::size_t batch = 1, kv_heads = 1, group = 1, L = 1, S = 1, E = 1, Ev = 1;
  AxisOrder layout = AxisOrder::batch_head_seq;
  Causal causal = Causal::none;
  TensorMask mask_kind = TensorMask::none;
  int mask_broadcast = 0;  // [L, S], [1, S], [B, 1, L, S], [Hq, L, S], [B, Hq, L, S]
  bool key_lengths = false;
  int scale = 0;  // defaulted, 0.375, 0.3 (not dyadic), -0.5, 0
  double spread = 1;
  std::uint64_t seed = 0;
};

std::ostream& operator<<(std::ostream& os, const Draw& d) {
  return os << "B=" << d.batch << " Hkv=" << d.kv_heads << " G=" << d.group << " L=" << d.L << " S=" << d.S
            << " E=" << d.E << " Ev=" << d.Ev << " layout=" << static_cast<int>(d.layout)
            << " causal=" << static_cast<int>(d.causal) << " mask=" << static_cast<int>(d.mask_kind) << "/"
            << d.mask_broadcast << " key_lengths=" << d.key_lengths << " scale#" << d.scale << " spread=" << d.spread
            << " seed=" << d.seed;
}

rc::Gen<Draw> draws() {
  // S up to 70: more than two key tiles of the widest micro-tile (32 fp32 keys on AVX-512).
  return rc::gen::apply(
      [](std::size_t batch, std::size_t kv_heads, std::size_t group, std::size_t L, std::size_t S, std::size_t E,
         std::size_t Ev, AxisOrder layout, Causal causal, TensorMask mask_kind, int broadcast, bool lengths, int scale,
         double spread, std::uint64_t seed) {
        return Draw{batch,  kv_heads,  group,     L,       S,     E,      Ev,  layout,
                    causal, mask_kind, broadcast, lengths, scale, spread, seed};
      },
      rc::gen::inRange<std::size_t>(1, 3), rc::gen::inRange<std::size_t>(1, 3), rc::gen::inRange<std::size_t>(1, 4),
      rc::gen::inRange<std::size_t>(1, 40), rc::gen::inRange<std::size_t>(1, 71), rc::gen::inRange<std::size_t>(1, 17),
      rc::gen::inRange<std::size_t>(1, 13), rc::gen::element(AxisOrder::batch_head_seq, AxisOrder::batch_seq_head),
      rc::gen::element(Causal::none, Causal::top_left, Causal::bottom_right),
      rc::gen::element(TensorMask::none, TensorMask::boolean, TensorMask::additive), rc::gen::inRange(0, 5),
      rc::gen::arbitrary<bool>(), rc::gen::inRange(0, 5), rc::gen::element(0.25, 1.0, 4.0),
      rc::gen::arbitrary<std::uint64_t>());
}

TensorProblem make_problem(const Draw& d, DType dtype) {
  TensorProblem p;
  p.batch = d.batch, p.kv_heads = d.kv_heads, p.q_heads = d.kv_heads * d.group;
  p.L = d.L, p.S = d.S, p.E = d.E, p.Ev = d.Ev, p.dtype = dtype, p.layout = d.layout, p.causal = d.causal;
  const std::optional<double> scales[] = {std::nullopt, 0.375, 0.3, -0.5, 0.0};
  p.scale = scales[d.scale];
  std::mt19937_64 random(d.seed);
  std::normal_distribution<double> normal(0.0, d.spread);
  const auto fill = [&](std::vector<double>& v, std::size_t n) {
    v.resize(n);
    for (double& x : v) x = round_to(dtype, normal(random));
  };
  fill(p.query, p.batch * p.q_heads * p.L * p.E);
  fill(p.key, p.batch * p.kv_heads * p.S * p.E);
  fill(p.value, p.batch * p.kv_heads * p.S * p.Ev);
  if (d.key_lengths) {
    for (std::size_t b = 0; b < p.batch; ++b) p.key_lengths.push_back(random() % (p.S + 1));
  }
  p.mask_kind = d.mask_kind;
  if (d.mask_kind != TensorMask::none) {
    const std::vector<std::size_t> shapes[] = {
        {p.L, p.S}, {1, p.S}, {p.batch, 1, p.L, p.S}, {p.q_heads, p.L, p.S}, {p.batch, p.q_heads, p.L, p.S}};
    p.mask_shape = shapes[d.mask_broadcast];
    std::size_t count = 1;
    for (std::size_t dim : p.mask_shape) count *= dim;
    std::uniform_int_distribution<int> die(0, 99);
    const bool sparse = die(random) < 20;  // now and then most keys are out, rows empty
    for (std::size_t k = 0; k < count; ++k) {
      const bool in = die(random) >= (sparse ? 90 : 25);
      if (d.mask_kind == TensorMask::boolean)
        p.mask.push_back(in ? 1 : 0);
      else
        p.mask.push_back(in ? round_to(dtype, static_cast<double>(die(random) - 50) / 8)
                            : -std::numeric_limits<double>::infinity());
    }
  }
  return p;
}

std::vector<SimdLevel> supported_levels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel level : {SimdLevel::baseline, SimdLevel::avx2, SimdLevel::avx512})
    if (simd_level_supported(level)) levels.push_back(level);
  return levels;
}

const char* level_name(SimdLevel level) {
  return level == SimdLevel::avx512 ? "avx512" : level == SimdLevel::avx2 ? "avx2" : "baseline";
}

// The property: at every SIMD level, with the drawn tiles, flash_attention in T is certified within
// the band of `profile`, and 2 threads give the bits of 1.
template <class T> void certified_at_every_level(DType dtype, const char* profile) {
  const Draw d = *draws();
  const FlashRun tiles{*rc::gen::inRange<std::size_t>(1, 41), *rc::gen::inRange<std::size_t>(1, 81)};
  TensorProblem p = make_problem(d, dtype);
  // FlashAttention's sliding window: none, either side bounded, or both (sides 0 to 40, so that
  // whole key tiles fall outside it and are skipped).
  const int window = *rc::gen::inRange(0, 4);
  if (window & 1) p.window_left = *rc::gen::inRange<std::int64_t>(0, 41);
  if (window & 2) p.window_right = *rc::gen::inRange<std::int64_t>(0, 41);
  // ALiBi (not with a float mask): slopes 2^-k, per head or per (item, head).
  if (p.mask_kind != TensorMask::additive && *rc::gen::inRange(0, 3) == 0) {
    const std::size_t count = *rc::gen::element(p.q_heads, p.batch * p.q_heads);
    for (std::size_t n = 0; n < count; ++n) p.alibi_slopes.push_back(std::ldexp(1.0, -*rc::gen::inRange(0, 9)));
  }
  // Softcap: c from 2^-3 (almost every score capped hard) to 50 (Gemma 2's; barely bent). Sinks:
  // one fp32 logit per head, below, among and above the scores.
  if (*rc::gen::inRange(0, 3) == 0) p.softcap = *rc::gen::element(0.125, 1.0, 3.0, 50.0);
  if (*rc::gen::inRange(0, 3) == 0) {
    std::mt19937_64 random(d.seed ^ 0x5151);
    std::uniform_real_distribution<double> logit(-8, 8);
    for (std::size_t h = 0; h < p.q_heads; ++h) p.sinks.push_back(round_to(DType::fp32, logit(random)));
  }
  RC_ASSERT(validate(p).ok());
  CertifyOptions options;
  options.arithmetic = *arithmetic_profile(profile);
  // The kernel's exp is documented within kKernelExpUlps (2; measured 1.16 ulps in fp64), the fp64
  // profile assumes 1 ulp: the band is widened to what the kernel promises, never beyond.
  options.arithmetic.exp_ulps = std::max(options.arithmetic.exp_ulps, kKernelExpUlps);
  options.rows = 48;  // a seeded sample, plus the first, last and every empty row; cheap checks on all
  options.seed = d.seed;
  options.threads = 1;
  for (SimdLevel level : supported_levels()) {
    FlashRun run = tiles;
    run.simd = level;
    KernelStatus status = KernelStatus::ok;
    const std::vector<double> one = run_flash<T>(p, run, &status);
    RC_ASSERT(status == KernelStatus::ok);
    run.threads = 2;
    const std::vector<double> two = run_flash<T>(p, run);
    RC_ASSERT(std::memcmp(one.data(), two.data(), one.size() * sizeof(double)) == 0);  // widened from T: bitwise
    const TensorReport report = certify_tensor(p, one, options);
    if (!report.passed) {
      RC_FAIL(std::string(level_name(level)) + ", query tile " + std::to_string(tiles.query_tile) + ", key tile " +
              std::to_string(tiles.key_tile) + ": " + report.summary());
    }
  }
}

RC_GTEST_PROP(TensorFlash, Fp32CertifiedAtEverySimdLevelAndThreadCount, ()) {
  certified_at_every_level<float>(DType::fp32, "fp32");
}

RC_GTEST_PROP(TensorFlash, Fp64CertifiedAtEverySimdLevelAndThreadCount, ()) {
  certified_at_every_level<double>(DType::fp64, "fp64");
}

// Packed variable-length batches: B sequences of (n_b, m_b) queries and keys, packed [total, H, d]
// and run once with cu_seqlens, certified against the padded problem that means the same thing.
// The padding is right-aligned (sequence b's queries at rows L - n_b.., its keys at S - m_b..), so
// the bottom-right offset i + S - L - j of a padded pair is the sequence's own i' + m_b - n_b - j':
// bottom-right causal, the window and ALiBi's distances carry over unchanged, and a boolean mask
// [B, 1, L, S] admits exactly a sequence's own keys to its own queries (padding rows: none, so
// their expected output is +0). Each sequence run alone gives the same bits as the packed call.
template <class T> void varlen_certified(DType dtype, const char* profile) {
  const std::size_t batch = *rc::gen::inRange<std::size_t>(1, 5), kv_heads = *rc::gen::inRange<std::size_t>(1, 3);
  const std::size_t q_heads = kv_heads * *rc::gen::inRange<std::size_t>(1, 4);
  const std::size_t E = *rc::gen::inRange<std::size_t>(1, 17), Ev = *rc::gen::inRange<std::size_t>(1, 13);
  const auto n = *rc::gen::container<std::vector<std::size_t>>(batch, rc::gen::inRange<std::size_t>(0, 31));
  const auto m = *rc::gen::container<std::vector<std::size_t>>(batch, rc::gen::inRange<std::size_t>(0, 61));
  const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
  const FlashRun tiles{*rc::gen::inRange<std::size_t>(1, 41), *rc::gen::inRange<std::size_t>(1, 81)};
  std::vector<std::size_t> cu_q{0}, cu_k{0};
  for (std::size_t b = 0; b < batch; ++b) cu_q.push_back(cu_q.back() + n[b]), cu_k.push_back(cu_k.back() + m[b]);
  TensorProblem p;
  p.batch = batch, p.q_heads = q_heads, p.kv_heads = kv_heads, p.E = E, p.Ev = Ev, p.dtype = dtype;
  p.L = std::max<std::size_t>(1, *std::max_element(n.begin(), n.end()));
  p.S = std::max<std::size_t>(1, *std::max_element(m.begin(), m.end()));
  p.layout = AxisOrder::batch_seq_head;
  p.causal = *rc::gen::element(Causal::none, Causal::bottom_right);
  const int window = *rc::gen::inRange(0, 4);
  if (window & 1) p.window_left = *rc::gen::inRange<std::int64_t>(0, 41);
  if (window & 2) p.window_right = *rc::gen::inRange<std::int64_t>(0, 41);
  if (*rc::gen::inRange(0, 2) == 0) {
    const std::size_t count = *rc::gen::element(q_heads, batch * q_heads);
    for (std::size_t k = 0; k < count; ++k) p.alibi_slopes.push_back(std::ldexp(1.0, -*rc::gen::inRange(0, 9)));
  }
  if (*rc::gen::inRange(0, 3) == 0) p.softcap = *rc::gen::element(0.125, 1.0, 3.0, 50.0);
  std::mt19937_64 random(seed);
  std::normal_distribution<double> normal;
  if (*rc::gen::inRange(0, 3) == 0) {
    std::uniform_real_distribution<double> logit(-8, 8);
    for (std::size_t h = 0; h < q_heads; ++h) p.sinks.push_back(round_to(DType::fp32, logit(random)));
  }
  RC_TAG(p.causal == Causal::bottom_right ? "causal" : "", window ? "window" : "", p.alibi_slopes.empty() ? "" : "alibi");
  // Packed inputs, then the padded problem holding the same rows at the right-aligned places.
  const auto draw = [&](std::size_t count) {
    std::vector<T> v(count);
    for (T& x : v) x = static_cast<T>(round_to(dtype, normal(random)));
    return v;
  };
  const std::vector<T> Q = draw(cu_q.back() * q_heads * E), K = draw(cu_k.back() * kv_heads * E),
                       V = draw(cu_k.back() * kv_heads * Ev);
  p.query.assign(batch * p.L * q_heads * E, 0.0);
  p.key.assign(batch * p.S * kv_heads * E, 0.0);
  p.value.assign(batch * p.S * kv_heads * Ev, 0.0);
  const auto place = [](const std::vector<T>& packed, std::vector<double>& padded, std::size_t width,
                        std::size_t rows, const std::vector<std::size_t>& cu) {  // width: heads·d per row
    for (std::size_t b = 0; b + 1 < cu.size(); ++b)
      for (std::size_t r = cu[b]; r < cu[b + 1]; ++r)
        std::copy_n(packed.begin() + r * width, width,
                    padded.begin() + (b * rows + rows - (cu[b + 1] - cu[b]) + r - cu[b]) * width);
  };
  place(Q, p.query, q_heads * E, p.L, cu_q);
  place(K, p.key, kv_heads * E, p.S, cu_k);
  place(V, p.value, kv_heads * Ev, p.S, cu_k);
  p.mask_kind = TensorMask::boolean;
  p.mask_shape = {batch, 1, p.L, p.S};
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < p.L; ++i)
      for (std::size_t j = 0; j < p.S; ++j) p.mask.push_back(i + n[b] >= p.L && j + m[b] >= p.S ? 1 : 0);
  RC_ASSERT(validate(p).ok());

  FlashOptions options;
  options.layout = TensorLayout::batch_seq_head;
  options.causal = p.causal == Causal::bottom_right ? CausalAlignment::bottom_right : CausalAlignment::none;
  options.window_left = p.window_left, options.window_right = p.window_right;
  options.alibi_slopes = p.alibi_slopes, options.softcap = p.softcap, options.sinks = p.sinks;
  options.scale = static_cast<double>(T(1) / std::sqrt(static_cast<T>(E)));
  p.scale = *options.scale;
  options.query_tile = tiles.query_tile, options.key_tile = tiles.key_tile;
  options.cu_seqlens_q = cu_q, options.cu_seqlens_k = cu_k;
  const FlashShape shape{batch, q_heads, kv_heads, p.L, p.S, E, Ev};
  CertifyOptions certify;
  certify.arithmetic = *arithmetic_profile(profile);
  certify.arithmetic.exp_ulps = std::max(certify.arithmetic.exp_ulps, kKernelExpUlps);
  certify.rows = 48, certify.seed = seed, certify.threads = 1;
  for (SimdLevel level : supported_levels()) {
    options.simd = level;
    std::vector<T> out(cu_q.back() * q_heads * Ev, T(-7));
    RC_ASSERT(flash_attention(shape, std::span<const T>(Q), K, V, out, options) == KernelStatus::ok);
    // Each sequence alone, unpacked: the same bits.
    for (std::size_t b = 0; b < batch; ++b) {
      FlashOptions alone = options;
      alone.cu_seqlens_q = {}, alone.cu_seqlens_k = {};
      if (alone.alibi_slopes.size() == batch * q_heads) alone.alibi_slopes = std::span(p.alibi_slopes).subspan(b * q_heads, q_heads);
      const FlashShape one{1, q_heads, kv_heads, n[b], m[b], E, Ev};
      std::vector<T> single(n[b] * q_heads * Ev, T(-7));
      RC_ASSERT(flash_attention(one, std::span<const T>(Q).subspan(cu_q[b] * q_heads * E, n[b] * q_heads * E),
                                std::span<const T>(K).subspan(cu_k[b] * kv_heads * E, m[b] * kv_heads * E),
                                std::span<const T>(V).subspan(cu_k[b] * kv_heads * Ev, m[b] * kv_heads * Ev), single,
                                alone) == KernelStatus::ok);
      RC_ASSERT(std::equal(single.begin(), single.end(), out.begin() + cu_q[b] * q_heads * Ev,
                           [](T x, T y) { return std::memcmp(&x, &y, sizeof(T)) == 0; }));
    }
    std::vector<double> padded(batch * p.L * q_heads * Ev, 0.0);
    place(out, padded, q_heads * Ev, p.L, cu_q);
    const TensorReport report = certify_tensor(p, padded, certify);
    if (!report.passed) {
      RC_FAIL(std::string(level_name(level)) + ", query tile " + std::to_string(tiles.query_tile) + ", key tile " +
              std::to_string(tiles.key_tile) + ": " + report.summary());
    }
  }
}

RC_GTEST_PROP(TensorFlash, Fp32PackedVarlenCertifiedAndEqualToEachSequenceAlone, ()) {
  varlen_certified<float>(DType::fp32, "fp32");
}

RC_GTEST_PROP(TensorFlash, Fp64PackedVarlenCertifiedAndEqualToEachSequenceAlone, ()) {
  varlen_certified<double>(DType::fp64, "fp64");
}

}  // namespace
}  // namespace attn::verify
