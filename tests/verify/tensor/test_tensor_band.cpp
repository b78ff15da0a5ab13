// tensor_band: every correct kernel in tensor_kernels.hpp stays within δ of the exact value (a
// kernel outside is a bug in the band), wrong kernels leave it (the band is not vacuous), and the band's tightness on N(0,1) data is
// printed. The fp64 band against the judge's band.cpp is a cross-check of the two sides, in
// tests/verify/campaign/test_band_crosscheck.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>

#include "tensor/tensor_band.hpp"
#include "tensor_kernels.hpp"

namespace attn::verify {
namespace {

using namespace attn::testing_support;

enum class Data { normal, large_gap, masked, explicit_scale };

double identity(double x) { return x; }
double to_float(double x) { return static_cast<float>(x); }
using Rounding = double (*)(double);
Rounding storage_rounding(DType dtype) {
  switch (dtype) {
    case DType::fp64: return identity;
    case DType::fp32: return to_float;
    case DType::fp16: return round_fp16;
    case DType::bf16: return round_bf16;
  }
  return identity;
}

// One head of random data exact in `storage`: N(0,1) inputs; large_gap multiplies Q by 40 so
// scores spread over hundreds and exp underflows; masked adds a bias of N(0,2) values with 30%
// -inf (key 0 always kept); explicit_scale passes the multiplier 0.3 instead of 1/√E.
Head make_head(std::size_t L, std::size_t S, std::size_t E, DType storage, Data data, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  const Rounding round = storage_rounding(storage);
  Head h;
  h.L = L, h.S = S, h.E = E, h.Ev = 4;
  const double q_factor = data == Data::large_gap ? 40 : 1;
  for (std::size_t n = 0; n < L * E; ++n) h.Q.push_back(round(q_factor * normal(rng)));
  for (std::size_t n = 0; n < S * E; ++n) h.K.push_back(round(normal(rng)));
  for (std::size_t n = 0; n < S * h.Ev; ++n) h.V.push_back(round(normal(rng)));
  if (data == Data::masked) {
    std::uniform_real_distribution<double> coin(0, 1);
    for (std::size_t n = 0; n < L * S; ++n) {
      const bool drop = n % S != 0 && coin(rng) < 0.3;
      h.bias.push_back(drop ? -std::numeric_limits<double>::infinity() : round(2 * normal(rng)));
    }
  }
  if (data == Data::explicit_scale) h.scale_defaulted = false, h.scale = 0.3;
  return h;
}

struct Variant {
  const char* name;
  KernelChoices choices;
};

// The largest |err|/δ over the head's outputs; every element beyond δ is reported (when `expect_inside`).
double worst_usage(const Head& h, const std::vector<double>& got, const Arithmetic& arithmetic, bool expect_inside,
                   const std::string& context) {
  double worst = 0;
  for (std::size_t i = 0; i < h.L; ++i) {
    const ExactRow exact = exact_row(h, i);
    const std::vector<double> band = tensor_row_bands(exact.terms, arithmetic);
    for (std::size_t c = 0; c < h.Ev; ++c) {
      const double err = static_cast<double>(fabsq(got[i * h.Ev + c] - exact.y[c]));
      const double usage = err / band[c];
      worst = std::max(worst, std::isnan(usage) ? HUGE_VAL : usage);
      if (expect_inside && !(err <= band[c])) {
        ADD_FAILURE() << context << ": row " << i << " column " << c << " got " << got[i * h.Ev + c] << " exact "
                      << static_cast<double>(exact.y[c]) << " |err| " << err << " > δ " << band[c];
        return worst;
      }
    }
  }
  return worst;
}

template <class T>
void expect_within_band(const char* profile, const std::vector<Variant>& variants, unsigned seeds) {
  const Arithmetic arithmetic = arithmetic_profile(profile).value();
  for (std::size_t S : {1, 7, 64, 1024})
    for (std::size_t E : {1, 16, 64, 128})
      for (Data data : {Data::normal, Data::large_gap, Data::masked, Data::explicit_scale})
        for (unsigned seed = 1; seed <= seeds; ++seed) {
          const Head h = make_head(S == 1024 ? 2 : 3, S, E, arithmetic.storage, data, seed);
          for (const Variant& v : variants) {
            const std::string context = std::string(profile) + " " + v.name + " S=" + std::to_string(S) +
                                        " E=" + std::to_string(E) + " data=" + std::to_string(int(data)) +
                                        " seed=" + std::to_string(seed);
            worst_usage(h, attention_kernel<T>(h, v.choices), arithmetic, true, context);
          }
        }
}

// The freedoms of a correct kernel in compute precision, with `p` and `out` as the storage roundings.
std::vector<Variant> correct_variants(Rounding p, Rounding out) {
  return {
      {"straightforward", {.round_out = out}},
      {"normalize-first", {.normalize_first = true, .round_out = out}},
      {"tiled-7", {.tile = 7, .round_p = p, .round_out = out}},
      {"tiled-1", {.tile = 1, .round_p = p, .round_out = out}},
      {"query-first", {.tile = 16, .scaling = Scaling::query_first, .round_p = p, .round_out = out}},
      {"folded-exp2", {.tile = 16, .scaling = Scaling::folded_exp2, .round_p = p, .round_out = out}},
      {"folded-exp2-tiled-1", {.tile = 1, .scaling = Scaling::folded_exp2, .round_p = p, .round_out = out}},
  };
}

TEST(TensorBand, ProfilesByName) {
  const auto fp16 = arithmetic_profile("fp16");
  ASSERT_TRUE(fp16.ok());
  EXPECT_EQ(fp16->storage, DType::fp16);
  EXPECT_EQ(fp16->compute, DType::fp32);
  EXPECT_TRUE(fp16->weights_in_storage);
  EXPECT_EQ(arithmetic_profile("fp64")->exp_ulps, 1);
  const auto bad = arithmetic_profile("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'fp8'"), std::string::npos);
}

TEST(TensorBand, RowWithoutKeysIsExactlyZero) {
  RowTerms terms;
  terms.abs_v_max = {1, 2};
  terms.abs_y = {0, 0};
  terms.abs_v_minus_y = {{}, {}};
  EXPECT_EQ(tensor_row_bands(terms, arithmetic_profile("fp32").value()), (std::vector<double>{0, 0}));
}

TEST(TensorBand, MismatchedTermsAreAContractError) {
  RowTerms terms;
  terms.keys = 2;
  EXPECT_THROW((void)tensor_row_bands(terms, Arithmetic{}), ContractError);
}

TEST(TensorBand, EveryFp64KernelWithinBand) { expect_within_band<double>("fp64", correct_variants(nullptr, nullptr), 2); }
TEST(TensorBand, EveryFp32KernelWithinBand) { expect_within_band<float>("fp32", correct_variants(nullptr, nullptr), 3); }
TEST(TensorBand, EveryFp16KernelWithinBand) {
  expect_within_band<float>("fp16", correct_variants(round_fp16, round_fp16), 2);
}
TEST(TensorBand, EveryBf16KernelWithinBand) {
  expect_within_band<float>("bf16", correct_variants(round_bf16, round_bf16), 2);
}

// A wrong fp32 kernel leaves the fp32 band somewhere on typical data (S = 64, E = 64, N(0,1)).
void expect_exceeds_fp32_band(const KernelChoices& choices) {
  const Arithmetic fp32 = arithmetic_profile("fp32").value();
  double worst = 0;
  for (unsigned seed = 1; seed <= 3; ++seed) {
    const Head h = make_head(4, 64, 64, DType::fp32, Data::normal, seed);
    worst = std::max(worst, worst_usage(h, attention_kernel<float>(h, choices), fp32, false, ""));
  }
  EXPECT_GT(worst, 1.0);
  std::printf("worst |err|/δ %.3g\n", worst);
}

TEST(TensorBand, ExpInFp16ExceedsFp32Band) { expect_exceeds_fp32_band({.exp_in_fp16 = true}); }
TEST(TensorBand, UnrescaledSumExceedsFp32Band) { expect_exceeds_fp32_band({.tile = 8, .sum_not_rescaled = true}); }
TEST(TensorBand, WeightsInBf16ExceedFp32Band) { expect_exceeds_fp32_band({.tile = 16, .round_p = round_bf16}); }
TEST(TensorBand, Fp16AccumulatorExceedsFp32Band) { expect_exceeds_fp32_band({.accumulate_in_fp16 = true}); }

TEST(TensorBand, RoundingToHalfFormats) {
  EXPECT_EQ(round_fp16(1 + 0x1p-11), 1.0);             // a tie goes to even
  EXPECT_EQ(round_fp16(1 + 0x1.8p-11), 1 + 0x1p-10);
  EXPECT_EQ(round_fp16(0x1p-25), 0.0);                 // half the smallest subnormal: tie to 0
  EXPECT_EQ(round_fp16(0x1.8p-25), 0x1p-24);
  EXPECT_EQ(round_fp16(65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(round_fp16(65520.0)));
  EXPECT_EQ(round_bf16(1 + 0x1.8p-8), 1 + 0x1p-7);
  EXPECT_EQ(round_bf16(0x1p-133), 0x1p-133);
}

// Not an assertion: |err|/δ of the straightforward fp32 kernel on N(0,1) data, E = 64. Measured
// (seed 11): median 6e-4 at S = 64, 4e-5 at 1024, 1.2e-5 at 4096, so δ is 1.6e3 to 8.5e4 times
// the typical error. Why: δ is a worst case, ~ (γ_{4k+1} Σ w|v| + k·η Σ w|v - y|) ~ 8ku |v| for
// T = k tiles and every exp at its ulps limit, while rounding errors in practice are independent
// and grow like √k u (Higham and Mary, SIAM J. Sci. Comput. 41 (2019)), and the output of N(0,1)
// values averaged over k keys is itself ~ |v|/√k, so its rounding errors shrink with k too.
TEST(TensorBand, TightnessOfStraightforwardFp32) {
  const Arithmetic fp32 = arithmetic_profile("fp32").value();
  for (std::size_t S : {64, 1024, 4096}) {
    const Head h = make_head(16, S, 64, DType::fp32, Data::normal, 11);
    const std::vector<double> got = attention_kernel<float>(h, {});
    std::vector<double> usage;
    for (std::size_t i = 0; i < h.L; ++i) {
      const ExactRow exact = exact_row(h, i);
      const std::vector<double> band = tensor_row_bands(exact.terms, fp32);
      for (std::size_t c = 0; c < h.Ev; ++c) usage.push_back(static_cast<double>(fabsq(got[i * h.Ev + c] - exact.y[c])) / band[c]);
    }
    std::sort(usage.begin(), usage.end());
    std::printf("S=%zu E=64: |err|/δ median %.3g max %.3g (δ/|err| median %.3g)\n", S, usage[usage.size() / 2],
                usage.back(), 1 / usage[usage.size() / 2]);
    EXPECT_LE(usage.back(), 1.0);
  }
}

}  // namespace
}  // namespace attn::verify
