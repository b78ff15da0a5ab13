// The fast kernel's parts one at a time, on data that stays in cache, at the widest SIMD level the
// CPU runs: where a call's time goes, in a form that a busy neighbour disturbs far less than the
// whole kernel (bench_attention), so a change to one part can be measured on its own.
//   BM_Products<T>/hd:   dot_products then accumulate over one key tile (flash_key_tile's size)
//                        for 8 query rows (one register tile, two on AVX2), as run_item calls
//                        them: GFLOP/s
//   BM_OnlineStep<T>/softcap: online_step over 8 rows of a 128-key tile (the max rising in none
//                        of them): raw form (softcap 0), or scaled with a softcap of 30 (every
//                        score within the cap: tanh's polynomial only) or of 2 (about 5% of the
//                        scores beyond it, some in nearly every vector: polynomial and exp path):
//                        ns per score
//   BM_Pack<T>/hd:       pack of one key tile from K and V rows in L2: ns per key
// After the run, per precision and head dim: the products' share of the 1-thread FMA peak, each
// other part's time per score against theirs (pack's per key spread over 512 query rows), and the
// share of the peak the three together leave (what the rest of run_item can only lower).
// The internals are included directly (src/flash_attention_simd.hpp): they are not an API.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fma_peak.hpp"
#include "flash_attention.hpp"
#include "flash_attention_simd.hpp"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

using attn::flash_detail::Core;
using attn::flash_detail::ExpConstants;
using attn::flash_detail::Job;
using attn::flash_detail::kMaxRows;
using attn::flash_detail::Scratch;

// One tile's worth of work: a Job sized as run() sizes it (n = m = 512 keys for pack's source).
template <class T> struct Setup {
  explicit Setup(std::size_t hd, std::size_t tile_step) {
    constexpr std::size_t m = 512;
    job.shape = {1, 1, 1, kMaxRows, m, hd, hd};
    attn::FlashOptions options;
    job.key_tile = attn::flash_detail::round_up(attn::flash_key_tile(job.shape, options, sizeof(T)), tile_step);
    job.query_tile = kMaxRows;
    job.head_dim_v_padded = attn::flash_detail::round_up(hd, tile_step);
    job.q = job.k = job.v = job.o = {m * hd, m * hd, hd};
    job.exp_scale = static_cast<T>(0.125);
    constants.assign(std::begin(ExpConstants<T>::table), std::end(ExpConstants<T>::table));
    job.exp_constants = constants.data();
    std::mt19937_64 rng(7);
    std::normal_distribution<T> normal(0, 1);
    for (auto* v : {&Q, &K, &V}) {
      v->resize(m * hd);
      for (T& x : *v) x = normal(rng);
    }
    scratch = std::make_unique<Scratch<T>>(job);
    for (std::size_t r = 0; r < kMaxRows; ++r) rows[r] = Q.data() + r * hd;
  }
  Job<T> job;
  std::vector<T> constants, Q, K, V;
  std::unique_ptr<Scratch<T>> scratch;
  const T* rows[kMaxRows] = {};
};

// Each part in a function compiled for its ISA (the kernel's Core is inlined into such entries).
#define ATTN_PARTS(suffix, isa, bytes)                                                                        \
  template <class T> [[gnu::target(isa), gnu::noinline]] void products_##suffix(Setup<T>& s) {               \
    using C = Core<T, (bytes) / sizeof(T)>;                                                                   \
    T alpha[kMaxRows];                                                                                        \
    std::fill(alpha, alpha + kMaxRows, T(1));                                                                 \
    for (std::size_t r0 = 0; r0 < kMaxRows; r0 += C::kRows) { /* AVX2's register tile is 4 rows */            \
      C::dot_products(s.job, s.rows + r0, 0, s.job.key_tile, *s.scratch);                                     \
      C::accumulate(s.job, alpha, 0, s.job.key_tile, s.scratch->acc + r0 * s.job.head_dim_v_padded, *s.scratch); \
    }                                                                                                         \
  }                                                                                                           \
  template <class T> [[gnu::target(isa), gnu::noinline]] void online_##suffix(Setup<T>& s, T* scores) {       \
    using C = Core<T, (bytes) / sizeof(T)>;                                                                   \
    const std::size_t cols = s.job.key_tile;                                                                  \
    typename C::RowTile rows[C::kRows];                                                                       \
    for (auto& row : rows) row.limit = cols;                                                                  \
    T alpha[C::kRows];                                                                                        \
    for (std::size_t r0 = 0; r0 < kMaxRows; r0 += C::kRows) {                                                 \
      std::fill(s.scratch->row_max + r0, s.scratch->row_max + r0 + C::kRows, T(100));                         \
      C::online_step(s.job, scores + r0 * cols, 0, cols, rows, s.scratch->row_max + r0,                       \
                     s.scratch->row_sum + r0 * attn::flash_detail::kMaxLanes, alpha);                        \
    }                                                                                                         \
  }                                                                                                           \
  template <class T> [[gnu::target(isa), gnu::noinline]] void pack_##suffix(Setup<T>& s, std::size_t tile) {  \
    Core<T, (bytes) / sizeof(T)>::pack(s.job, s.K.data() + tile * s.job.key_tile * s.job.k.row,               \
                                       s.V.data() + tile * s.job.key_tile * s.job.v.row, s.job.key_tile,      \
                                       *s.scratch);                                                           \
  }
ATTN_PARTS(avx512, "avx512f", 64)
ATTN_PARTS(avx2, "avx2,fma", 32)
#undef ATTN_PARTS

bool wide() { return attn::best_simd_level() == attn::SimdLevel::avx512; }
template <class T> std::size_t tile_step() { return attn::flash_detail::kVectors * (wide() ? 64 : 32) / sizeof(T); }
template <class T> const char* name() { return sizeof(T) == 4 ? "fp32" : "fp64"; }

// Seconds spent in `part` over the benchmark's iterations.
template <class Part> double timed(benchmark::State& state, const Part& part) {
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    part();
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return seconds;
}

// The fastest repetition's ns per score (products, online step) or per key (pack), for the summary.
std::map<std::string, double> best_ns;
void keep(const std::string& key, double ns) {
  const auto seen = best_ns.find(key);
  if (seen == best_ns.end() || ns < seen->second) best_ns[key] = ns;
}

template <class T> void BM_Products(benchmark::State& state) {
  const std::size_t hd = static_cast<std::size_t>(state.range(0));
  Setup<T> s(hd, tile_step<T>());
  if (wide()) pack_avx512(s, 0); else pack_avx2(s, 0);
  const double seconds = timed(state, [&] {
    if (wide()) products_avx512(s); else products_avx2(s);
    benchmark::DoNotOptimize(s.scratch->acc);
  });
  const double scores = static_cast<double>(kMaxRows * s.job.key_tile) * static_cast<double>(state.iterations());
  keep(std::string(name<T>()) + " hd=" + std::to_string(hd) + " products", 1e9 * seconds / scores);
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * static_cast<double>(hd) * scores, benchmark::Counter::kIsRate);
  state.counters["ns/score"] = benchmark::Counter(scores, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(std::to_string(s.job.key_tile) + " keys");
}

template <class T> void BM_OnlineStep(benchmark::State& state) {
  Setup<T> s(64, tile_step<T>());
  s.job.key_tile = 128;  // a fixed width for both precisions: the cost per score
  const auto softcap = static_cast<T>(state.range(0));
  if (softcap > 0) {  // as run() sets a softcap call up: scores scaled and capped before the max
    s.job.scaled_scores = true;
    s.job.score_scale = s.job.exp_scale, s.job.exp_scale = 1;
    s.job.softcap = softcap, s.job.softcap_factor = s.job.score_scale / softcap;
  }
  s.scratch = std::make_unique<Scratch<T>>(s.job);
  // Copies of the tile, each half restored while the other is read (the step overwrites scores with
  // weights): loads right after a copy's stores could wait on store forwarding, which the kernel's
  // loads (of dot_products' vector stores) do not.
  constexpr std::size_t kCopies = 8, kTileScores = kMaxRows * 128;
  std::vector<T> scores(kTileScores), copies(kCopies * kTileScores + 64 / sizeof(T));
  T* const base = copies.data() + (64 - reinterpret_cast<std::uintptr_t>(copies.data()) % 64) % 64 / sizeof(T);
  std::mt19937_64 rng(3);
  std::normal_distribution<T> normal(0, 8);
  for (T& x : scores) x = normal(rng);
  for (std::size_t c = 0; c < kCopies; ++c) std::copy(scores.begin(), scores.end(), base + c * kTileScores);
  // One clock reading per half of the copies (two per call weighed about 0.1 ns per score).
  double seconds = 0;
  std::size_t half = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t c = 0; c < kCopies / 2; ++c) {
      T* const tile = base + (half * kCopies / 2 + c) * kTileScores;
      if (wide()) online_avx512(s, tile); else online_avx2(s, tile);
      benchmark::DoNotOptimize(tile);
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (std::size_t c = 0; c < kCopies / 2; ++c)  // restored while the other half is read
      std::copy(scores.begin(), scores.end(), base + (half * kCopies / 2 + c) * kTileScores);
    half ^= 1;
  }
  const double count = static_cast<double>(kCopies / 2 * kTileScores) * static_cast<double>(state.iterations());
  keep(std::string(name<T>()) + (softcap > 0 ? " online softcap " + std::to_string(state.range(0)) : " online"),
       1e9 * seconds / count);
  state.counters["ns/score"] = benchmark::Counter(count, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <class T> void BM_Pack(benchmark::State& state) {
  const std::size_t hd = static_cast<std::size_t>(state.range(0));
  Setup<T> s(hd, tile_step<T>());
  const std::size_t tiles = 512 / s.job.key_tile;
  std::size_t tile = 0;
  const double seconds = timed(state, [&] {
    if (wide()) pack_avx512(s, tile); else pack_avx2(s, tile);
    tile = (tile + 1) % tiles;
    benchmark::DoNotOptimize(s.scratch->keys_t);
  });
  const double keys = static_cast<double>(s.job.key_tile) * static_cast<double>(state.iterations());
  keep(std::string(name<T>()) + " hd=" + std::to_string(hd) + " pack", 1e9 * seconds / keys);
  state.counters["ns/key"] = benchmark::Counter(keys, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_Products<float>)->ArgName("hd")->Arg(64)->Arg(128);
BENCHMARK(BM_Products<double>)->ArgName("hd")->Arg(64)->Arg(128);
BENCHMARK(BM_OnlineStep<float>)->ArgName("softcap")->Arg(0)->Arg(30)->Arg(2);
BENCHMARK(BM_OnlineStep<double>)->ArgName("softcap")->Arg(0)->Arg(30)->Arg(2);
BENCHMARK(BM_Pack<float>)->ArgName("hd")->Arg(64)->Arg(128);
BENCHMARK(BM_Pack<double>)->ArgName("hd")->Arg(64)->Arg(128);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (attn::best_simd_level() == attn::SimdLevel::baseline) {
    std::fprintf(stderr, "bench_kernel_parts: needs AVX2 or AVX-512\n");
    return 1;
  }
  // The 1-thread peak probed before and after the benchmarks, the higher kept: a busy neighbour
  // only lowers a probe, and one probe alone, after the benchmarks, once read 203.0 fp32 GFLOP/s
  // (237.5 in the run before) and put the products at 110% of it.
  const attn::SimdLevel level = attn::best_simd_level();
  const double before[2] = {attn::bench::fma_peak_gflops(level, false, 1),
                            attn::bench::fma_peak_gflops(level, true, 1)};
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::printf("\nper score against the products' own time (a tile packed once per 512 query rows):\n");
  for (const char* precision : {"fp32", "fp64"}) {
    const bool fp64 = precision[2] == '6';
    const double peak = std::max(before[fp64], attn::bench::fma_peak_gflops(level, fp64, 1));
    const std::string p = precision;
    const auto online = best_ns.find(p + " online");
    for (const int hd : {64, 128}) {
      const std::string key = p + " hd=" + std::to_string(hd);
      const auto products = best_ns.find(key + " products"), pack = best_ns.find(key + " pack");
      if (products == best_ns.end() || online == best_ns.end() || pack == best_ns.end()) continue;
      const double p_ns = products->second, o_ns = online->second, k_ns = pack->second / 512;
      std::printf("  %s: products %.3f ns (%.1f%% of the 1-thread FMA peak, %.1f GFLOP/s), online step +%.1f%%, "
                  "pack +%.1f%%: at most %.1f%% of peak\n",
                  key.c_str(), p_ns, 100 * 4.0 * hd / p_ns / peak, peak, 100 * o_ns / p_ns, 100 * k_ns / p_ns,
                  100 * 4.0 * hd / (p_ns + o_ns + k_ns) / peak);
      for (const int cap : {30, 2}) {
        const auto capped = best_ns.find(p + " online softcap " + std::to_string(cap));
        if (capped != best_ns.end())
          std::printf("  %s: the online step with a softcap of %d +%.1f%% (the softcap's own +%.1f%%)\n", key.c_str(),
                      cap, 100 * capped->second / p_ns, 100 * (capped->second - o_ns) / p_ns);
      }
    }
  }
  return 0;
}
