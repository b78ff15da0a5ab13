// Certification speed of the tensor path: rows certified per second by certify_tensor on one
// [1, 1, S, E] fp32 problem (N(0,1) data rounded to fp32) and the exact result rounded to fp32 as
// the output, sampling `rows` rows. Fixed seeds; Google Benchmark, never a timed test.
// Each certify_tensor call also validates the whole problem and checks every element (O(B·Hq·L·E)
// and O(S·(E + Ev)) per certified row), so rows/s depends on the rows sampled per call: 32 (the
// issue's figure) and 256 (the README's example). BM_EncloseRowFast is the oracle's fast pass alone.
// BM_CertifyBackward and BM_CertifyForwardHeads: a [1, 8, 2048, 64] fp32 problem's backward
// (certify_backward, a FlashAttention-2-style float kernel's gradients, out and LSE given) beside its
// forward (certify_tensor), both sampling 256 rows; a key row needs its whole head's row statistics
// (two head groups: 16x the forward's (row, key) pairs). And [1, 8, 512, 64] with every row
// certified (rows = 0), where both sides do the same pairs.
#include <benchmark/benchmark.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_backward.hpp"
#include "tensor/tensor_certify.hpp"
#include "verify/tensor/backward_kernels.hpp"
#include "tensor/tensor_oracle.hpp"

namespace {

using namespace attn::verify;

TensorProblem normal_problem(std::size_t S, std::size_t E, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  TensorProblem p;
  p.L = p.S = S, p.E = p.Ev = E;
  p.dtype = DType::fp32;
  for (auto* values : {&p.query, &p.key, &p.value}) {
    values->resize(S * E);
    for (double& x : *values) x = round_to(DType::fp32, normal(rng));
  }
  return p;
}

// A fp32 output within the band: the plain same-precision computation of every row.
std::vector<double> plain_output(const TensorProblem& p) {
  std::vector<double> out(p.L * p.Ev);
  for (std::size_t row = 0; row < p.L; ++row) {
    const std::vector<double> y = plain_row(p, row, DType::fp32);
    for (std::size_t c = 0; c < p.Ev; ++c) out[row * p.Ev + c] = y[c];
  }
  return out;
}

// Args: S, E, threads, rows sampled per certify_tensor call (plus the first and the last row).
void BM_CertifyTensorRows(benchmark::State& state) {
  const auto S = static_cast<std::size_t>(state.range(0)), E = static_cast<std::size_t>(state.range(1));
  const TensorProblem problem = normal_problem(S, E, 4096);
  const std::vector<double> output = plain_output(problem);
  CertifyOptions options;
  options.arithmetic = arithmetic_profile("fp32").value();
  options.rows = static_cast<std::size_t>(state.range(3));
  options.threads = static_cast<unsigned>(state.range(2));
  std::size_t rows = 0, fast = 0;
  for (auto _ : state) {
    const TensorReport report = certify_tensor(problem, output, options);
    if (!report.passed) state.SkipWithError("a plain fp32 output failed certification");
    rows += report.rows_checked;
    fast += report.fast_rows;
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsRate);
  state.counters["fast%"] = rows ? 100.0 * static_cast<double>(fast) / static_cast<double>(rows) : 0.0;
}
BENCHMARK(BM_CertifyTensorRows)
    ->Args({4096, 128, 2, 32})
    ->Args({4096, 128, 1, 32})
    ->Args({4096, 128, 2, 256})
    ->Args({1024, 64, 2, 32})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()  // CPU: every thread's, so a loaded machine's real time can be judged
    ->UseRealTime();

// Args: S, E. The fast double pass of the oracle on one row, single thread.
void BM_EncloseRowFast(benchmark::State& state) {
  const auto S = static_cast<std::size_t>(state.range(0)), E = static_cast<std::size_t>(state.range(1));
  const TensorProblem problem = normal_problem(S, E, 4096);
  std::size_t row = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(enclose_row_fast(problem, row));
    row = (row + 97) % S;
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EncloseRowFast)->Args({4096, 128})->Args({1024, 64})->Unit(benchmark::kMillisecond);

// Args: S, E. The rest of a certified row's work, single thread: the band from an enclosure
// (band_terms, both tiers' tensor_row_tier_bands) and the plain same-precision row.
void BM_RowBandAndPlainRow(benchmark::State& state) {
  const auto S = static_cast<std::size_t>(state.range(0)), E = static_cast<std::size_t>(state.range(1));
  const TensorProblem problem = normal_problem(S, E, 4096);
  const RowEnclosure enclosure = enclose_row_fast(problem, 0).value();
  const Arithmetic fp32 = arithmetic_profile("fp32").value();
  RowTerms terms;  // reused, as certify_tensor reuses one per thread
  for (auto _ : state) {
    band_terms(problem, 0, enclosure, terms);
    benchmark::DoNotOptimize(tensor_row_tier_bands(terms, fp32, 8.5));
    benchmark::DoNotOptimize(plain_row(problem, 0, DType::fp32));
  }
}
BENCHMARK(BM_RowBandAndPlainRow)->Args({4096, 128})->Unit(benchmark::kMillisecond);

// [1, H, S, S, E] fp32, N(0,1) rounded, with a seeded upstream gradient and a float backward's run.
struct BackwardBench {
  TensorProblem problem;
  std::vector<double> dout;
  attn::testing_support::BackwardRun run;
};

// One problem per sequence length S (built once: the float backward's run is the slow part).
const BackwardBench& backward_bench(std::size_t S) {
  static std::map<std::size_t, BackwardBench> benches;
  auto [at, fresh] = benches.try_emplace(S);
  BackwardBench& b = at->second;
  if (!fresh) return b;
  std::mt19937_64 rng(2048);
  std::normal_distribution<double> normal;
  TensorProblem& p = b.problem;
  p.q_heads = p.kv_heads = 8, p.L = p.S = S, p.E = p.Ev = 64;
  p.dtype = DType::fp32;
  for (auto* values : {&p.query, &p.key, &p.value, &b.dout}) {
    values->resize(p.q_heads * p.S * p.E);
    for (double& x : *values) x = round_to(DType::fp32, normal(rng));
  }
  b.run = attn::testing_support::backward_kernel<float>(p, b.dout, {});
  return b;
}

// rows = 0: every row (nullopt).
CertifyOptions bench_options(std::size_t rows, unsigned threads) {
  CertifyOptions options;
  options.arithmetic = arithmetic_profile("fp32").value();
  if (rows > 0) options.rows = rows;
  options.threads = threads;
  options.diagnose = false;
  return options;
}

// Args: rows sampled (query rows for dq, key rows for dk and dv; 0 = all), threads, S.
void BM_CertifyBackward(benchmark::State& state) {
  const BackwardBench& b = backward_bench(static_cast<std::size_t>(state.range(2)));
  const CertifyOptions options = bench_options(static_cast<std::size_t>(state.range(0)),
                                               static_cast<unsigned>(state.range(1)));
  BackwardInputs inputs;
  inputs.out = b.run.out, inputs.lse = b.run.lse;
  for (auto _ : state) {
    const BackwardReport report =
        certify_backward(b.problem, b.dout, b.run.dq, b.run.dk, b.run.dv, options, inputs);
    if (!report.passed) state.SkipWithError("a float backward failed certification");
  }
}
BENCHMARK(BM_CertifyBackward)->Args({256, 2, 2048})->Args({0, 2, 512})->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// The same problem's forward: its output certified with the same sample size.
void BM_CertifyForwardHeads(benchmark::State& state) {
  const BackwardBench& b = backward_bench(static_cast<std::size_t>(state.range(2)));
  const CertifyOptions options = bench_options(static_cast<std::size_t>(state.range(0)),
                                               static_cast<unsigned>(state.range(1)));
  for (auto _ : state) {
    const TensorReport report = certify_tensor(b.problem, b.run.out, options);
    if (!report.passed) state.SkipWithError("a float forward failed certification");
  }
}
BENCHMARK(BM_CertifyForwardHeads)->Args({256, 2, 2048})->Args({0, 2, 512})->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

}  // namespace
