// The machine's floating-point peak at one SIMD level: 16 independent multiply-add chains per
// thread (more than the FMA latency x ports of any current x86 core, 4 x 2), each kept in its own
// vector register (16 of the 16 ymm / 32 zmm registers; `objdump -d bench_attention | grep -c
// vfmadd` in the peak functions shows 16 register-to-register FMAs per loop trip, no loads), run
// on `threads` threads at once. baseline (SSE2) has no FMA: a multiply and an add per chain, which
// is also what the kernel's baseline path issues. The kernel's % of peak is measured against this.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <immintrin.h>
#include <thread>
#include <vector>

#include "flash_attention.hpp"

namespace attn::bench {

constexpr int kChains = 16;

// One function per level and precision (target attributes do not reach into templates or
// lambdas): acc = acc·0.999999 + 1e-6 stays near 1, never denormal or infinite. The inner loop has
// a constant trip count, so the compiler unrolls it and keeps the 16 accumulators in registers.
#define ATTNCHECK_PEAK_CHAINS(name, target_isa, Vec, set1, madd, store_lanes, Lane, lanes_count) \
  __attribute__((target(target_isa))) inline double name(std::uint64_t trips) {                  \
    const Vec a = set1(static_cast<Lane>(0.999999)), b = set1(static_cast<Lane>(1e-6));          \
    Vec acc[kChains];                                                                            \
    for (Vec & x : acc) x = set1(static_cast<Lane>(1));                                          \
    for (std::uint64_t t = 0; t < trips; ++t) {                                                  \
      for (int k = 0; k < kChains; ++k) acc[k] = madd(acc[k], a, b);                             \
    }                                                                                            \
    double total = 0;                                                                            \
    for (Vec & x : acc) {                                                                        \
      alignas(64) Lane lanes[lanes_count];                                                       \
      store_lanes(lanes, x);                                                                     \
      for (Lane l : lanes) total += l;                                                           \
    }                                                                                            \
    return total;                                                                                \
  }

#define ATTNCHECK_SSE_MADD_PS(x, a, b) _mm_add_ps(_mm_mul_ps(x, a), b)
#define ATTNCHECK_SSE_MADD_PD(x, a, b) _mm_add_pd(_mm_mul_pd(x, a), b)
ATTNCHECK_PEAK_CHAINS(chains_avx512_ps, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_store_ps, float, 16)
ATTNCHECK_PEAK_CHAINS(chains_avx512_pd, "avx512f", __m512d, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_store_pd, double, 8)
ATTNCHECK_PEAK_CHAINS(chains_avx2_ps, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_store_ps, float, 8)
ATTNCHECK_PEAK_CHAINS(chains_avx2_pd, "avx2,fma", __m256d, _mm256_set1_pd, _mm256_fmadd_pd, _mm256_store_pd, double, 4)
ATTNCHECK_PEAK_CHAINS(chains_sse2_ps, "sse2", __m128, _mm_set1_ps, ATTNCHECK_SSE_MADD_PS, _mm_store_ps, float, 4)
ATTNCHECK_PEAK_CHAINS(chains_sse2_pd, "sse2", __m128d, _mm_set1_pd, ATTNCHECK_SSE_MADD_PD, _mm_store_pd, double, 2)
#undef ATTNCHECK_PEAK_CHAINS
#undef ATTNCHECK_SSE_MADD_PS
#undef ATTNCHECK_SSE_MADD_PD

/// Vector width in bytes of a level (automatic: the widest this CPU runs).
inline int vector_bytes(SimdLevel level) {
  if (level == SimdLevel::automatic) level = best_simd_level();
  return level == SimdLevel::avx512 ? 64 : level == SimdLevel::avx2 ? 32 : 16;
}

/// GFLOP/s (2 flops per lane per multiply-add) of one run of `trips` trips of the chains at `level`
/// in fp32 or fp64 on `threads` threads at once: the threads are started first and released
/// together, and the time runs from the release to the last one's end (thread start-up is not
/// counted, and no thread runs alone while another has not started).
inline double fma_rate_once(SimdLevel level, bool fp64, unsigned threads, std::uint64_t trips) {
  if (level == SimdLevel::automatic) level = best_simd_level();
  const int lanes = vector_bytes(level) / (fp64 ? 8 : 4);
  std::atomic<bool> go{false};
  std::atomic<unsigned> ready{0};
  std::vector<double> sink(threads);
  std::vector<std::chrono::steady_clock::time_point> end(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();  // leaves the core to the releaser
      if (level == SimdLevel::avx512) {
        sink[t] = fp64 ? chains_avx512_pd(trips) : chains_avx512_ps(trips);
      } else if (level == SimdLevel::avx2) {
        sink[t] = fp64 ? chains_avx2_pd(trips) : chains_avx2_ps(trips);
      } else {
        sink[t] = fp64 ? chains_sse2_pd(trips) : chains_sse2_ps(trips);
      }
      end[t] = std::chrono::steady_clock::now();
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(*std::max_element(end.begin(), end.end()) - start).count();
  volatile double keep = sink[0];
  (void)keep;
  return 2.0 * lanes * kChains * static_cast<double>(trips) * threads / seconds * 1e-9;
}

/// Peak GFLOP/s at `level` in fp32 or fp64 on `threads` threads, best of three runs of 2·10^7 trips
/// (16 FMAs a trip at 2 a cycle: 1.6·10^8 cycles, about 45 ms each on Zen 5).
inline double fma_peak_gflops(SimdLevel level, bool fp64, unsigned threads) {
  double best = 0;
  for (int round = 0; round < 3; ++round) best = std::max(best, fma_rate_once(level, fp64, threads, 20'000'000));
  return best;
}

}  // namespace attn::bench
