// The fast kernel (flash_attention) against an OpenBLAS 3-step baseline (gemm -> row softmax ->
// gemm) on the same inputs: fp32 and fp64, causal and full, H = 8, n = m in {512, 2048, 8192},
// head_dim in {64, 128}, 1 and 2 threads. Reports useful GFLOP/s (4·n·m·hd per head for full
// attention, 2·n·(n+1)·hd for causal: masked scores are not useful work) and, at the end, the
// ratio fast / baseline per configuration. `bench_attention --peak-rss` instead runs one fp32
// call at n = 16384 in a fresh process and prints its peak RSS against the size of Q, K, V, O.
// BM_FlashWindow: sliding windows (w, 0) against full attention in the same run. BM_FlashFeature:
// softcap, ALiBi, sinks and packed varlen against plain attention in the same run.
// BM_FlashCallOverhead: the time of a tiny call on 1 and 2 threads. BM_FmaPeak: the FMA peak,
// measured among the rest (repetitions are interleaved at random unless
// --benchmark_enable_random_interleaving=false is given), every % of peak is against its best.
// Each configuration's % of peak twice: of its fastest repetition's mean, and of its fastest span
// of calls lasting about one probe (the peak's own statistic, see flash_span_rate).
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <cblas.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "flash_attention.hpp"
#include "fma_peak.hpp"

namespace {

constexpr std::size_t kHeads = 8;
constexpr std::uint64_t kSeed = 20240601;  // fixed: every run times the same inputs

template <class T> struct Inputs { std::vector<T> Q, K, V, out; };

template <class T> Inputs<T> make_inputs(std::size_t n, std::size_t hd) {
  std::mt19937_64 rng(kSeed);
  std::normal_distribution<T> normal(0, 1);
  Inputs<T> in;
  for (auto* v : {&in.Q, &in.K, &in.V}) {
    v->resize(kHeads * n * hd);
    for (T& x : *v) x = normal(rng);
  }
  in.out.assign(kHeads * n * hd, 0);
  return in;
}

double useful_flops(std::size_t n, std::size_t hd, bool causal) {
  const double pairs = causal ? 0.5 * static_cast<double>(n) * static_cast<double>(n + 1) : static_cast<double>(n) * n;
  return 4.0 * pairs * static_cast<double>(hd) * kHeads;
}

// Configuration key shared by both implementations, for the ratio table.
std::string config(const char* precision, const benchmark::State& s) {
  return std::string(precision) + (s.range(2) ? " causal" : " full  ") + " n=" + std::to_string(s.range(0)) +
         " hd=" + std::to_string(s.range(1)) + " threads=" + std::to_string(s.range(3));
}

std::map<std::string, double> flash_rate, baseline_rate;  // useful GFLOP/s per configuration
// The fast kernel's useful GFLOP/s over its fastest span of consecutive calls lasting at least
// kSpanSeconds, about one probe of the FMA peak (BM_FmaPeak, probe_peak): the peak is the fastest
// of a run's probes, so this rate is the same statistic taken of the kernel. A repetition's mean
// (flash_rate) is the fastest of a few 0.2 s stretches instead of some twenty 45 ms ones, and on a
// host whose speed wanders (a configuration's mean call 7-18% above its fastest on this kind of VM)
// it reads lower against the peak by that difference alone.
std::map<std::string, double> flash_span_rate;
constexpr double kSpanSeconds = 0.045;

template <class T> const char* precision_name() { return sizeof(T) == 4 ? "fp32" : "fp64"; }

void record(benchmark::State& state, std::map<std::string, double>& table, const char* precision, double flops,
            double seconds) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  // The fastest repetition (--benchmark_repetitions): the least disturbed by the machine's noise.
  const double rate = flops * 1e-9 * static_cast<double>(state.iterations()) / seconds;
  double& best = table[config(precision, state)];
  best = std::max(best, rate);
}

// Times flash_attention over the benchmark's iterations: the seconds spent in the calls only.
// best_span, when given: the least seconds per call over spans of consecutive calls of at least
// kSpanSeconds each (the calls after the last whole span are left out, unless no span was whole).
template <class T>
double timed_calls(benchmark::State& state, const attn::FlashShape& shape, Inputs<T>& in,
                   const attn::FlashOptions& options, double* best_span = nullptr) {
  double seconds = 0, span = 0, best = 0;
  std::size_t span_calls = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (attn::flash_attention(shape, std::span<const T>(in.Q), in.K, in.V, in.out, options) != attn::KernelStatus::ok)
      state.SkipWithError("flash_attention refused the call");
    const double call = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    seconds += call, span += call, ++span_calls;
    benchmark::DoNotOptimize(in.out.data());
    if (span >= kSpanSeconds) {
      const double per_call = span / static_cast<double>(span_calls);
      best = best > 0 ? std::min(best, per_call) : per_call;
      span = 0, span_calls = 0;
    }
  }
  if (best_span != nullptr) *best_span = best > 0 ? best : span / static_cast<double>(std::max<std::size_t>(span_calls, 1));
  return seconds;
}

template <class T> void BM_Flash(benchmark::State& state) {
  const std::size_t n = state.range(0), hd = state.range(1);
  const bool causal = state.range(2) != 0;
  Inputs<T> in = make_inputs<T>(n, hd);
  attn::FlashOptions options;
  options.causal = causal ? attn::CausalAlignment::top_left : attn::CausalAlignment::none;
  options.scale_divisor = std::sqrt(static_cast<double>(hd));
  options.threads = static_cast<unsigned>(state.range(3));
  const attn::FlashShape shape{1, kHeads, kHeads, n, n, hd, hd};
  double best_span = 0;
  const double seconds = timed_calls(state, shape, in, options, &best_span);
  record(state, flash_rate, precision_name<T>(), useful_flops(n, hd, causal), seconds);
  if (best_span > 0) {
    double& best = flash_span_rate[config(precision_name<T>(), state)];
    best = std::max(best, useful_flops(n, hd, causal) * 1e-9 / best_span);
  }
}

// A sliding window (w, 0) (FlashAttention's window_size, keys i - w .. i; w = -1: none, full
// attention) in fp32 at n = m: seconds per call, and useful GFLOP/s over the visible pairs, for the
// table of each window's time against full attention's in the same run (target: about w / n).
std::map<long, double> window_seconds, window_rate;  // window -> per call; useful GFLOP/s
void BM_FlashWindow(benchmark::State& state) {
  const std::size_t n = state.range(0), hd = state.range(1);
  const long w = state.range(2);
  Inputs<float> in = make_inputs<float>(n, hd);
  attn::FlashOptions options;
  options.window_left = w, options.window_right = w < 0 ? -1 : 0;
  options.scale_divisor = std::sqrt(static_cast<double>(hd));
  options.threads = static_cast<unsigned>(state.range(3));
  const attn::FlashShape shape{1, kHeads, kHeads, n, n, hd, hd};
  double pairs = 0;
  for (std::size_t i = 0; i < n; ++i) pairs += w < 0 ? static_cast<double>(n) : static_cast<double>(std::min<std::size_t>(i, w) + 1);
  const double flops = 4.0 * pairs * static_cast<double>(hd) * kHeads;
  const double seconds = timed_calls(state, shape, in, options);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  window_seconds[w] = seconds / static_cast<double>(state.iterations());
  window_rate[w] = flops * 1e-9 / window_seconds[w];
}
BENCHMARK(BM_FlashWindow)
    ->ArgNames({"n", "hd", "window", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Args({2048, 64, -1, 2})
    ->Args({2048, 64, 128, 2})
    ->Args({2048, 64, 512, 2})
    ->Args({2048, 64, 1024, 2});

// The cost of a call itself: fp32, 8 heads of 8 queries and 8 keys at hd 64 (a few µs of
// arithmetic), on 1 and 2 threads. Threads started and joined per call made 2 threads cost about
// 45 µs more than 1 (a Zen 5 VM); kept across calls (src/worker_pool.hpp) they are woken instead.
void BM_FlashCallOverhead(benchmark::State& state) {
  constexpr std::size_t n = 8, hd = 64;
  Inputs<float> in = make_inputs<float>(n, hd);
  attn::FlashOptions options;
  options.scale_divisor = 8;
  options.threads = static_cast<unsigned>(state.range(0));
  (void)timed_calls(state, {1, kHeads, kHeads, n, n, hd, hd}, in, options);
}
BENCHMARK(BM_FlashCallOverhead)->ArgNames({"threads"})->Unit(benchmark::kMicrosecond)->UseRealTime()->Arg(1)->Arg(2);

// One feature at a time on plain full fp32 attention, n = 2048, hd = 64, 2 threads: 0 plain,
// 1 softcap 30 (Gemma 2's), 2 ALiBi (Press et al.'s slopes 2^(-8h/H)), 3 sinks (one logit per head),
// 4 packed varlen (the same n rows as 4 sequences of n/4: a quarter of the pairs, one call). The
// table after the run gives each one's time against plain (target: softcap and ALiBi within 10%),
// the fastest of the repetitions when --benchmark_repetitions is given.
enum Feature : long { kPlain, kSoftcap, kAlibi, kSinks, kVarlen };
const char* feature_name(long f) {
  constexpr const char* names[] = {"plain", "softcap 30", "ALiBi", "sinks", "varlen 4 x n/4"};
  return names[f];
}
std::map<long, double> feature_seconds, feature_rate;  // feature -> per call; useful GFLOP/s
void BM_FlashFeature(benchmark::State& state) {
  constexpr std::size_t n = 2048, hd = 64, sequences = 4;
  const long feature = state.range(0);
  Inputs<float> in = make_inputs<float>(n, hd);
  attn::FlashOptions options;
  options.scale_divisor = std::sqrt(static_cast<double>(hd));
  options.threads = 2;
  std::vector<double> per_head(kHeads);
  for (std::size_t h = 0; h < kHeads; ++h)
    per_head[h] = feature == kAlibi ? std::exp2(-8.0 * static_cast<double>(h + 1) / kHeads) : 0.5 * static_cast<double>(h);
  if (feature == kSoftcap) options.softcap = 30;
  if (feature == kAlibi) options.alibi_slopes = per_head;
  if (feature == kSinks) options.sinks = per_head;
  std::vector<std::size_t> cu(sequences + 1);
  for (std::size_t b = 0; b <= sequences; ++b) cu[b] = b * (n / sequences);
  attn::FlashShape shape{1, kHeads, kHeads, n, n, hd, hd};
  double pairs = static_cast<double>(n) * n;
  if (feature == kVarlen) {
    // Packed [total, H, E]: heads interleave within a row, so the shape's n, m are the longest sequence.
    options.cu_seqlens_q = cu, options.cu_seqlens_k = cu;
    options.layout = attn::TensorLayout::batch_seq_head;
    shape = {sequences, kHeads, kHeads, n / sequences, n / sequences, hd, hd};
    pairs /= sequences;
  }
  const double flops = 4.0 * pairs * static_cast<double>(hd) * kHeads;
  const double seconds = timed_calls(state, shape, in, options);
  state.SetLabel(feature_name(feature));
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  // The fastest repetition (--benchmark_repetitions): the least disturbed by the machine's noise.
  const double per_call = seconds / static_cast<double>(state.iterations());
  if (const auto seen = feature_seconds.find(feature); seen == feature_seconds.end() || per_call < seen->second)
    feature_seconds[feature] = per_call;
  feature_rate[feature] = flops * 1e-9 / feature_seconds[feature];
}
BENCHMARK(BM_FlashFeature)
    ->ArgNames({"feature"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->DenseRange(kPlain, kVarlen);

void gemm(bool transpose_b, std::size_t rows, std::size_t cols, std::size_t inner, const float* a, const float* b,
          float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, rows, cols, inner, 1.0f, a, inner,
              b, transpose_b ? inner : cols, 0.0f, c, cols);
}
void gemm(bool transpose_b, std::size_t rows, std::size_t cols, std::size_t inner, const double* a, const double* b,
          double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, rows, cols, inner, 1.0, a, inner, b,
              transpose_b ? inner : cols, 0.0, c, cols);
}

// The textbook 3-step implementation per head: S = Q·Kᵀ (full n x n, as a BLAS user writes it),
// masked shifted softmax row by row, O = P·V. The n x n buffer is reused across heads.
template <class T> void BM_OpenBlas3Step(benchmark::State& state) {
  const std::size_t n = state.range(0), hd = state.range(1);
  const bool causal = state.range(2) != 0;
  Inputs<T> in = make_inputs<T>(n, hd);
  std::vector<T> scores(n * n);
  const T inverse = static_cast<T>(1 / std::sqrt(static_cast<double>(hd)));
  openblas_set_num_threads(static_cast<int>(state.range(3)));
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t h = 0; h < kHeads; ++h) {
      const std::size_t at = h * n * hd;
      gemm(true, n, n, hd, &in.Q[at], &in.K[at], scores.data());
      for (std::size_t i = 0; i < n; ++i) {
        T* row = &scores[i * n];
        const std::size_t visible = causal ? i + 1 : n;
        T top = row[0], total = 0;
        for (std::size_t j = 1; j < visible; ++j) top = std::max(top, row[j]);
        for (std::size_t j = 0; j < visible; ++j) total += row[j] = std::exp((row[j] - top) * inverse);
        for (std::size_t j = 0; j < visible; ++j) row[j] /= total;
        std::fill(row + visible, row + n, T(0));
      }
      gemm(false, n, hd, n, scores.data(), &in.V[at], &in.out[at]);
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    benchmark::DoNotOptimize(in.out.data());
  }
  record(state, baseline_rate, precision_name<T>(), useful_flops(n, hd, causal), seconds);
}

void grid(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "hd", "causal", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
  for (long n : {512, 2048, 8192})
    for (long hd : {64, 128})
      for (long causal : {1, 0})
        for (long threads : {1, 2}) b->Args({n, hd, causal, threads});
}

BENCHMARK(BM_Flash<float>)->Apply(grid);
BENCHMARK(BM_OpenBlas3Step<float>)->Apply(grid);
BENCHMARK(BM_Flash<double>)->Apply(grid);
BENCHMARK(BM_OpenBlas3Step<double>)->Apply(grid);

// One fp32 call at n = 16384, H = 8, hd = 64, 2 threads: peak RSS against the inputs and output.
int peak_rss() {
  constexpr std::size_t n = 16384, hd = 64;
  Inputs<float> in = make_inputs<float>(n, hd);
  attn::FlashOptions options;
  options.causal = attn::CausalAlignment::top_left;
  options.scale_divisor = 8;
  options.threads = 2;
  const attn::KernelStatus status = attn::flash_attention({1, kHeads, kHeads, n, n, hd, hd},
                                                          std::span<const float>(in.Q), in.K, in.V, in.out, options);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double tensors = 4.0 * kHeads * n * hd * sizeof(float) / (1 << 20);
  const double peak = static_cast<double>(usage.ru_maxrss) / 1024;  // ru_maxrss is in KiB on Linux
  std::printf("n=%zu H=%zu hd=%zu fp32: Q+K+V+O = %.1f MiB, peak RSS = %.1f MiB, ratio %.2f (limit 2)\n", n, kHeads, hd,
              tensors, peak, peak / tensors);
  return status == attn::KernelStatus::ok && peak <= 2 * tensors ? 0 : 1;
}

// The FMA peak per "fp32 threads=1" etc.: the best of the probes before and after the benchmarks
// and of BM_FmaPeak's iterations among them.
std::map<std::string, double> peak;
// Where each came from, printed beside it: the probe before the benchmarks, BM_FmaPeak's fastest
// iteration among them, the probe after.
std::map<std::string, double> peak_before, peak_among, peak_after;

// The FMA peak as a benchmark of its own, so that it is measured throughout the run as the
// kernel is: with random interleaving (the default here) its repetitions fall among the kernel's,
// and this VM's host changes speed by 10-15% within minutes. Each iteration is one probe of 2·10^7
// trips (about 45 ms at any level); the fastest raises `peak`, as the kernel's fastest repetition
// gives its rate.
void BM_FmaPeak(benchmark::State& state) {
  const bool fp64 = state.range(0) != 0;
  const auto threads = static_cast<unsigned>(state.range(1));
  const attn::SimdLevel level = attn::best_simd_level();
  const std::string key = std::string(fp64 ? "fp64" : "fp32") + " threads=" + std::to_string(threads);
  double rate = 0;
  for (auto _ : state) {
    rate = attn::bench::fma_rate_once(level, fp64, threads, 20'000'000);
    peak[key] = std::max(peak[key], rate);
    peak_among[key] = std::max(peak_among[key], rate);
  }
  state.counters["GFLOP/s"] = rate;
}
BENCHMARK(BM_FmaPeak)->ArgNames({"fp64", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime()
    ->ArgsProduct({{0, 1}, {1, 2}});

// Probes the FMA peak at `level` for each precision and thread count into `probed`; `peak` keeps
// the higher.
void probe_peak(attn::SimdLevel level, std::map<std::string, double>& probed) {
  for (const char* precision : {"fp32", "fp64"})
    for (unsigned threads : {1u, 2u}) {
      const std::string key = std::string(precision) + " threads=" + std::to_string(threads);
      probed[key] = attn::bench::fma_peak_gflops(level, precision[2] == '6', threads);
      peak[key] = std::max(peak[key], probed[key]);
    }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--peak-rss") == 0) return peak_rss();
  // Repetitions interleaved at random unless the caller says otherwise: each configuration's
  // repetitions (and BM_FmaPeak's) then spread over the whole run instead of one stretch of it.
  std::vector<char*> args(argv, argv + argc);
  char interleave[] = "--benchmark_enable_random_interleaving=true";
  if (std::none_of(args.begin() + 1, args.end(),
                   [](const char* a) { return std::strncmp(a, "--benchmark_enable_random_interleaving", 38) == 0; }))
    args.insert(args.begin() + 1, interleave);
  argc = static_cast<int>(args.size());
  args.push_back(nullptr);
  argv = args.data();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  // The peak at the level the kernel dispatches to, probed before and after the benchmarks in the
  // same run (and by BM_FmaPeak among them, when it runs), the highest kept: a busy neighbour (this
  // kind of VM shares its cores) only lowers a probe, and a low peak would overstate every % below
  // (one run here probed 217.9 fp32 GFLOP/s on 1 thread after the benchmarks against 236-245 in
  // others).
  const attn::SimdLevel level = attn::best_simd_level();
  probe_peak(level, peak_before);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  probe_peak(level, peak_after);
  const char* level_name = level == attn::SimdLevel::avx512 ? "avx512"
                           : level == attn::SimdLevel::avx2 ? "avx2"
                                                            : "sse2";
  std::printf("\nFMA peak at the kernel's SIMD level (%s, %d chains per thread; the best of a probe before and\n"
              "one after the benchmarks and of BM_FmaPeak among them):\n", level_name, attn::bench::kChains);
  for (const char* precision : {"fp32", "fp64"}) {
    const std::string p = precision;
    for (unsigned threads : {1u, 2u}) {
      const std::string key = p + " threads=" + std::to_string(threads);
      std::printf("  %s threads=%u: %8.1f GFLOP/s  (before %.1f, ", precision, threads, peak[key], peak_before[key]);
      if (const auto among = peak_among.find(key); among != peak_among.end())
        std::printf("among %.1f, ", among->second);
      else
        std::printf("BM_FmaPeak not run, ");
      std::printf("after %.1f)\n", peak_after[key]);
    }
    // Another job holding a core through both probes halves the 2-thread peak and inflates every
    // 2-thread % of it: say so rather than print 150% of peak.
    if (peak[p + " threads=2"] < 1.8 * peak[p + " threads=1"])
      std::printf("  warning: %s on 2 threads is below 1.8x 1 thread: a core was busy (or shared), so the\n"
                  "  2-thread %% of peak below overstates the kernel; rerun on an idle machine\n",
                  precision);
  }
  std::printf("\nfast kernel, useful GFLOP/s (the fastest repetition's mean): %% of that peak; over its fastest\n"
              "span of calls >= %.0f ms, as the peak is taken (see flash_span_rate): %% of that peak; / OpenBLAS 3-step:\n",
              1e3 * kSpanSeconds);
  for (const auto& [key, fast] : flash_rate) {
    const std::string precision = key.substr(0, 4), threads = key.substr(key.rfind("threads="));
    const double top = peak[precision + " " + threads];
    std::printf("  %-40s %7.2f  %5.1f%% of peak", key.c_str(), fast, 100 * fast / top);
    if (const auto span = flash_span_rate.find(key); span != flash_span_rate.end())
      std::printf("  span %7.2f  %5.1f%%", span->second, 100 * span->second / top);
    if (const auto base = baseline_rate.find(key); base != baseline_rate.end())
      std::printf("  / %7.2f = %5.2fx", base->second, fast / base->second);
    std::printf("\n");
  }
  if (const auto full = window_seconds.find(-1); full != window_seconds.end()) {
    std::printf("\nsliding window (w, 0), fp32 n=2048 hd=64 threads=2: time against full attention, "
                "%% of peak:\n");
    for (const auto& [w, seconds] : window_seconds)
      std::printf("  window %5ld: %8.2f ms  %5.3f of full (w/n = %5.3f)  %5.1f%% of peak\n", w, 1e3 * seconds,
                  seconds / full->second, w < 0 ? 1.0 : static_cast<double>(w) / 2048, 100 * window_rate[w] /
                  peak["fp32 threads=2"]);
  }
  if (const auto plain = feature_seconds.find(kPlain); plain != feature_seconds.end()) {
    std::printf("\nfeatures, fp32 full n=2048 hd=64 threads=2: time against plain attention, %% of peak:\n");
    for (const auto& [f, seconds] : feature_seconds)
      std::printf("  %-16s %8.2f ms  %5.3f of plain  %5.1f%% of peak\n", feature_name(f), 1e3 * seconds,
                  seconds / plain->second, 100 * feature_rate[f] / peak["fp32 threads=2"]);
  }
  return 0;
}
