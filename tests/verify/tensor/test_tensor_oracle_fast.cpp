// The tensor oracle's fast double pass (enclose_row_fast) against its MPFI evaluation at 256 bits
// (itself checked against mpmath by TensorOracleMatchesMpmath): every enclosure of the fast pass
// meets the MPFI one (both hold the exact value, and the MPFI one is ~1 ulp wide, so a fast
// enclosure that misses the exact value by more than an ulp fails), over every dtype, mask kind,
// causal alignment, GQA, both layouts, explicit and default scales, and extreme magnitudes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor/tensor_oracle.hpp"

namespace attn::verify {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Values N(0,1)·2^spread rounded to dtype, spread drawn per problem.
TensorProblem varied_problem(std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::normal_distribution<double> normal;
  TensorProblem p;
  const DType dtypes[] = {DType::fp64, DType::fp32, DType::fp16, DType::bf16};
  p.dtype = dtypes[seed % 4];
  p.batch = 1 + random() % 2, p.kv_heads = 1 + random() % 2, p.q_heads = p.kv_heads * (1 + random() % 2);
  p.L = 1 + random() % 5, p.S = 1 + random() % 12, p.E = 1 + random() % 9, p.Ev = 1 + random() % 4;
  p.layout = random() % 2 ? AxisOrder::batch_head_seq : AxisOrder::batch_seq_head;
  const int spread = p.dtype == DType::fp16 ? 3 : static_cast<int>(random() % 12);
  const auto fill = [&](std::vector<double>& v, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) v.push_back(round_to(p.dtype, std::ldexp(normal(random), spread)));
  };
  fill(p.query, p.batch * p.q_heads * p.L * p.E);
  fill(p.key, p.batch * p.kv_heads * p.S * p.E);
  fill(p.value, p.batch * p.kv_heads * p.S * p.Ev);
  if (random() % 3 == 0) p.scale = round_to(p.dtype, std::ldexp(normal(random), -static_cast<int>(random() % 4)));
  p.causal = static_cast<Causal>(random() % 3);
  switch (random() % 3) {
    case 0:
      break;
    case 1:
      p.mask_kind = TensorMask::boolean;
      p.mask_shape = {p.L, p.S};
      for (std::size_t k = 0; k < p.L * p.S; ++k) p.mask.push_back(random() % 4 ? 1 : 0);
      break;
    default:
      p.mask_kind = TensorMask::additive;
      p.mask_shape = {p.L, p.S};
      for (std::size_t k = 0; k < p.L * p.S; ++k) {
        p.mask.push_back(random() % 5 == 0 ? -kInf : round_to(p.dtype, 8 * normal(random)));
      }
  }
  if (random() % 4 == 0) {
    for (std::size_t b = 0; b < p.batch; ++b) p.key_lengths.push_back(random() % (p.S + 1));
  }
  return p;
}

bool meet(Interval a, Interval b) { return a.lo <= b.hi && b.lo <= a.hi; }

// Every enclosure of the fast pass meets the MPFI one; the keys and flags agree.
void expect_consistent(const TensorProblem& p, std::size_t row, const RowEnclosure& fast) {
  const RowEnclosure exact = enclose_row(p, row, 256);
  ASSERT_EQ(fast.keys, exact.keys);
  ASSERT_EQ(fast.empty, exact.empty);
  EXPECT_TRUE(fast.fast);
  EXPECT_TRUE(meet(fast.scale, exact.scale));
  EXPECT_EQ(fast.max_abs_value, exact.max_abs_value);
  for (std::size_t k = 0; k < fast.keys.size(); ++k) {
    EXPECT_TRUE(meet(fast.dots[k], exact.dots[k])) << "key " << k;
    EXPECT_TRUE(meet(fast.scores[k], exact.scores[k])) << "key " << k;
    EXPECT_TRUE(meet(fast.weights[k], exact.weights[k])) << "key " << k;
    EXPECT_GE(fast.abs_dots[k], exact.abs_dots[k] * (1 - 0x1p-52)) << "key " << k;
  }
  for (std::size_t c = 0; c < p.Ev; ++c) {
    const Interval y = fast.out[c];
    EXPECT_TRUE(meet(y, exact.out[c])) << std::hexfloat << "column " << c << ": [" << y.lo << ", " << y.hi << "] vs ["
                                       << exact.out[c].lo << ", " << exact.out[c].hi << "]";
    const FineEnclosure& f = fast.fine[c];
    EXPECT_EQ(f.tail, 0);
    EXPECT_LE(f.head - f.radius, y.lo);  // the fine enclosure covers the double one
    EXPECT_GE(f.head + f.radius, y.hi);
  }
}

TEST(TensorOracleFast, FastPassMeetsTheMpfiEnclosureEverywhere) {
  std::size_t rows = 0;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    const TensorProblem p = varied_problem(seed);
    ASSERT_TRUE(validate(p)) << seed;
    for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
      const std::optional<RowEnclosure> fast = enclose_row_fast(p, row);
      ASSERT_TRUE(fast.has_value()) << "seed " << seed << " row " << row;
      SCOPED_TRACE("seed " + std::to_string(seed) + " row " + std::to_string(row));
      expect_consistent(p, row, *fast);
      ++rows;
    }
  }
  EXPECT_GT(rows, 1000u);
}

TEST(TensorOracleFast, ExtremeScoresUnderflowWithoutLosingTheEnclosure) {
  // Scores 2^20 apart: every key but the top one has e^t = 0 in doubles (a "loose" key).
  TensorProblem p;
  p.S = 4, p.L = 1, p.E = 2, p.Ev = 2, p.dtype = DType::fp32, p.scale = 1;
  p.query = {0x1p20, 1};
  p.key = {1, 0, -1, 0, 0x1p-149, 3, 0.5, 1};
  p.value = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::optional<RowEnclosure> fast = enclose_row_fast(p, 0);
  ASSERT_TRUE(fast);
  expect_consistent(p, 0, *fast);
  EXPECT_LE(fast->out[0].lo, 1);
  EXPECT_GE(fast->out[0].hi, 1);
  // A score of 2^20 is enclosed to ~2^20·2^-52 in doubles, so the output is ~1e-9 wide: still far
  // inside fp32's δ/1000 for such a row (the band grows with the scores).
  EXPECT_LT(fast->out[0].hi - fast->out[0].lo, 1e-8);
  // Scores ~2^100 with the default scale: 1/√E's double enclosure leaves the top score ~2^47 wide,
  // so the pass cannot bound the sum of exponentials away from 0 and gives up; MPFI decides.
  p.query = {0x1p100, 1}, p.scale.reset();
  EXPECT_FALSE(enclose_row_fast(p, 0).has_value());
  const RowEnclosure mpfi = enclose_row(p, 0, std::vector<double>(2, 1e-9));
  EXPECT_FALSE(mpfi.fast);
  EXPECT_LE(mpfi.out[1].lo, 2);
  EXPECT_GE(mpfi.out[1].hi, 2);
}

TEST(TensorOracleFast, NarrowOnNormalFp32Rows) {
  TensorProblem p;
  p.L = 4, p.S = 256, p.E = 64, p.Ev = 64, p.dtype = DType::fp32;
  std::mt19937_64 random(5);
  std::normal_distribution<double> normal;
  for (auto* v : {&p.query, &p.key, &p.value}) {
    for (std::size_t k = 0; k < 256 * 64; ++k) v->push_back(round_to(DType::fp32, normal(random)));
  }
  p.query.resize(4 * 64);
  for (std::size_t row = 0; row < 4; ++row) {
    const std::optional<RowEnclosure> fast = enclose_row_fast(p, row);
    ASSERT_TRUE(fast);
    for (const FineEnclosure& f : fast->fine) EXPECT_LT(2 * f.radius, 1e-11);
  }
  // So the targeted enclosure is the fast one for an fp32-sized target, MPFI for a tiny one.
  const std::vector<double> loose(64, 1e-9), tight(64, 1e-25);
  EXPECT_TRUE(enclose_row(p, 0, loose).fast);
  const RowEnclosure fine = enclose_row(p, 0, tight);
  EXPECT_FALSE(fine.fast);
  EXPECT_GE(fine.bits, 64);
  for (const FineEnclosure& f : fine.fine) EXPECT_LE(2 * f.radius, 1e-25);
}

TEST(TensorOracleFast, GivesUpOutsideTheDoubleRange) {
  TensorProblem p;
  p.S = 2, p.L = 1, p.E = 2, p.Ev = 1, p.dtype = DType::fp64;
  p.query = {1e300, 1e300};
  p.key = {1e300, 1, -1, 2};  // q·k_0 overflows
  p.value = {1, 2};
  EXPECT_FALSE(enclose_row_fast(p, 0).has_value());
  const RowEnclosure e = enclose_row(p, 0, std::vector<double>{1e-6});  // MPFI still encloses it
  EXPECT_FALSE(e.fast);
  EXPECT_LE(e.out[0].lo, 1);
  EXPECT_GE(e.out[0].hi, 1);
  EXPECT_THROW((void)enclose_row_fast(p, 1), ContractError);
}

TEST(TensorOracleFast, CertifyDecidesFp32RowsWithTheFastPassAndFp64RowsWithMpfi) {
  TensorProblem p;
  p.L = 6, p.S = 32, p.E = 8, p.Ev = 4;
  std::mt19937_64 random(9);
  std::normal_distribution<double> normal;
  for (auto* v : {&p.query, &p.key, &p.value}) {
    for (std::size_t k = 0; k < 32 * 8; ++k) v->push_back(round_to(DType::fp32, normal(random)));
  }
  p.query.resize(6 * 8), p.value.resize(32 * 4);
  for (const char* profile : {"fp32", "fp64"}) {
    p.dtype = std::string(profile) == "fp32" ? DType::fp32 : DType::fp64;
    std::vector<double> output;
    for (std::size_t row = 0; row < 6; ++row) {
      for (const FineEnclosure& y : enclose_row(p, row, 128).fine) output.push_back(round_to(p.dtype, y.head));
    }
    CertifyOptions options;
    options.arithmetic = arithmetic_profile(profile).value();
    options.threads = 2;
    const TensorReport report = certify_tensor(p, output, options);
    EXPECT_TRUE(report.passed) << report.summary();
    EXPECT_EQ(report.capped_rows, 0u);
    // fp32's δ/1000 is far above the fast pass's width; fp64's (a few ulps) needs MPFI.
    EXPECT_EQ(report.fast_rows, p.dtype == DType::fp32 ? 6u : 0u) << profile;
  }
}

}  // namespace
}  // namespace attn::verify
