// The certified oracle on the largest judge inputs. Inputs come from a fixed seed, so runs compare.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdio>
#include <random>
#include <string>

#include "instance_io.hpp"
#include "judge/checker.hpp"
#include "judge/exact.hpp"
#include "judge/oracle.hpp"
#include "solve.hpp"

namespace {

// A decimal uniform in [-bound, bound] with `decimals` digits after the point.
std::string random_decimal(std::mt19937_64& rng, long bound, int decimals) {
  long scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  std::uniform_int_distribution<long> pick(-bound * scale, bound * scale);
  const long value = pick(rng);
  char text[64];
  std::snprintf(text, sizeof text, "%s%ld.%0*ld", value < 0 ? "-" : "", std::labs(value) / scale, decimals,
                std::labs(value) % scale);
  return text;
}

// Problem statement limits: AI006 n = 80, d = 16, |x| <= 1000; AI031 n = 40, d = 16, |Q|,|K| <= 8.
attn::Instance max_instance(attn::Problem problem, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool ai031 = problem == attn::Problem::ai031;
  const std::size_t n = ai031 ? 40 : 80, d = 16, h = ai031 ? 4 : 1;
  attn::Header header;
  header.problem = problem, header.n = n, header.d_k = d, header.heads = h;
  std::string text = attn::write_header(header);
  for (int matrix = 0; matrix < 3; ++matrix) {
    const long bound = ai031 && matrix < 2 ? 8 : 1000;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t c = 0; c < d; ++c) text += random_decimal(rng, bound, 3) + (c + 1 == d ? "\n" : " ");
    }
  }
  for (std::size_t i = 0; ai031 && i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) text += std::string(rng() % 4 == 0 ? "0" : "1") + (j + 1 == n ? "\n" : " ");
  }
  return attn::read_instance(text, problem, attn::default_limits(problem)).value();
}

void BM_CertifyMaxAi006(benchmark::State& state) {
  const attn::Instance instance = max_instance(attn::Problem::ai006, 20240601);
  for (auto _ : state) benchmark::DoNotOptimize(attn::verify::certify(instance));
}
BENCHMARK(BM_CertifyMaxAi006)->Unit(benchmark::kMillisecond);

// The oracle alone, without bands or certificates: exact conversion, then oracle_block on every
// block (the block's storage reused, as certify does).
std::size_t oracle_all_blocks(const attn::Instance& instance) {
  const attn::verify::ExactInstance exact = attn::verify::make_exact(instance);
  attn::verify::ExactBlock block;
  std::size_t cells = 0;
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t i = 0; i < instance.n; ++i) {
      for (std::size_t g = 0; g < instance.heads; ++g) {
        attn::verify::exact_block(exact, b, i, g, block);
        const attn::verify::BlockAnswer answer = attn::verify::oracle_block(exact, block, instance.decimals);
        benchmark::DoNotOptimize(answer.weights.data());
        cells += answer.cells.size();
      }
    }
  }
  return cells;
}

void BM_OracleMaxAi006(benchmark::State& state) {
  const attn::Instance instance = max_instance(attn::Problem::ai006, 20240601);
  for (auto _ : state) benchmark::DoNotOptimize(oracle_all_blocks(instance));
}
BENCHMARK(BM_OracleMaxAi006)->Unit(benchmark::kMillisecond);

void BM_CertifyMaxAi031(benchmark::State& state) {
  const attn::Instance instance = max_instance(attn::Problem::ai031, 20240601);
  for (auto _ : state) benchmark::DoNotOptimize(attn::verify::certify(instance));
}
BENCHMARK(BM_CertifyMaxAi031)->Unit(benchmark::kMillisecond);

// The same check end to end: certificate plus verdict on the production kernel's output.
void BM_CheckMaxAi006(benchmark::State& state) {
  const attn::Instance instance = max_instance(attn::Problem::ai006, 20240601);
  const std::string output = attn::format_solution(instance, attn::solve(instance));
  for (auto _ : state) {
    benchmark::DoNotOptimize(attn::verify::check_output(attn::verify::certify(instance), output));
  }
}
BENCHMARK(BM_CheckMaxAi006)->Unit(benchmark::kMillisecond);

}  // namespace
