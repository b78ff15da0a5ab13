// Exact decimal tokens: grammar, canonical form, magnitude comparison.
#include <gtest/gtest.h>

#include "decimal.hpp"

namespace attn {
namespace {

TEST(Decimal, CanonicalFormKeepsEveryDigit) {
  EXPECT_EQ(parse_decimal("+001.2500").canonical, "1.25");
  EXPECT_EQ(parse_decimal("-.5").canonical, "-0.5");
  EXPECT_EQ(parse_decimal("5.").canonical, "5");
  EXPECT_EQ(parse_decimal("1.5e3").canonical, "1500");
  EXPECT_EQ(parse_decimal("1234E-6").canonical, "0.001234");
  EXPECT_EQ(parse_decimal("0.1000000000000000000000000001").canonical, "0.1000000000000000000000000001");
  EXPECT_EQ(parse_decimal("-0.000").canonical, "0");
  EXPECT_TRUE(parse_decimal("-0.000").negative);
  EXPECT_EQ(parse_decimal("0e999999999999999999").canonical, "0");
}

TEST(Decimal, RejectsWhatIsNotADecimal) {
  for (const char* token : {"", "+", "-", ".", "e5", ".e5", "1e", "1e+", "0x1p3", "inf", "nan", "1,5", "1.2.3", "1e5.5",
                            "--1", "1_000", " 1", "1 "}) {
    EXPECT_EQ(parse_decimal(token).status, DecimalStatus::not_a_number) << token;
  }
}

TEST(Decimal, RangeIsDecidedOnTheExactValue) {
  // Documented bound: magnitudes >= 10^308 are refused (DBL_MAX is 1.8e308).
  EXPECT_EQ(parse_decimal("9.99e307").status, DecimalStatus::ok);
  EXPECT_EQ(parse_decimal("1e308").status, DecimalStatus::too_large);
  EXPECT_EQ(parse_decimal("1e-300").status, DecimalStatus::ok);
  EXPECT_EQ(parse_decimal("0.99e-300").status, DecimalStatus::too_small);
  EXPECT_EQ(parse_decimal("1e99999999999999999999").status, DecimalStatus::too_large);
}

TEST(Decimal, StrictFormIsTheCanonicalOneWithOptionalTrailingZeros) {
  for (const char* token : {"0", "-1", "1.50", "0.000", "1000", "-0.25"})
    EXPECT_TRUE(is_strict_decimal(token)) << token;
  for (const char* token : {"+1", "01", "1.", ".5", "1e3", "-0", "-0.00", "00.5", ""}) {
    EXPECT_FALSE(is_strict_decimal(token)) << token;
  }
}

TEST(Decimal, CompareMagnitudeOrdersExactly) {
  EXPECT_EQ(compare_magnitude("1000", "1000"), 0);
  EXPECT_EQ(compare_magnitude("1000.0000000000000000001", "1000"), 1);
  EXPECT_EQ(compare_magnitude("-999.9999999999999999999", "1000"), -1);
  EXPECT_EQ(compare_magnitude("0.5", "0.51"), -1);
  EXPECT_EQ(compare_magnitude("0.6", "0.51"), 1);
  EXPECT_EQ(compare_magnitude("9", "10"), -1);
  EXPECT_EQ(compare_magnitude("0", "0.0001"), -1);
}

}  // namespace
}  // namespace attn
