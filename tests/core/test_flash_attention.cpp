// The fast kernel against the simple double kernel (masked_multihead_attention), with tolerances
// from flash_error_bound; its structural guarantees (tile sizes, threads, layouts, masks); its exp
// against the C library; and the oracle on sampled rows of a long sequence.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention.hpp"
#include "flash_attention.hpp"
#include "flash_test_support.hpp"
#include "judge/oracle.hpp"

namespace attn {
namespace {

using namespace flash_test;

// ---- The exp of the inner loop.

template <class T> double max_exp_ulps(SimdLevel level) {
  // fp32: 2^20 evenly spaced points over the whole finite range; fp64: the same count, checked
  // against the x87 extended-precision expl (64-bit significand, about 11 more bits than double).
  using C = std::numeric_limits<T>;
  const T lowest = sizeof(T) == 4 ? T(-87.33) : T(-708.3);
  const std::size_t count = 1u << 20;
  std::vector<T> x(count);
  for (std::size_t i = 0; i < count; ++i) x[i] = lowest * static_cast<T>(i) / static_cast<T>(count - 1);
  // Then 4096 consecutive values from the bottom of the range up, where 2^n is the smallest
  // normal and the table-driven exp (AVX-512) has its least n and j = 0.
  const T bottom = sizeof(T) == 4 ? T(-87.33654f) : T(-708.39);  // the kernel's flush point
  for (T v = bottom; x.size() < count + 4096; v = std::nextafter(v, T(0))) x.push_back(v);
  std::vector<T> e(x.size());
  EXPECT_EQ(kernel_exp(std::span<const T>(x), std::span<T>(e), level), KernelStatus::ok);
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const long double exact = std::exp(static_cast<long double>(x[i]));
    const long double ulp = std::ldexp(1.0L, std::ilogb(static_cast<T>(exact)) - (C::digits - 1));
    worst = std::max(worst, static_cast<double>(std::fabs(e[i] - exact) / ulp));
  }
  return worst;
}

TEST(KernelExp, WithinDocumentedUlpsOnTheWholeRange) {
  for (SimdLevel level : supported_levels()) {
    EXPECT_LE(max_exp_ulps<float>(level), kKernelExpUlps) << level_name(level);
    EXPECT_LE(max_exp_ulps<double>(level), kKernelExpUlps) << level_name(level);
  }
}

// ---- The softcap's tanh: |error| <= kKernelTanhUlps·u·|tanh x| + (kKernelExpUlps + 0.08)·u, checked
// against the x87 tanhl on 2^20 evenly spaced points of [-20, 20], a geometric sweep from the
// smallest normal to 10^4 of both signs, ln2/4 (where 1 - t stops being exact) and the specials.
// |t - tanh x| over that bound, for the kernel's t at x.
template <class T> double tanh_excess(T x, T t) {
  const long double u = std::ldexp(1.0L, -std::numeric_limits<T>::digits);
  const long double exact = std::tanh(static_cast<long double>(x));
  const long double bound = kKernelTanhUlps * u * std::fabs(exact) + (kKernelExpUlps + 0.08) * u;
  return static_cast<double>(std::fabs(t - exact) / bound);
}

// fp32 on 0 < |x| <= 1: the bound is relative only (kKernelTanhNearZeroUlps): |t - tanh x| over it.
double tanh_near_zero_excess(float x, float t) {
  const long double u = std::ldexp(1.0L, -std::numeric_limits<float>::digits);
  const long double exact = std::tanh(static_cast<long double>(x));
  return static_cast<double>(std::fabs(t - exact) / (kKernelTanhNearZeroUlps * u * std::fabs(exact)));
}

struct TanhExcess {
  double everywhere = 0, near_zero = 0;  // the largest |error| / bound, and on 0 < |x| <= 1 (fp32)
};

template <class T> TanhExcess worst_tanh_excess(SimdLevel level) {
  using C = std::numeric_limits<T>;
  std::vector<T> x = {T(0), -T(0), C::infinity(), -C::infinity(), C::max(), -C::max(), T(0.1732868), T(-0.1732868)};
  const std::size_t count = 1u << 20;
  for (std::size_t i = 0; i < count; ++i) x.push_back(T(-20) + T(40) * static_cast<T>(i) / static_cast<T>(count - 1));
  for (T v = C::min(); v < T(1e4); v *= T(1.01)) x.push_back(v), x.push_back(-v);
  std::vector<T> t(x.size());
  EXPECT_EQ(kernel_tanh(std::span<const T>(x), std::span<T>(t), level), KernelStatus::ok);
  TanhExcess worst;
  for (std::size_t i = 0; i < x.size(); ++i) {
    worst.everywhere = std::max(worst.everywhere, tanh_excess(x[i], t[i]));
    if constexpr (std::is_same_v<T, float>)
      if (x[i] != 0 && std::fabs(x[i]) <= 1)
        worst.near_zero = std::max(worst.near_zero, tanh_near_zero_excess(x[i], t[i]));
    if (std::signbit(t[i]) != std::signbit(x[i])) ADD_FAILURE() << "tanh(" << x[i] << ") = " << t[i];
  }
  return worst;
}

TEST(KernelTanh, WithinDocumentedBoundEverywhere) {
  for (SimdLevel level : supported_levels()) {
    const TanhExcess f = worst_tanh_excess<float>(level), d = worst_tanh_excess<double>(level);
    EXPECT_LE(f.everywhere, 1.0) << level_name(level);
    EXPECT_LE(d.everywhere, 1.0) << level_name(level);
    EXPECT_LE(f.near_zero, 1.0) << level_name(level);
    std::printf("KernelTanh %s: sampled, within %.3f (fp32) and %.3f (fp64) of the bound; fp32 on |x| <= 1 within "
                "%.3f of the relative bound\n",
                level_name(level), f.everywhere, d.everywhere, f.near_zero);
  }
}

// Every fp32 x in [1/32, 12] at each SIMD level, against the same bound: where tanh's relative
// and absolute parts meet, through t = e^-2x's clamp at 2x = 18 and past where tanh rounds to 1
// (x = 9.01), the bound is checked, not sampled (63 million inputs, a few seconds per level).
// Below 1/32 the absolute part of the bound dwarfs tanh itself (2.08u against |tanh x| < 1/32)
// and the sweep above samples it; tanh is odd by construction (the sign is set aside).
TEST(KernelTanh, EveryFp32FromOneThirtySecondToTwelveWithinBound) {
  const std::uint32_t first = std::bit_cast<std::uint32_t>(1.0f / 32), last = std::bit_cast<std::uint32_t>(12.0f);
  constexpr std::uint32_t kChunk = 1u << 20;
  std::vector<float> x(kChunk), t(kChunk);
  for (SimdLevel level : supported_levels()) {
    double worst = 0, worst_near_zero = 0;
    float worst_x = 0, worst_near_zero_x = 0;
    for (std::uint32_t begin = first; begin <= last; begin += kChunk) {
      const std::uint32_t count = std::min(kChunk, last - begin + 1);
      for (std::uint32_t i = 0; i < count; ++i) x[i] = std::bit_cast<float>(begin + i);
      ASSERT_EQ(kernel_tanh(std::span<const float>(x.data(), count), std::span<float>(t.data(), count), level),
                KernelStatus::ok);
      for (std::uint32_t i = 0; i < count; ++i) {
        const double excess = tanh_excess(x[i], t[i]);
        if (excess > worst) worst = excess, worst_x = x[i];
        if (x[i] <= 1) {
          const double relative = tanh_near_zero_excess(x[i], t[i]);
          if (relative > worst_near_zero) worst_near_zero = relative, worst_near_zero_x = x[i];
        }
      }
    }
    EXPECT_LE(worst, 1.0) << level_name(level) << ": worst at x = " << worst_x;
    EXPECT_LE(worst_near_zero, 1.0) << level_name(level) << ": worst at x = " << worst_near_zero_x;
    std::printf("KernelTanh %s: every fp32 in [1/32, 12] within %.3f of the bound (worst at x = %.9g); in [1/32, 1] "
                "within %.3f of the relative bound (%.2fu, worst at x = %.9g)\n",
                level_name(level), worst, static_cast<double>(worst_x), worst_near_zero,
                worst_near_zero * kKernelTanhNearZeroUlps, static_cast<double>(worst_near_zero_x));
  }
}

// Each lane's tanh depends on its own x alone: within the cap fp32 takes the polynomial and beyond
// it the exp path, and a vector holding both kinds must give each lane what it gets in a vector of
// its own kind (kernel_tanh of that one element, its other lanes zero). Values within and beyond
// the cap are mixed at random, with the specials; fp64 (the exp path everywhere) alike.
template <class T> void expect_lanes_independent(SimdLevel level, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<T> within(T(-1), T(1)), beyond(T(1), T(30));
  std::bernoulli_distribution far(0.2), negative(0.5);
  using C = std::numeric_limits<T>;
  std::vector<T> x = {T(1), -T(1), std::nextafter(T(1), T(2)), C::infinity(), T(-0.0), C::denorm_min(), T(1e-30)};
  while (x.size() < 4096) x.push_back(far(rng) ? (negative(rng) ? -beyond(rng) : beyond(rng)) : within(rng));
  std::vector<T> together(x.size());
  ASSERT_EQ(kernel_tanh(std::span<const T>(x), std::span<T>(together), level), KernelStatus::ok);
  for (std::size_t i = 0; i < x.size(); ++i) {
    T alone = 0;
    ASSERT_EQ(kernel_tanh(std::span<const T>(&x[i], 1), std::span<T>(&alone, 1), level), KernelStatus::ok);
    using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    ASSERT_EQ(std::bit_cast<Bits>(alone), std::bit_cast<Bits>(together[i]))
        << level_name(level) << ", seed " << seed << ": tanh(" << x[i] << ") = " << together[i]
        << " among its neighbours, " << alone << " alone";
  }
}

TEST(KernelTanh, EachLaneDependsOnItsOwnInputAlone) {
  for (SimdLevel level : supported_levels())
    for (std::uint64_t seed : {1, 2, 3}) {  // fixed: every run checks the same inputs
      expect_lanes_independent<float>(level, seed);
      expect_lanes_independent<double>(level, seed);
    }
}

TEST(KernelExp, ZeroIsOneAndBelowTheRangeIsPlusZero) {
  const std::vector<float> xf = {0.0f, -0.0f, -87.4f, -1e30f, -std::numeric_limits<float>::infinity()};
  const std::vector<double> xd = {0.0, -0.0, -708.5, -1e300, -std::numeric_limits<double>::infinity()};
  for (SimdLevel level : supported_levels()) {
    std::vector<float> ef(xf.size());
    std::vector<double> ed(xd.size());
    ASSERT_EQ(kernel_exp(std::span<const float>(xf), std::span<float>(ef), level), KernelStatus::ok);
    ASSERT_EQ(kernel_exp(std::span<const double>(xd), std::span<double>(ed), level), KernelStatus::ok);
    EXPECT_EQ(ef[0], 1.0f);
    EXPECT_EQ(ef[1], 1.0f);
    EXPECT_EQ(ed[0], 1.0);
    EXPECT_EQ(ed[1], 1.0);
    for (std::size_t i = 2; i < xf.size(); ++i) {
      EXPECT_EQ(ef[i], 0.0f);
      EXPECT_FALSE(std::signbit(ef[i]));
      EXPECT_EQ(ed[i], 0.0);
      EXPECT_FALSE(std::signbit(ed[i]));
    }
  }
}

// ---- Against the simple double kernel.

TEST(KernelExp, RefusesMismatchedSizesAndMissingLevelsWithoutWriting) {
  const std::vector<float> x = {-1.0f, -2.0f};
  std::vector<float> out = {7.0f};
  EXPECT_EQ(kernel_exp(std::span<const float>(x), std::span<float>(out)), KernelStatus::size_mismatch);
  EXPECT_EQ(out[0], 7.0f);
  for (SimdLevel level : {SimdLevel::avx2, SimdLevel::avx512}) {
    std::vector<double> xd = {-1.0}, od = {7.0};
    const KernelStatus status = kernel_exp(std::span<const double>(xd), std::span<double>(od), level);
    EXPECT_EQ(status, simd_level_supported(level) ? KernelStatus::ok : KernelStatus::simd_unsupported);
    if (!simd_level_supported(level)) {
      EXPECT_EQ(od[0], 7.0);
    }
  }
}

TEST(FlashAttention, MatchesSimpleKernelEveryLayoutMaskAndPrecision) {
  for (TensorLayout layout : {TensorLayout::batch_head_seq, TensorLayout::batch_seq_head})
    for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::explicit_mask}) {
      Case c = random_case({2, 3, 37, 37, 16, 8}, mask, /*seed=*/11);
      c.options.layout = layout;
      c.options.key_tile = 16;
      c.options.query_tile = 8;
      expect_within_bound<float>(c);
      expect_within_bound<double>(c);
    }
}

TEST(FlashAttention, CrossAttentionMoreAndFewerKeysThanQueries) {
  for (auto [n, m] : {std::pair<std::size_t, std::size_t>{9, 70}, {70, 9}, {1, 1}, {33, 1}})
    for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::explicit_mask}) {
      Case c = random_case({2, 2, n, m, 12, 20}, mask, /*seed=*/n * 100 + m);
      c.options.key_tile = 32;
      expect_within_bound<float>(c);
      expect_within_bound<double>(c);
    }
}

TEST(FlashAttention, KeyPaddingLengthsPerBatchItem) {
  for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::explicit_mask}) {
    Case c = random_case({4, 2, 30, 45, 8, 8}, mask, /*seed=*/5);
    c.key_lengths = {45, 1, 17, 32};
    c.options.key_tile = 16;
    expect_within_bound<float>(c);
    expect_within_bound<double>(c);
  }
}

TEST(FlashAttention, ResultsIndependentOfTileSizesWithinTheBound) {
  const Case base = random_case({1, 2, 50, 90, 16, 16}, MaskKind::causal, /*seed=*/3);
  const Reference reference = reference_of(base);
  for (std::size_t key_tile : {1, 7, 16, 64, 200})
    for (std::size_t query_tile : {1, 5, 64}) {
      Case c = base;
      c.options.key_tile = key_tile;
      c.options.query_tile = query_tile;
      // Each run lies within its bound of the exact result, so two runs differ by at most the
      // sum of their bounds (the reference's own error is far below either).
      expect_within_bound<float>(c, reference);
      expect_within_bound<double>(c, reference);
    }
}

// The default query tile follows the thread count (flash_query_tile), so the result must not
// depend on the query tile at all: each row's key tiles end on the same grid whatever rows share
// its work item. Every option that changes which keys a row sees or what its scores are.
TEST(FlashAttention, QueryTileGivesIdenticalBits) {
  struct Variant {
    const char* name;
    MaskKind mask;
    CausalAlignment alignment;
    long window_left;
    double softcap;
    bool alibi, sinks, key_lengths;
  };
  const Variant variants[] = {{"causal bottom-right", MaskKind::causal, CausalAlignment::bottom_right, -1, 0, false, false, false},
                              {"window 100", MaskKind::none, CausalAlignment::top_left, 100, 0, false, false, false},
                              {"softcap, ALiBi", MaskKind::none, CausalAlignment::top_left, -1, 5, true, false, false},
                              {"sinks, key lengths, causal", MaskKind::causal, CausalAlignment::top_left, -1, 0, false, true, true}};
  const std::vector<double> per_head = {0.25, 1.5};
  for (const Variant& v : variants) {
    // 1 thread: the default tile holds all 600 rows; 2 threads: 512 (too few work items for more);
    // under the window, 128 rows on either.
    Case c = random_case({2, 2, 600, 640, 8, 8}, v.mask, /*seed=*/21);
    // Key tiles of 64, narrower than the window and the query tiles: rows cross tile ends, and
    // where those ends lie would show in the bits (mutant flash-key-tiles-off-grid).
    c.options.key_tile = 64;
    c.alignment = v.alignment;
    c.options.window_left = v.window_left, c.options.window_right = v.window_left < 0 ? -1 : 0;
    c.options.softcap = v.softcap;
    if (v.alibi) c.options.alibi_slopes = per_head;
    if (v.sinks) c.options.sinks = per_head;
    if (v.key_lengths) c.key_lengths = {640, 333};
    ASSERT_NE(flash_query_tile(c.shape, c.options, sizeof(float)), 512u) << v.name;
    for (SimdLevel level : supported_levels()) {
      c.options.simd = level;
      c.options.threads = 1, c.options.query_tile.reset();
      const std::vector<float> whole32 = run_fast<float>(c);
      const std::vector<double> whole64 = run_fast<double>(c);
      for (std::size_t tile : {0, 7, 64}) {
        c.options.threads = tile == 0 ? 2 : 1;
        if (tile == 0) c.options.query_tile.reset(); else c.options.query_tile = tile;
        const std::vector<float> tiled32 = run_fast<float>(c);
        const std::vector<double> tiled64 = run_fast<double>(c);
        EXPECT_EQ(std::memcmp(whole32.data(), tiled32.data(), whole32.size() * sizeof(float)), 0)
            << v.name << ", " << level_name(level) << ", query tile " << tile << " (0: the 2-thread default)";
        EXPECT_EQ(std::memcmp(whole64.data(), tiled64.data(), whole64.size() * sizeof(double)), 0)
            << v.name << ", " << level_name(level) << ", query tile " << tile << " (0: the 2-thread default)";
      }
    }
  }
}

TEST(FlashAttention, DefaultQueryTileGrowsWithinItsAccumulatorsAndThreads) {
  FlashShape shape{1, 8, 8, 8192, 8192, 64, 64};
  FlashOptions options;
  options.threads = 1;
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(float)), 2048u);   // 2048·64·4 = 512 KiB
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(double)), 2048u);  // 1 MiB
  shape.head_dim_v = 128;
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(double)), 1024u);  // 2048 rows would take 2 MiB
  shape.head_dim_v = 1024;
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(double)), 512u);   // never fewer than 512
  shape.head_dim_v = 64, shape.n = 700;
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(float)), 1024u);  // the first size that holds n
  shape.n = 8192, options.threads = 2;  // 8 heads: 32 items of 2048 rows, 16 per thread
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(float)), 2048u);
  options.threads = 3;  // 48 wanted: 64 items of 1024 rows
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(float)), 1024u);
  shape.n = 2048;  // 48 wanted: 32 items of 512 rows
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(float)), 512u);
  options.window_left = 100;  // a window's rule first
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(float)), 128u);
  options.query_tile = 5;  // the caller's choice over both
  EXPECT_EQ(flash_query_tile(shape, options, sizeof(float)), 5u);
}

TEST(FlashAttention, ThreadCountGivesIdenticalBits) {
  Case c = random_case({2, 3, 70, 70, 16, 16}, MaskKind::causal, /*seed=*/8);
  c.options.query_tile = 16;
  const std::vector<float> one = run_fast<float>(c);
  for (unsigned threads : {2u, 3u, 0u}) {
    c.options.threads = threads;
    const std::vector<float> many = run_fast<float>(c);
    EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0) << threads;
  }
}

// The scratch a calling thread keeps between calls (kept_scratch): every call of a sequence that
// grows it, reuses it for smaller calls of another shape, mixes precisions and thread counts and
// passes the kept limit gives the bits it gives on a thread that never called the kernel. Earlier
// calls leave their own values in the reused buffer, so a part read before its call wrote it
// shows; `deep` then `long` reuse one buffer for parts of very different sizes (a layout kept
// from the call before puts long's accumulators over its row maxima).
template <class T> void expect_reuse_gives_fresh_bits(SimdLevel level) {
  using Other = std::conditional_t<sizeof(T) == 4, double, float>;
  const std::vector<double> sinks = {0.5, -1.0, 2.0};  // rows with no key: their acc is never written
  std::vector<Case> cases = {
      random_case({2, 3, 37, 29, 40, 24}, MaskKind::explicit_mask, /*seed=*/31),  // small, with sinks
      random_case({1, 2, 300, 530, 64, 72}, MaskKind::none, /*seed=*/32),          // wide, 2 threads
      random_case({1, 1, 8, 256, 256, 8}, MaskKind::none, /*seed=*/33),            // deep: long keys
      random_case({1, 1, 512, 8, 8, 64}, MaskKind::causal, /*seed=*/34),           // long: many rows
      random_case({1, 1, 9000, 8, 64, 64}, MaskKind::causal, /*seed=*/35),         // tall: > 4 MiB, freed after
  };
  cases[0].options.sinks = sinks;
  cases[1].options.threads = 2;
  cases[4].options.query_tile = 9000;
  for (Case& c : cases) c.options.simd = level;
  std::vector<std::vector<T>> fresh(cases.size());
  for (std::size_t k = 0; k < cases.size(); ++k) std::thread([&] { fresh[k] = run_fast<T>(cases[k]); }).join();
  std::thread([&] {  // a thread of its own, so that its first call's scratch is the first case's
    for (std::size_t k : {0, 1, 0, 2, 3, 0, 4, 3, 0}) {
      const std::vector<T> again = run_fast<T>(cases[k]);
      EXPECT_TRUE(again.size() == fresh[k].size() &&
                  std::memcmp(again.data(), fresh[k].data(), again.size() * sizeof(T)) == 0)
          << level_name(level) << (sizeof(T) == 4 ? " fp32" : " fp64") << ": case " << k;
      (void)run_fast<Other>(cases[k]);
    }
  }).join();
}

TEST(FlashAttention, ScratchKeptAcrossCallsGivesIdenticalBits) {
  for (SimdLevel level : supported_levels()) {
    expect_reuse_gives_fresh_bits<float>(level);
    expect_reuse_gives_fresh_bits<double>(level);
  }
}

// Rows that see no key but their sink (bottom-right causal with 20 queries and 4 keys: rows 0-15)
// output exactly +0: the sink carries no value. With 16-row query tiles the block of rows 16-19
// runs first on the one thread and leaves its sums in the scratch rows that rows 0-3 reuse; the
// kernel must not read them back for rows whose register tile no key reached.
TEST(FlashAttention, RowsThatSeeOnlyTheirSinkAreZero) {
  constexpr std::size_t n = 20, m = 4, d = 16;
  std::vector<double> Q(n * d), K(m * d), V(m * d);
  for (std::size_t i = 0; i < Q.size(); ++i) Q[i] = 0.25 * static_cast<double>(i % 7) - 0.5;
  for (std::size_t i = 0; i < K.size(); ++i) K[i] = 0.125 * static_cast<double>(i % 5);
  for (std::size_t i = 0; i < V.size(); ++i) V[i] = 1.0 + static_cast<double>(i % 3);  // nonzero: a leak shows
  const std::vector<double> sink = {0.5};
  FlashOptions options;
  options.causal = CausalAlignment::bottom_right, options.sinks = sink;
  options.query_tile = 16, options.threads = 1;
  for (SimdLevel level : supported_levels()) {
    options.simd = level;
    std::vector<double> out(n * d, -7.0);
    ASSERT_EQ(flash_attention({1, 1, 1, n, m, d, d}, std::span<const double>(Q), K, V, out, options), KernelStatus::ok);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < d; ++c) {
        const double x = out[i * d + c];
        if (i < n - m) {
          EXPECT_TRUE(x == 0 && !std::signbit(x))
              << level_name(level) << ": row " << i << " column " << c << " = " << x;
        } else {
          EXPECT_TRUE(x > 0 && x < 3) << level_name(level) << ": row " << i << " column " << c << " = " << x;
        }
      }
  }
}

TEST(FlashAttention, LayoutsGiveIdenticalBitsAfterPermutation) {
  // Each (batch, head, row) is computed the same way in either layout; only the strides differ.
  Case c = random_case({2, 3, 20, 25, 8, 4}, MaskKind::explicit_mask, /*seed=*/4);
  const std::vector<double> seq_head = run_fast<double>(c);
  c.options.layout = TensorLayout::batch_head_seq;
  EXPECT_EQ(seq_head, run_fast<double>(c));  // run_fast permutes inputs and output back
}

TEST(FlashAttention, EverySimdLevelWithinTheBound) {
  Case c = random_case({1, 2, 40, 40, 16, 16}, MaskKind::none, /*seed=*/21);
  for (SimdLevel level : supported_levels()) {
    c.options.simd = level;
    expect_within_bound<float>(c);
    expect_within_bound<double>(c);
  }
}

// The key tile is transposed in W x W register blocks (fp32), the keys and dimensions past the last
// whole block one by one: head dims and key counts that are not multiples of 16 (one block and a
// remainder, two blocks and a remainder) at every level and several key tiles.
TEST(FlashAttention, PartialTransposeBlocksWithinTheBound) {
  for (const std::size_t head_dim : {21, 37}) {
    Case c = random_case({1, 2, 9, 45, head_dim, 5}, MaskKind::none, /*seed=*/head_dim);
    for (const std::size_t key_tile : {16, 40, 64})
      for (SimdLevel level : supported_levels()) {
        c.options.simd = level, c.options.key_tile = key_tile;
        expect_within_bound<float>(c);
        expect_within_bound<double>(c);
      }
  }
}

// ---- Every SIMD level with several key tiles per row. A key tile is rounded up to the level's
// register tile (2 vectors: 8 / 16 / 32 fp32 keys for SSE2 / AVX2 / AVX-512, half as many fp64),
// so rows of more than 32 keys cross a tile boundary at every level and run the online merge.

class EverySimdLevel : public testing::TestWithParam<SimdLevel> {};

TEST_P(EverySimdLevel, MultiTileRowsWithinTheBoundForEveryMaskAndPrecision) {
  const SimdLevel level = GetParam();
  if (!simd_level_supported(level)) GTEST_SKIP() << level_name(level) << " not run: this CPU lacks it";
  const bool passed = rc::check(std::string(level_name(level)) + ": multi-tile rows within the bound", [level] {
    constexpr std::size_t kWidestTile = 32;
    const std::size_t m = *rc::gen::inRange<std::size_t>(kWidestTile + 1, 3 * kWidestTile);
    const std::size_t n = *rc::gen::inRange<std::size_t>(1, m + 1);
    const auto mask = *rc::gen::element(MaskKind::none, MaskKind::causal, MaskKind::explicit_mask);
    const Sizes shape{*rc::gen::inRange<std::size_t>(1, 3),  *rc::gen::inRange<std::size_t>(1, 3), n, m,
                      *rc::gen::inRange<std::size_t>(1, 20), *rc::gen::inRange<std::size_t>(1, 20)};
    Case c = random_case(shape, mask, *rc::gen::arbitrary<std::uint32_t>());
    c.options.simd = level;
    c.alignment = *rc::gen::element(CausalAlignment::top_left, CausalAlignment::bottom_right);
    c.options.layout = *rc::gen::element(TensorLayout::batch_head_seq, TensorLayout::batch_seq_head);
    c.options.key_tile = *rc::gen::inRange<std::size_t>(1, kWidestTile + 1);
    c.options.query_tile = *rc::gen::inRange<std::size_t>(1, 30);
    c.options.threads = *rc::gen::inRange(1u, 3u);
    if (*rc::gen::arbitrary<bool>())  // key padding, alone or on top of the mask
      c.key_lengths =
          *rc::gen::container<std::vector<std::size_t>>(shape.batch, rc::gen::inRange<std::size_t>(0, m + 1));
    const Reference reference = reference_of(c);
    RC_ASSERT(count_outside_bound<float>(c, reference) == 0u);
    RC_ASSERT(count_outside_bound<double>(c, reference) == 0u);
  });
  EXPECT_TRUE(passed);
}

INSTANTIATE_TEST_SUITE_P(Simd, EverySimdLevel, testing::Values(SimdLevel::baseline, SimdLevel::avx2, SimdLevel::avx512),
                         [](const testing::TestParamInfo<SimdLevel>& info) { return level_name(info.param); });

// ---- The online merge step against two-pass softmax.

TEST(OnlineMerge, NewMaximumArrivesLate) {
  // Scores grow with j and jump by 40 in the last tile: every step rescales, the last by e^-40.
  Case c = random_case({1, 1, 4, 64, 2, 3}, MaskKind::none, /*seed=*/1);
  for (std::size_t j = 0; j < 64; ++j) c.K[j * 2] = static_cast<double>(j) / 8 + (j >= 60 ? 40 : 0), c.K[j * 2 + 1] = 0;
  for (std::size_t i = 0; i < 4; ++i) c.Q[i * 2] = 1, c.Q[i * 2 + 1] = 0;
  for (std::size_t key_tile : {1, 4, 16}) {
    c.options.key_tile = key_tile;
    expect_within_bound<float>(c);
    expect_within_bound<double>(c);
  }
}

TEST(OnlineMerge, AllScoresVeryNegative) {
  // q·k = -1e4 (fp32 exp underflows at -104): only the shift by the running max keeps the row finite.
  Case c = random_case({1, 1, 3, 40, 1, 2}, MaskKind::none, /*seed=*/2);
  for (std::size_t j = 0; j < 40; ++j) c.K[j] = -100 - static_cast<double>(j % 3);
  std::fill(c.Q.begin(), c.Q.end(), 100.0);
  c.options.key_tile = 8;
  const std::vector<float> out = run_fast<float>(c);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }));
  expect_within_bound<float>(c);
  expect_within_bound<double>(c);
}

TEST(OnlineMerge, FullyMaskedRowsAreExactlyPlusZero) {
  Case c = random_case({3, 2, 6, 10, 4, 5}, MaskKind::explicit_mask, /*seed=*/6);
  std::fill(c.mask.begin() + 2 * 10, c.mask.begin() + 3 * 10, 0);  // row 2 of item 0: nothing visible
  c.key_lengths = {10, 0, 10};                                     // item 1: no keys at all
  c.options.key_tile = 4;
  for (const std::vector<double>& out : {run_fast<double>(c), widen(run_fast<float>(c))}) {
    for (std::size_t i = 0; i < 6; ++i)
      for (std::size_t col = 0; col < 2 * 5; ++col) {
        const double item0 = out[(0 * 6 + i) * 10 + col], item1 = out[(1 * 6 + i) * 10 + col];
        EXPECT_TRUE(item1 == 0 && !std::signbit(item1));
        if (i == 2) {
          EXPECT_TRUE(item0 == 0 && !std::signbit(item0));
        }
      }
  }
  expect_within_bound<float>(c);
}

TEST(FlashAttention, RefusesInconsistentArguments) {
  Case c = random_case({1, 1, 4, 4, 2, 2}, MaskKind::explicit_mask, /*seed=*/0);
  std::vector<double> out(8);
  c.options.mask_bits = c.mask;
  auto status = [&](FlashOptions o, std::size_t q_size = 8) {
    return flash_attention(c.shape, std::span<const double>(c.Q).first(q_size), c.K, c.V, out, o);
  };
  FlashOptions o = c.options;
  EXPECT_EQ(status(o, 7), KernelStatus::size_mismatch);
  o.mask_bits = std::span(c.mask).first(15);
  EXPECT_EQ(status(o), KernelStatus::mask_size_mismatch);
  const std::vector<std::size_t> too_long = {5};  // m = 4
  o = c.options, o.key_lengths = too_long;
  EXPECT_EQ(status(o), KernelStatus::bad_key_lengths);
  o = c.options, o.window_left = -2;
  EXPECT_EQ(status(o), KernelStatus::bad_window);
  o = c.options, o.window_right = -3;
  EXPECT_EQ(status(o), KernelStatus::bad_window);
  o = c.options, o.scale_divisor = 0;
  EXPECT_EQ(status(o), KernelStatus::bad_scale_divisor);
  o = c.options, o.key_tile = 0;
  EXPECT_EQ(status(o), KernelStatus::bad_tile);
  o = c.options, o.scale = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(status(o), KernelStatus::bad_scale);
  o = c.options, o.scale = 0.0;  // a zero multiplier is PyTorch-legal: uniform weights
  EXPECT_EQ(status(o), KernelStatus::ok);
  const std::vector<float> Qf(8), Kf(8), Vf(8);
  std::vector<float> outf(8);
  o = c.options, o.scale = 1e300;  // finite in fp64, not in fp32
  EXPECT_EQ(flash_attention(c.shape, std::span<const float>(Qf), Kf, Vf, outf, o), KernelStatus::bad_scale);
  auto with_bias = [&](std::vector<double> bias) {
    return flash_attention(c.shape, std::span<const double>(c.Q), c.K, c.V, out, c.options, bias);
  };
  EXPECT_EQ(with_bias(std::vector<double>(16, 0.0)), KernelStatus::ok);
  EXPECT_EQ(with_bias(std::vector<double>(15, 0.0)), KernelStatus::mask_size_mismatch);
  std::vector<double> bias(16, -INFINITY);
  EXPECT_EQ(with_bias(bias), KernelStatus::ok);  // every key excluded: zero rows
  bias[3] = INFINITY;
  EXPECT_EQ(with_bias(bias), KernelStatus::bad_additive_mask);
  bias[3] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(with_bias(bias), KernelStatus::bad_additive_mask);
  for (auto [q_heads, kv_heads] : {std::pair<std::size_t, std::size_t>{1, 0}, {3, 2}}) {
    FlashShape shape = c.shape;
    shape.q_heads = q_heads, shape.kv_heads = kv_heads;
    EXPECT_EQ(flash_attention(shape, std::span<const double>(c.Q), c.K, c.V, out, c.options), KernelStatus::bad_heads);
  }
  o = c.options, o.softcap = -1;
  EXPECT_EQ(status(o), KernelStatus::bad_softcap);
  o.softcap = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(status(o), KernelStatus::bad_softcap);
  o.softcap = 1e300;  // finite in fp64, not in fp32
  EXPECT_EQ(flash_attention(c.shape, std::span<const float>(Qf), Kf, Vf, outf, o), KernelStatus::bad_softcap);
  const std::vector<double> two_sinks = {0.5, 1.0}, nan_sink = {std::numeric_limits<double>::quiet_NaN()},
                            one_sink = {0.5};
  o = c.options, o.sinks = two_sinks;  // one query head
  EXPECT_EQ(status(o), KernelStatus::bad_sinks);
  o.sinks = nan_sink;
  EXPECT_EQ(status(o), KernelStatus::bad_sinks);
  o.sinks = one_sink;
  EXPECT_EQ(status(o), KernelStatus::ok);
  // Packed sequences (one here: B = 1, n = m = 4): both offset lists, from 0, non-decreasing, no
  // sequence longer than n (m), the sequence-major layout, no mask or key lengths beside them.
  const std::vector<std::size_t> whole = {0, 4}, from_one = {1, 4}, too_many = {0, 2, 4}, longer = {0, 5};
  const std::vector<std::uint8_t> no_mask;
  FlashOptions packed = c.options;
  packed.mask_bits = no_mask, packed.layout = TensorLayout::batch_seq_head;
  packed.cu_seqlens_q = packed.cu_seqlens_k = whole;
  EXPECT_EQ(status(packed), KernelStatus::ok);
  for (const std::vector<std::size_t>* cu : {&from_one, &too_many, &longer}) {
    o = packed, o.cu_seqlens_q = *cu;
    EXPECT_EQ(status(o), KernelStatus::bad_varlen) << (*cu)[0] << " " << cu->size();
    o = packed, o.cu_seqlens_k = *cu;
    EXPECT_EQ(status(o), KernelStatus::bad_varlen);
  }
  o = packed, o.cu_seqlens_k = {};
  EXPECT_EQ(status(o), KernelStatus::bad_varlen);
  o = packed, o.layout = TensorLayout::batch_head_seq;
  EXPECT_EQ(status(o), KernelStatus::bad_varlen);
  o = packed, o.mask_bits = c.mask;
  EXPECT_EQ(status(o), KernelStatus::bad_varlen);
  o = packed, o.key_lengths = std::span(whole).subspan(1);
  EXPECT_EQ(status(o), KernelStatus::bad_varlen);
  EXPECT_EQ(flash_attention(c.shape, std::span<const double>(c.Q), c.K, c.V, out, packed, std::vector<double>(16, 0.0)),
            KernelStatus::bad_varlen);
  const std::vector<std::size_t> shorter = {0, 3};  // 3 query rows hold 6 values, not 8
  o = packed, o.cu_seqlens_q = shorter;
  EXPECT_EQ(status(o), KernelStatus::size_mismatch);
  EXPECT_EQ(status(o, 6), KernelStatus::size_mismatch);  // out still holds 4 rows
  o = c.options;
  EXPECT_EQ(status(o), KernelStatus::ok);
}

template <class T> void expect_zero_keys_give_positive_zero(SimdLevel level) {
  const FlashShape shape{2, 2, 2, 5, 0, 4, 3};  // five queries, no key at all
  const std::vector<T> Q(2 * 2 * 5 * 4, T(1));
  std::vector<T> out(2 * 2 * 5 * 3, T(-1));
  FlashOptions options;
  options.simd = level;
  for (CausalAlignment causal : {CausalAlignment::none, CausalAlignment::top_left, CausalAlignment::bottom_right}) {
    options.causal = causal;
    ASSERT_EQ(flash_attention(shape, std::span<const T>(Q), {}, {}, out, options), KernelStatus::ok);
    for (T x : out) EXPECT_TRUE(x == 0 && !std::signbit(x)) << level_name(level);
  }
}

TEST(FlashAttention, ZeroKeysGiveExactlyPositiveZeroRowsAtEveryLevel) {
  for (SimdLevel level : supported_levels()) {
    expect_zero_keys_give_positive_zero<float>(level);
    expect_zero_keys_give_positive_zero<double>(level);
  }
}

TEST(FlashAttention, ZeroQueriesAreOkAndWriteNothing) {
  const std::vector<float> K(1 * 1 * 6 * 4, 1.0f), V(1 * 1 * 6 * 2, 1.0f);
  for (SimdLevel level : supported_levels()) {
    FlashOptions options;
    options.simd = level;
    EXPECT_EQ(flash_attention({1, 1, 1, 0, 6, 4, 2}, std::span<const float>(), K, V, std::span<float>(), options),
              KernelStatus::ok);
  }
}

// ---- PyTorch's semantics: GQA, bottom-right causal, additive masks, the scale multiplier. Each
// is checked against the simple kernel's bound or, where the arithmetic is provably the same, as
// identical bits; tests/verify/tensor/test_tensor_flash.cpp certifies them against the oracle.

TEST(FlashSemantics, BottomRightCausalWithinTheBoundForEveryShape) {
  for (auto [n, m] : {std::pair<std::size_t, std::size_t>{9, 70}, {70, 9}, {37, 37}, {33, 1}}) {
    Case c = random_case({2, 2, n, m, 12, 20}, MaskKind::causal, /*seed=*/n * 10 + m);
    c.alignment = CausalAlignment::bottom_right;
    c.key_lengths = {m, m / 2};
    c.options.key_tile = 16, c.options.query_tile = 8;
    expect_within_bound<float>(c);
    expect_within_bound<double>(c);
  }
}

// Q, K, V of a Case in [B, H, n, d] as T, K and V given kv_heads heads (head h of a Case stands
// for itself; GQA reads kv head h / G, so the Case's K/V head g·G stands for kv head g).
template <class T> std::vector<T> head_major(const std::vector<double>& v, const FlashShape& s, std::size_t rows,
                                             std::size_t d, std::size_t heads, std::size_t stride) {
  const std::vector<double> laid = permute(v, s, rows, d, false);
  std::vector<T> out;
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t k = 0; k < rows * d; ++k)
        out.push_back(static_cast<T>(laid[((b * s.q_heads + h * stride) * rows) * d + k]));
  return out;
}

TEST(FlashSemantics, GroupedQueryAttentionEqualsRepeatedKeyValueHeads) {
  Case c = random_case({2, 6, 21, 34, 8, 5}, MaskKind::causal, /*seed=*/12);
  c.alignment = CausalAlignment::bottom_right;
  const std::size_t group = 3, kv_heads = 2;
  // The Case's K/V heads become copies of heads 0 and 3, so plain multi-head attention over them
  // is what GQA over kv heads {0, 3} must compute, bit for bit.
  for (auto* v : {&c.K, &c.V}) {
    const std::size_t d = v == &c.K ? 8 : 5;
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t j = 0; j < 34; ++j)
        for (std::size_t h = 0; h < 6; ++h)
          for (std::size_t k = 0; k < d; ++k)
            (*v)[((b * 34 + j) * 6 + h) * d + k] = (*v)[((b * 34 + j) * 6 + h / group * group) * d + k];
  }
  const std::vector<float> full = run_fast<float>(c);  // [B, n, H, dv]
  const std::vector<float> Q = head_major<float>(c.Q, c.shape, 21, 8, 6, 1);
  const std::vector<float> K = head_major<float>(c.K, c.shape, 34, 8, kv_heads, group);
  const std::vector<float> V = head_major<float>(c.V, c.shape, 34, 5, kv_heads, group);
  FlashShape gqa = c.shape;
  gqa.kv_heads = kv_heads;
  FlashOptions options;  // run_fast's options, but for the layout
  options.causal = CausalAlignment::bottom_right;
  options.scale_divisor = c.options.scale_divisor;
  std::vector<float> out(full.size());
  ASSERT_EQ(flash_attention(gqa, std::span<const float>(Q), K, V, out, options), KernelStatus::ok);
  EXPECT_EQ(permute(out, c.shape, 21, 5, true), full);
}

TEST(FlashSemantics, AdditiveZerosAndMinusInfinityEqualTheBooleanMask) {
  // With a power-of-two scale the scaled scores are exact, so shifting them by the max gives the
  // same bits as shifting the raw dot products: the additive path must agree exactly.
  Case c = random_case({2, 3, 19, 41, 8, 8}, MaskKind::explicit_mask, /*seed=*/13);
  c.options.scale_divisor = 4;
  c.options.key_tile = 16;
  const std::vector<double> with_bits = run_fast<double>(c);
  std::vector<double> bias(c.mask.size());
  for (std::size_t k = 0; k < bias.size(); ++k) bias[k] = c.mask[k] ? 0.0 : -INFINITY;
  // Per item and head ([B, H, n, m]): the [B, n, m] mask repeated over heads.
  std::vector<double> per_head;
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t h = 0; h < 3; ++h) per_head.insert(per_head.end(), &bias[b * 19 * 41], &bias[(b + 1) * 19 * 41]);
  const std::vector<double> Q = head_major<double>(c.Q, c.shape, 19, 8, 3, 1),
                            K = head_major<double>(c.K, c.shape, 41, 8, 3, 1),
                            V = head_major<double>(c.V, c.shape, 41, 8, 3, 1);
  FlashOptions options;
  options.scale = 0.25;
  options.key_tile = 16;
  for (const std::vector<double>* mask : {&bias, &per_head}) {
    std::vector<double> out(with_bits.size());
    ASSERT_EQ(flash_attention(c.shape, std::span<const double>(Q), K, V, out, options, *mask), KernelStatus::ok);
    EXPECT_EQ(permute(out, c.shape, 19, 8, true), with_bits);
  }
}

TEST(FlashSemantics, NegativeScaleEqualsNegatedKeys) {
  Case c = random_case({1, 2, 30, 50, 8, 4}, MaskKind::causal, /*seed=*/14);
  c.options.scale = 0.125;
  const std::vector<float> positive = run_fast<float>(c);
  for (double& k : c.K) k = -k;
  c.options.scale = -0.125;  // (-q·k)·(-1/8) = (q·k)/8, exactly, in every rounding
  EXPECT_EQ(run_fast<float>(c), positive);
}

TEST(FlashSemantics, ScaleMultiplierOfAPowerOfTwoEqualsTheDivisor) {
  Case c = random_case({2, 2, 25, 25, 16, 16}, MaskKind::none, /*seed=*/15);
  c.options.scale_divisor = 4;
  const std::vector<double> divided = run_fast<double>(c);
  c.options.scale = 0.25;
  c.options.scale_divisor = 1;  // ignored once scale is set
  EXPECT_EQ(run_fast<double>(c), divided);
}

// ---- Accuracy against a straightforward fp32 implementation (FlashAttention's criterion).

TEST(FlashAttention, Fp32ErrorAtMostTwiceStraightforwardFp32) {
  for (MaskKind mask : {MaskKind::none, MaskKind::causal}) {
    const Case c = random_case({1, 2, 256, 512, 64, 64}, mask, /*seed=*/31);
    const Reference reference = reference_of(c);
    const ErrorStats fast = error_stats(widen(run_fast<float>(c)), reference.out);
    const ErrorStats plain = error_stats(straightforward_fp32(c), reference.out);
    EXPECT_LE(fast.max, 2 * plain.max) << "mean " << fast.mean << " vs " << plain.mean;
    EXPECT_LE(fast.mean, 2 * plain.mean);
  }
}

// ---- The oracle on sampled rows of a long causal sequence.

// Q, K, V as exact decimals k/8 (|k| <= 16): the same values in fp32, fp64 and the oracle.
Matrix eighths(const std::vector<double>& values, std::size_t rows, std::size_t cols) {
  Matrix m{rows, cols, values, {}};
  char text[32];
  for (double v : values) m.text.emplace_back(text, std::snprintf(text, sizeof text, "%.3f", v));
  return m;
}

TEST(FlashOracle, CertifiesSixtyFourSampledRowsAtN4096) {
  constexpr std::size_t n = 4096, d = 16;
  Case c = random_case({1, 1, n, n, d, d}, MaskKind::causal, /*seed=*/4096);
  for (auto* v : {&c.Q, &c.K, &c.V})
    for (double& x : *v) x = std::round(x * 8) / 8 + 0.0;  // + 0.0: no "-0.000"
  c.options.threads = 2;
  Instance instance;
  instance.problem = Problem::general;
  instance.n = instance.m = n, instance.d_k = instance.d_v = d, instance.heads = 1;
  instance.mask = MaskKind::causal, instance.scale = ScaleKind::sqrt_head_dim;  // √16 = 4 = c's divisor
  instance.decimals = 6;
  instance.batch.push_back({eighths(c.Q, n, d), eighths(c.K, n, d), eighths(c.V, n, d), {}});
  const verify::ExactInstance exact = verify::make_exact(instance);
  const std::vector<float> fast32 = run_fast<float>(c);
  const std::vector<double> fast64 = run_fast<double>(c);
  std::mt19937_64 rng(64);
  for (int sample = 0; sample < 64; ++sample) {
    const std::size_t i = sample == 0 ? n - 1 : rng() % n;  // the longest row always
    const verify::ExactBlock block = verify::exact_block(exact, 0, i, 0);
    const verify::BlockAnswer answer = verify::oracle_block(exact, block, instance.decimals);
    std::vector<double> weights(n, 0.0);
    for (std::size_t t = 0; t < block.keys.size(); ++t)
      weights[block.keys[t]] = (answer.weights[t].lo + answer.weights[t].hi) / 2;
    for (std::size_t col = 0; col < d; ++col) {
      const verify::Interval exact_value = answer.cells[col].value;
      auto distance = [&](double x) { return std::max({exact_value.lo - x, x - exact_value.hi, 0.0}); };
      EXPECT_LE(distance(fast32[i * d + col]), tolerance<float>(c, weights, 0, i, 0, col, false)) << "row " << i;
      EXPECT_LE(distance(fast64[i * d + col]), tolerance<double>(c, weights, 0, i, 0, col, false)) << "row " << i;
    }
  }
}

// ---- Random shapes, masks, layouts and tiles.

RC_GTEST_PROP(FlashProperties, WithinTheBoundOfTheSimpleKernel, ()) {
  const auto dims = *rc::gen::container<std::vector<std::size_t>>(6, rc::gen::inRange<std::size_t>(1, 24));
  const auto mask = *rc::gen::element(MaskKind::none, MaskKind::causal, MaskKind::explicit_mask);
  Case c = random_case({dims[0] % 3 + 1, dims[1] % 3 + 1, dims[2], dims[3] * 2, dims[4], dims[5]}, mask,
                       *rc::gen::arbitrary<std::uint32_t>());
  c.options.layout = *rc::gen::element(TensorLayout::batch_head_seq, TensorLayout::batch_seq_head);
  c.alignment = *rc::gen::element(CausalAlignment::top_left, CausalAlignment::bottom_right);
  c.options.key_tile = *rc::gen::inRange<std::size_t>(1, 80);
  c.options.query_tile = *rc::gen::inRange<std::size_t>(1, 30);
  c.options.threads = *rc::gen::inRange(1u, 3u);
  if (*rc::gen::arbitrary<bool>())
    c.key_lengths =
        *rc::gen::container<std::vector<std::size_t>>(c.shape.batch, rc::gen::inRange<std::size_t>(0, c.shape.m + 1));
  RC_ASSERT(count_outside_bound<float>(c, reference_of(c)) == 0u);
  RC_ASSERT(count_outside_bound<double>(c, reference_of(c)) == 0u);
}

// The sliding window skips whole key tiles and masks the rest: its output equals, bit for bit, the
// same kernel given the window as a boolean mask (which visits every tile; a skipped tile would
// only have added exact zeros). Long rows, so most tiles lie outside the window; L < S, L > S and
// a window with causal; every SIMD level, several key tiles, 1 and 2 threads.
template <class T> void expect_window_equals_its_mask(SimdLevel level) {
  std::mt19937_64 random(2026);
  std::normal_distribution<T> normal;
  for (const auto& [n, m] : {std::pair<std::size_t, std::size_t>{300, 700}, {500, 230}}) {
    const FlashShape shape{2, 2, 1, n, m, 16, 8};
    std::vector<T> Q(2 * 2 * n * 16), K(2 * m * 16), V(2 * m * 8);
    for (auto* x : {&Q, &K, &V})
      for (T& y : *x) y = normal(random);
    struct Window {
      std::int64_t left, right;
      CausalAlignment causal;
    };
    for (const Window w : {Window{50, 0, CausalAlignment::none}, Window{0, 70, CausalAlignment::none},
                           Window{130, 20, CausalAlignment::top_left}, Window{-1, 3, CausalAlignment::none},
                           Window{40, -1, CausalAlignment::bottom_right}}) {
      std::vector<std::uint8_t> bits(n * m);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < m; ++j) {
          const std::int64_t d = static_cast<std::int64_t>(j + n) - static_cast<std::int64_t>(i + m);
          bits[i * m + j] = (w.left < 0 || d >= -w.left) && (w.right < 0 || d <= w.right);
        }
      for (const std::size_t key_tile : {32, 64, 128}) {
        FlashOptions windowed;
        windowed.simd = level, windowed.key_tile = key_tile, windowed.query_tile = 64, windowed.causal = w.causal;
        windowed.window_left = w.left, windowed.window_right = w.right;
        FlashOptions masked = windowed;
        masked.window_left = masked.window_right = -1, masked.mask_bits = bits;
        std::vector<T> a(2 * 2 * n * 8), b(a.size()), c(a.size());
        ASSERT_EQ(flash_attention(shape, std::span<const T>(Q), K, V, a, windowed), KernelStatus::ok);
        ASSERT_EQ(flash_attention(shape, std::span<const T>(Q), K, V, b, masked), KernelStatus::ok);
        windowed.threads = 2;
        ASSERT_EQ(flash_attention(shape, std::span<const T>(Q), K, V, c, windowed), KernelStatus::ok);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0)
            << level_name(level) << " n " << n << " m " << m << " window (" << w.left << ", " << w.right
            << ") key tile " << key_tile;
        EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * sizeof(T)), 0) << level_name(level) << " threads";
      }
    }
  }
}

TEST(FlashAttention, SlidingWindowEqualsItsMaskBitForBitAtEveryLevel) {
  for (SimdLevel level : supported_levels()) {
    expect_window_equals_its_mask<float>(level);
    expect_window_equals_its_mask<double>(level);
  }
}

}  // namespace
}  // namespace attn
