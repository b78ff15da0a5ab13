// certify_tensor's verdicts on hand-made outputs: the exact result rounded passes, a perturbed
// element is named, NaN/Inf/non-zero masked rows get their own reasons, sampling keeps the first,
// last and fully masked rows, and the report does not depend on the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <random>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_band.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor/tensor_oracle.hpp"
#include "certify_test_support.hpp"

namespace attn::verify {
namespace {

// B = 2, Hq = 2, Hkv = 1 (GQA), L = 5 > S = 3 with bottom-right causal: queries 0 and 1 see no
// key (rows 0, 1, 5, 6, ...). Values k/8 are exact in every format.
TensorProblem problem(DType dtype) {
  TensorProblem p;
  p.batch = 2, p.q_heads = 2, p.kv_heads = 1, p.L = 5, p.S = 3, p.E = 4, p.Ev = 3, p.dtype = dtype;
  p.causal = Causal::bottom_right;
  std::mt19937_64 random(42);
  const auto fill = [&](std::vector<double>& v, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) v.push_back(static_cast<double>(static_cast<int>(random() % 33) - 16) / 8);
  };
  fill(p.query, 2 * 2 * 5 * 4);
  fill(p.key, 2 * 1 * 3 * 4);
  fill(p.value, 2 * 1 * 3 * 3);
  return p;
}

using test::at;
using test::kFixedBand;
using test::rounded_exact;

TEST(TensorCertify, RoundedExactResultPasses) {
  const TensorProblem p = problem(DType::fp32);
  const TensorReport report = certify_tensor(p, rounded_exact(p), {}, kFixedBand);
  EXPECT_TRUE(report.passed) << report.summary();
  EXPECT_EQ(report.rows_checked, 20u);
  EXPECT_EQ(report.elements_certified, 12u * 3);  // 12 rows with keys
  EXPECT_LE(report.max_band_usage, 0.1);          // half an fp32 ulp of values <= 2 is below 1.2e-7
  EXPECT_EQ(report.usage_histogram.size(), 14u);
  EXPECT_EQ(report.summary().rfind("passed", 0), 0u);
}

TEST(TensorCertify, PerturbedElementIsNamedWithItsIndex) {
  const TensorProblem p = problem(DType::fp32);
  std::vector<double> output = rounded_exact(p);
  output[at(p, 1, 0, 3, 2)] += 0.25;
  output[at(p, 0, 1, 4, 0)] += 1e-5;
  const TensorReport report = certify_tensor(p, output, {}, kFixedBand);
  EXPECT_FALSE(report.passed);
  ASSERT_EQ(report.failures.size(), 2u);
  const TensorFailure& worst = report.failures[0];  // worst first
  EXPECT_EQ(worst.index, (std::array<std::size_t, 4>{1, 0, 3, 2}));
  EXPECT_EQ(worst.reason, "outside band");
  EXPECT_EQ(worst.band, 1e-6);
  EXPECT_NEAR(worst.usage, 0.25 / 1e-6, 1);
  EXPECT_GT(worst.ulps, 1e5);
  EXPECT_LE(worst.exact.lo, worst.got - 0.24);
  EXPECT_EQ(report.failures[1].index, (std::array<std::size_t, 4>{0, 1, 4, 0}));
  EXPECT_NE(report.summary().find("worst (1, 0, 3, 2): outside band"), std::string::npos) << report.summary();
}

TEST(TensorCertify, MaskedRowsMustBeExactlyZero) {
  const TensorProblem p = problem(DType::fp32);
  std::vector<double> output = rounded_exact(p);
  output[at(p, 0, 0, 0, 1)] = std::nan("");
  output[at(p, 1, 1, 1, 0)] = -0.0;  // -0 is zero
  output[at(p, 1, 1, 0, 2)] = 1e-30;
  output[at(p, 0, 1, 2, 0)] = std::numeric_limits<double>::infinity();
  output[at(p, 0, 1, 3, 1)] = std::nan("");
  const TensorReport report = certify_tensor(p, output, {}, kFixedBand);
  ASSERT_EQ(report.failure_count, 4u);
  std::vector<std::string> reasons;
  for (const TensorFailure& f : report.failures) reasons.push_back(f.reason);
  std::sort(reasons.begin(), reasons.end());
  EXPECT_EQ(reasons, (std::vector<std::string>{"Inf", "NaN", "NaN in a fully masked row", "masked row not zero"}));
}

TEST(TensorCertify, SampleKeepsFirstLastAndMaskedRows) {
  const TensorProblem p = problem(DType::fp32);
  const std::vector<std::size_t> sample = sample_rows(p, 10, 7);
  for (std::size_t row : {0, 1, 5, 6, 10, 11, 15, 16, 19}) {
    EXPECT_TRUE(std::find(sample.begin(), sample.end(), row) != sample.end()) << row;
  }
  EXPECT_EQ(sample.size(), 10u);
  EXPECT_EQ(sample_rows(p, 10, 7), sample);  // a seed replays
  EXPECT_EQ(sample_rows(p, 2, 7).size(), 9u);  // the mandatory rows alone are more
  EXPECT_EQ(sample_rows(p, std::nullopt, 0).size(), 20u);
  // The cheap checks still cover rows outside the sample.
  std::vector<double> output = rounded_exact(p);
  const std::vector<std::size_t> small = sample_rows(p, 9, 3);
  std::size_t outside = 0;
  while (std::find(small.begin(), small.end(), outside) != small.end()) ++outside;
  const RowIndex r = row_index(p, outside);
  output[at(p, r.b, r.h, r.i, 0)] = std::numeric_limits<double>::infinity();
  output[at(p, r.b, r.h, r.i, 1)] += 0.5;  // not certified: not seen
  CertifyOptions options;
  options.rows = 9, options.seed = 3;
  const TensorReport report = certify_tensor(p, output, options, kFixedBand);
  EXPECT_EQ(report.rows_checked, 9u);
  ASSERT_EQ(report.failure_count, 1u);
  EXPECT_EQ(report.failures[0].reason, "Inf");
}

TEST(TensorCertify, ThreadCountDoesNotChangeTheReport) {
  const TensorProblem p = problem(DType::fp16);
  std::vector<double> output = rounded_exact(p);
  output[at(p, 1, 1, 4, 1)] += 0.125;
  CertifyOptions one, four;
  one.threads = 1, four.threads = 4;
  const TensorReport a = certify_tensor(p, output, one, kFixedBand);
  const TensorReport b = certify_tensor(p, output, four, kFixedBand);
  EXPECT_EQ(a.summary(), b.summary());
  EXPECT_EQ(a.max_band_usage, b.max_band_usage);
  EXPECT_EQ(a.usage_histogram, b.usage_histogram);
}

TEST(TensorCertify, ArithmeticBandsAcceptTheRoundedExactResult) {
  for (const char* name : {"fp64", "fp32", "fp16", "bf16"}) {
    const auto arithmetic = arithmetic_profile(name);
    ASSERT_TRUE(arithmetic.ok()) << name;
    const TensorProblem p = problem(arithmetic->storage);
    CertifyOptions options;
    options.arithmetic = *arithmetic;
    const TensorReport report = certify_tensor(p, rounded_exact(p), options);
    EXPECT_TRUE(report.passed) << name << ": " << report.summary();
    EXPECT_EQ(report.capped_rows, 0u) << name;
    std::vector<double> output = rounded_exact(p);
    output[at(p, 0, 0, 4, 0)] += 0.5;
    EXPECT_FALSE(certify_tensor(p, output, options).passed) << name;
  }
}

// fp32 queries against bf16 keys and values: validation checks each tensor in its own format, and
// the band rounds P to the value's format (weights_in_storage), which certify_tensor reads from the
// problem: an output 1e-4 off (relative) passes that band and fails the band of fp32 values.
TEST(TensorCertify, KeyAndValueKeepTheirOwnFormat) {
  TensorProblem p = problem(DType::fp32);
  for (double& q : p.query) q += 0x1p-20;  // fp32, not bf16
  p.kv_dtype = DType::bf16;
  ASSERT_TRUE(validate(p).ok()) << validate(p).error().message;
  TensorProblem wrong = p;
  wrong.key[0] += 0x1p-20;
  ASSERT_FALSE(validate(wrong).ok());
  EXPECT_EQ(validate(wrong).error().message.rfind("key: element (0, 0, 0, 0) of ", 0), 0u);
  EXPECT_NE(validate(wrong).error().message.find("is not representable in bf16"), std::string::npos);
  CertifyOptions options;
  options.arithmetic = arithmetic_profile("fp32").value();
  options.arithmetic.weights_in_storage = true;
  std::vector<double> output = rounded_exact(p);
  EXPECT_TRUE(certify_tensor(p, output, options).passed);
  for (double& y : output) y *= 1 + 1e-4;
  EXPECT_TRUE(certify_tensor(p, output, options).passed) << certify_tensor(p, output, options).summary();
  TensorProblem uniform = p;
  uniform.kv_dtype.reset();
  EXPECT_FALSE(certify_tensor(uniform, output, options).passed);
}

TEST(TensorCertify, PlainRatioIsReported) {
  const TensorProblem p = problem(DType::fp32);
  const TensorReport report = certify_tensor(p, rounded_exact(p), {}, kFixedBand);
  // The exact result rounded is within half an ulp: never worse than the plain computation.
  EXPECT_LE(report.max_plain_ratio, 1.0 + 1e-9);
  EXPECT_GT(report.mean_plain_ratio, 0.0);
}

// The exact LSE of every row ([B, Hq, L]) rounded to fp32 (in base 2 when asked); -inf without keys.
std::vector<double> rounded_lse(const TensorProblem& p, bool base2 = false) {
  std::vector<double> lse;
  for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
    const RowEnclosure e = enclose_row(p, row, 128);
    lse.push_back(e.empty ? -HUGE_VAL : round_to(DType::fp32, base2 ? e.lse_fine.head / std::numbers::ln2 : e.lse_fine.head));
  }
  return lse;
}

std::size_t lse_at(const TensorProblem& p, std::size_t b, std::size_t h, std::size_t i) {
  return (b * p.q_heads + h) * p.L + i;
}

TEST(TensorCertifyLse, OracleEnclosesTheLseInBothPasses) {
  const TensorProblem p = problem(DType::fp32);
  for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
    const RowEnclosure precise = enclose_row(p, row, 256);
    const std::optional<RowEnclosure> fast = enclose_row_fast(p, row);
    ASSERT_TRUE(fast.has_value());
    if (precise.empty) {
      EXPECT_EQ(precise.lse.lo, -HUGE_VAL);
      EXPECT_EQ(fast->lse.hi, -HUGE_VAL);
      continue;
    }
    // log Σ e^{s_j} by hand in long double, from the exact scores' midpoints.
    long double total = 0, top = -HUGE_VALL;
    for (const Interval& s : precise.scores) top = std::max<long double>(top, s.lo);
    for (const Interval& s : precise.scores) total += std::exp(static_cast<long double>(s.lo) - top);
    const double by_hand = static_cast<double>(top + std::log(total));
    EXPECT_NEAR(precise.lse_fine.head, by_hand, 1e-14 * (1 + std::fabs(by_hand))) << "row " << row;
    EXPECT_LE(precise.lse.lo, precise.lse_fine.head);
    EXPECT_GE(precise.lse.hi, precise.lse_fine.head);
    EXPECT_LE(precise.lse_fine.radius, 1e-30);  // head + tail hold ~106 bits
    // The fast pass's wider enclosure holds the precise one.
    EXPECT_LE(fast->lse.lo, precise.lse.lo) << "row " << row;
    EXPECT_GE(fast->lse.hi, precise.lse.hi) << "row " << row;
    EXPECT_LE(fast->lse.hi - fast->lse.lo, 1e-12);
  }
}

TEST(TensorCertifyLse, RoundedExactLsePassesAndAMovedRowIsNamed) {
  const TensorProblem p = problem(DType::fp32);
  CertifyOptions options;
  options.arithmetic = arithmetic_profile("fp32").value();
  std::vector<double> lse = rounded_lse(p);
  const TensorReport report = certify_lse(p, lse, options);
  EXPECT_TRUE(report.passed) << report.summary();
  EXPECT_EQ(report.elements_certified, 12u);
  EXPECT_LT(report.max_band_usage, 0.1) << report.summary();
  EXPECT_EQ(report.summary().find("plain"), std::string::npos);
  lse[lse_at(p, 1, 0, 3)] = std::nextafter(static_cast<float>(lse[lse_at(p, 1, 0, 3)]), 1e9f) + 1e-4;
  const TensorReport moved = certify_lse(p, lse, options);
  EXPECT_FALSE(moved.passed);
  EXPECT_FALSE(moved.statistical.passed);  // one band for both tiers
  ASSERT_EQ(moved.failures.size(), 1u) << moved.summary();
  EXPECT_EQ(moved.failures[0].index, (std::array<std::size_t, 4>{1, 0, 3, 0}));
  EXPECT_EQ(moved.failures[0].reason, "outside band");
  EXPECT_GT(moved.failures[0].usage, 1);
}

TEST(TensorCertifyLse, RowsWithoutKeysHoldTheDeclaredInfinity) {
  const TensorProblem p = problem(DType::fp32);
  CertifyOptions options;
  options.arithmetic = arithmetic_profile("fp32").value();
  std::vector<double> lse = rounded_lse(p);
  ASSERT_EQ(lse[lse_at(p, 0, 0, 0)], -HUGE_VAL);  // query 0 sees no key
  std::vector<double> plus = lse;
  for (double& x : plus) x = x == -HUGE_VAL ? HUGE_VAL : x;
  EXPECT_TRUE(certify_lse(p, plus, options, {.masked_plus_inf = true}).passed);
  const TensorReport wrong = certify_lse(p, plus, options);
  EXPECT_EQ(wrong.failure_count, 8u);  // 2 batches × 2 heads × queries 0 and 1
  EXPECT_EQ(wrong.failures[0].reason, "masked row LSE not -inf");
  lse[lse_at(p, 0, 1, 1)] = 0;  // FlashAttention 1 wrote 0 there
  lse[lse_at(p, 1, 1, 4)] = std::nan("");
  const TensorReport report = certify_lse(p, lse, options);
  std::vector<std::string> reasons;
  for (const TensorFailure& f : report.failures) reasons.push_back(f.reason);
  std::sort(reasons.begin(), reasons.end());
  EXPECT_EQ(reasons, (std::vector<std::string>{"NaN", "masked row LSE not -inf"}));
}

TEST(TensorCertifyLse, Base2IsItsOwnDeclaration) {
  const TensorProblem p = problem(DType::fp32);
  CertifyOptions options;
  options.arithmetic = arithmetic_profile("fp32").value();
  const std::vector<double> log2 = rounded_lse(p, true);
  EXPECT_TRUE(certify_lse(p, log2, options, {.base2 = true}).passed);
  const TensorReport natural = certify_lse(p, log2, options);
  EXPECT_FALSE(natural.passed);
  EXPECT_GT(natural.max_band_usage, 1000);
  EXPECT_FALSE(certify_lse(p, rounded_lse(p), options, {.base2 = true}).passed);
}

TEST(TensorCertifyLse, SizeAndStructureAreContractErrors) {
  const TensorProblem p = problem(DType::fp32);
  std::vector<double> lse = rounded_lse(p);
  lse.pop_back();
  EXPECT_THROW((void)certify_lse(p, lse, {}), ContractError);
  CertifyOptions bad;
  bad.arithmetic.structure.sum_chunk = 0;
  EXPECT_THROW((void)certify_lse(p, rounded_lse(p), bad), ContractError);
}

TEST(TensorCertifyLse, OnePassEqualsTheTwoCalls) {
  const TensorProblem p = problem(DType::fp32);
  CertifyOptions options;
  options.arithmetic = arithmetic_profile("fp32").value();
  std::vector<double> output = rounded_exact(p), lse = rounded_lse(p);
  output[at(p, 1, 0, 3, 2)] += 0.25;
  lse[lse_at(p, 0, 1, 4)] += 1e-3;
  lse[lse_at(p, 0, 0, 0)] = 0;  // a row without keys
  const auto [out_report, lse_report] = certify_tensor_and_lse(p, output, lse, options);
  const TensorReport out_alone = certify_tensor(p, output, options), lse_alone = certify_lse(p, lse, options);
  EXPECT_EQ(out_report.failure_count, out_alone.failure_count);
  EXPECT_EQ(out_report.max_band_usage, out_alone.max_band_usage);
  EXPECT_EQ(out_report.consistent_with, out_alone.consistent_with);
  ASSERT_EQ(lse_report.failure_count, 2u) << lse_report.summary();
  EXPECT_EQ(lse_report.failure_count, lse_alone.failure_count);
  EXPECT_EQ(lse_report.rows_checked, lse_alone.rows_checked);
  EXPECT_NEAR(lse_report.max_band_usage, lse_alone.max_band_usage, 1e-3 * lse_alone.max_band_usage);
  ASSERT_EQ(lse_report.failures.size(), lse_alone.failures.size());
  for (std::size_t n = 0; n < lse_report.failures.size(); ++n) {
    EXPECT_EQ(lse_report.failures[n].index, lse_alone.failures[n].index);
    EXPECT_EQ(lse_report.failures[n].reason, lse_alone.failures[n].reason);
  }
  EXPECT_FALSE(lse_report.plain);
  CertifyOptions bad = options;
  bad.arithmetic.structure.sum_chunk = 0;
  EXPECT_THROW((void)certify_tensor_and_lse(p, output, lse, bad), ContractError);
  lse.pop_back();
  EXPECT_THROW((void)certify_tensor_and_lse(p, output, lse, options), ContractError);
}

}  // namespace
}  // namespace attn::verify
