// The tensor oracle's double interval primitives against MPFR: exp_enclosure contains e^x (MPFR at
// 256 bits, rounded down and up) for random arguments over the whole double range and at the
// edges (−inf, huge negatives, subnormal results, 0, subnormal arguments, overflow), and is narrow;
// the sum-of-products bound covers the exact error, with cancellation and underflow.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "numeric/double_interval.hpp"
#include "numeric/mpfr.hpp"

namespace attn::verify {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTiny = std::numeric_limits<double>::denorm_min();

// lo <= e^x <= hi, checked against e^x rounded down and up at 256 bits (so the check is exact).
::testing::AssertionResult contains_exp(double x) {
  const Interval e = exp_enclosure(x);
  MpfrFloat arg(64), low(256), high(256);
  mpfr_set_d(arg.get(), x, MPFR_RNDN);  // exact
  mpfr_exp(low.get(), arg.get(), MPFR_RNDD);
  mpfr_exp(high.get(), arg.get(), MPFR_RNDU);
  if (mpfr_cmp_d(low.get(), e.lo) >= 0 && mpfr_cmp_d(high.get(), e.hi) <= 0 && e.lo >= 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << std::hexfloat << "x = " << x << ": [" << e.lo << ", " << e.hi
                                       << "] misses e^x = " << mpfr_get_d(low.get(), MPFR_RNDN);
}

TEST(TensorDoubleInterval, ExpEnclosureContainsExpOverTheWholeRange) {
  std::mt19937_64 random(20240611);
  std::uniform_real_distribution<double> wide(-760, 715), unit(-1, 1);
  std::uniform_int_distribution<int> exponent(-1074, 4);
  for (int k = 0; k < 20000; ++k) {
    EXPECT_TRUE(contains_exp(wide(random)));
    EXPECT_TRUE(contains_exp(unit(random)));
    EXPECT_TRUE(contains_exp(std::ldexp(unit(random), exponent(random))));  // tiny arguments, subnormals too
    // Next to a multiple of ln 2 / 2, where the reduction switches n.
    const double boundary = (static_cast<double>(k % 2200) - 1100) * 0.34657359027997264;
    EXPECT_TRUE(contains_exp(boundary));
    EXPECT_TRUE(contains_exp(next_up(boundary)));
    EXPECT_TRUE(contains_exp(next_down(boundary)));
  }
}

// tanh_enclosure({x, x}) holds tanh x (MPFR at 256 bits, rounded both ways) and is narrow: within
// 2^-30 relative of it away from 0 (the (1 - t)/(1 + t) branch loses bits to 1 - t near 2^-10;
// ample beside fp32 bands, and wider rows fall to MPFI), 2^-40 in the series branch below 2^-10.
::testing::AssertionResult tanh_holds(double x) {
  const Interval t = tanh_enclosure({x, x});
  MpfrFloat arg(64), low(256), high(256);
  mpfr_set_d(arg.get(), x, MPFR_RNDN);
  mpfr_tanh(low.get(), arg.get(), MPFR_RNDD);
  mpfr_tanh(high.get(), arg.get(), MPFR_RNDU);
  const double exact = mpfr_get_d(low.get(), MPFR_RNDN);
  const bool holds = mpfr_cmp_d(low.get(), t.lo) >= 0 && mpfr_cmp_d(high.get(), t.hi) <= 0;
  const bool narrow = t.hi - t.lo <= std::fabs(exact) * (std::fabs(x) > 0x1p-10 ? 0x1p-30 : 0x1p-40) + 0x1p-1070;
  if (holds && narrow && t.lo >= -1 && t.hi <= 1) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << std::hexfloat << "x = " << x << ": [" << t.lo << ", " << t.hi
                                       << "] against tanh x = " << exact << (holds ? " (too wide)" : " (misses it)");
}

TEST(TensorDoubleInterval, TanhEnclosureHoldsTanhAndIsNarrow) {
  std::mt19937_64 random(20261202);
  std::uniform_real_distribution<double> unit(-1, 1);
  std::uniform_int_distribution<int> exponent(-1074, 6);
  for (int k = 0; k < 20000; ++k) {
    EXPECT_TRUE(tanh_holds(std::ldexp(unit(random), exponent(random))));
    EXPECT_TRUE(tanh_holds(40 * unit(random)));
  }
  for (double x : {0.0, -0.0, 0x1p-10, next_up(0x1p-10), next_down(0x1p-10), -0x1p-10, 1e-300, kTiny, 18.0, 19.1,
                   20.0, 40.0, 400.0, -400.0, 1e300})
    EXPECT_TRUE(tanh_holds(x));
  const Interval wide = tanh_enclosure({-3, 0.5});  // increasing: the ends' enclosures
  EXPECT_LE(wide.lo, std::tanh(-3.0));
  EXPECT_GE(wide.hi, std::tanh(0.5));
  EXPECT_EQ(tanh_enclosure({kInf, kInf}).hi, 1);
  EXPECT_EQ(tanh_enclosure({-kInf, -kInf}).lo, -1);
  EXPECT_THROW((void)tanh_enclosure({std::nan(""), 0}), ContractError);
}

TEST(TensorDoubleInterval, ExpEnclosureEdges) {
  EXPECT_EQ(exp_enclosure(-kInf).lo, 0);
  EXPECT_EQ(exp_enclosure(-kInf).hi, 0);
  EXPECT_EQ(exp_enclosure(0.0).lo, 1);
  EXPECT_EQ(exp_enclosure(-0.0).hi, 1);
  EXPECT_EQ(exp_enclosure(-1e300).lo, 0);
  EXPECT_EQ(exp_enclosure(-1e300).hi, kTiny);
  EXPECT_EQ(exp_enclosure(kInf).hi, kInf);
  EXPECT_THROW((void)exp_enclosure(std::nan("")), ContractError);
  // Subnormal results (e^x < 2^-1022 below x ≈ -708.4) and the last ones above 0.
  for (double x = -708.5; x > -746.5; x -= 0.0625) EXPECT_TRUE(contains_exp(x));
  for (double x : {-745.1332191019411, -745.1332191019412, -744.44007192138126, -746.0, -745.9, 709.0, 709.5, 709.78,
                   710.0, -kTiny, kTiny, -0x1p-1022, 1e-300, -1e-16, 1e-16}) {
    EXPECT_TRUE(contains_exp(x));
  }
  EXPECT_GT(exp_enclosure(-745.0).hi, 0);
}

TEST(TensorDoubleInterval, ExpEnclosureIsNarrowForNormalResults) {
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> normal_range(-708, 709);
  for (int k = 0; k < 20000; ++k) {
    const double x = normal_range(random);
    const Interval e = exp_enclosure(x);
    EXPECT_LT((e.hi - e.lo) / e.lo, 0x1p-44) << std::hexfloat << x;  // 2·2^-46 and two steps
  }
}

// Σ x_i y_i computed in double, its bound, against the exact sum (MPFR, 2200 bits: exact).
void check_product_sum(const std::vector<double>& x, const std::vector<double>& y) {
  double sum = 0, abs_sum = 0;
  MpfrFloat exact(2200), abs_exact(2200), term(2200);
  mpfr_set_zero(exact.get(), 1);
  mpfr_set_zero(abs_exact.get(), 1);
  for (std::size_t i = 0; i < x.size(); ++i) {
    sum += x[i] * y[i];
    abs_sum += std::fabs(x[i] * y[i]);
    mpfr_set_d(term.get(), x[i], MPFR_RNDN);
    mpfr_mul_d(term.get(), term.get(), y[i], MPFR_RNDN);        // exact
    mpfr_add(exact.get(), exact.get(), term.get(), MPFR_RNDN);  // exact
    mpfr_abs(term.get(), term.get(), MPFR_RNDN);
    mpfr_add(abs_exact.get(), abs_exact.get(), term.get(), MPFR_RNDN);
  }
  mpfr_sub_d(exact.get(), exact.get(), sum, MPFR_RNDN);  // exact
  mpfr_abs(exact.get(), exact.get(), MPFR_RNDN);
  const ProductSumBound bound(x.size());
  EXPECT_LE(mpfr_cmp_d(exact.get(), bound.error(abs_sum)), 0) << x.size();
  EXPECT_LE(mpfr_cmp_d(abs_exact.get(), bound.abs_upper(abs_sum)), 0) << x.size();
}

TEST(TensorDoubleInterval, ProductSumErrorCoversCancellationAndUnderflow) {
  std::mt19937_64 random(11);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> scale(-560, 500);
  for (int k = 0; k < 2000; ++k) {
    const std::size_t n = 1 + random() % 300;
    std::vector<double> x(n), y(n);
    const int e = scale(random);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = std::ldexp(normal(random), e);
      y[i] = std::ldexp(normal(random), k % 3 == 0 ? -e - 1030 : -e / 2);  // products far below 2^-1022
    }
    if (k % 2 == 0 && n > 1) {  // cancellation: the last term undoes the rest
      double partial = 0;
      for (std::size_t i = 0; i + 1 < n; ++i) partial += x[i] * y[i];
      y[n - 1] = 1, x[n - 1] = -partial;
    }
    check_product_sum(x, y);
  }
  // A bound that does not hold for the sum rounded the other way: the check can fail.
  EXPECT_GT(ProductSumBound(2).error(1.0), 0x1p-53);
}

TEST(TensorDoubleInterval, OperationsRoundOutwards) {
  std::mt19937_64 random(3);
  std::normal_distribution<double> normal;
  for (int k = 0; k < 5000; ++k) {
    const double a = normal(random), b = normal(random), c = std::fabs(normal(random)) + 1e-3;
    const Interval product = multiply({a, a}, {b, b}), quotient = divide_by_positive({a, a}, {c, c});
    const Interval sum = add({a, a}, {b, b});
    MpfrFloat exact(200);
    mpfr_set_d(exact.get(), a, MPFR_RNDN);
    mpfr_mul_d(exact.get(), exact.get(), b, MPFR_RNDN);  // exact
    EXPECT_TRUE(mpfr_cmp_d(exact.get(), product.lo) >= 0 && mpfr_cmp_d(exact.get(), product.hi) <= 0);
    mpfr_set_d(exact.get(), a, MPFR_RNDN);
    mpfr_add_d(exact.get(), exact.get(), b, MPFR_RNDN);  // exact
    EXPECT_TRUE(mpfr_cmp_d(exact.get(), sum.lo) >= 0 && mpfr_cmp_d(exact.get(), sum.hi) <= 0);
    mpfr_set_d(exact.get(), a, MPFR_RNDN);
    mpfr_div_d(exact.get(), exact.get(), c, MPFR_RNDN);  // within 2^-200 relative
    EXPECT_TRUE(mpfr_cmp_d(exact.get(), quotient.lo) >= 0 && mpfr_cmp_d(exact.get(), quotient.hi) <= 0);
  }
  EXPECT_EQ(next_down(0.0), -kTiny);
  EXPECT_EQ(next_up(-kTiny), -0.0);
  EXPECT_EQ(next_down(kInf), std::numeric_limits<double>::max());
  EXPECT_EQ(next_up(std::numeric_limits<double>::max()), kInf);
}

}  // namespace
}  // namespace attn::verify
