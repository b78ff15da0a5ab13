// The fixed-decimal formatter: one correct rounding from the double, no "-0", no exponent.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "format.hpp"
#include "result.hpp"

namespace attn {
namespace {

std::string fmt2(double x) { return format_fixed(x, 2); }

TEST(Format, LessonExamples) {
  EXPECT_EQ(fmt2(1.339), "1.34");
  EXPECT_EQ(fmt2(-0.004), "0.00");
  EXPECT_EQ(fmt2(-0.006), "-0.01");
}

TEST(Format, NoDoubleRounding) {
  // 1.23496 -> 1.2350 -> 1.24 is the double-rounding bug; one rounding gives 1.23.
  EXPECT_EQ(fmt2(1.23496), "1.23");
  EXPECT_EQ(format_fixed(1.23496, 4), "1.2350");
}

TEST(Format, RoundsTheExactBinaryValue) {
  // 0.125 is exact in binary: a true tie, broken to even. 2.675 is stored as 2.67499999...
  EXPECT_EQ(fmt2(0.125), "0.12");
  EXPECT_EQ(fmt2(0.375), "0.38");
  EXPECT_EQ(fmt2(2.675), "2.67");
  EXPECT_EQ(format_fixed(99.99105702585759, 4), "99.9911");
}

TEST(Format, NegativeZeroIsWrittenAsZero) {
  EXPECT_EQ(fmt2(-0.0), "0.00");
  EXPECT_EQ(format_fixed(-0.00004999, 4), "0.0000");
  EXPECT_EQ(format_fixed(-0.00005001, 4), "-0.0001");
  EXPECT_EQ(format_fixed(-0.4, 0), "0");
  EXPECT_EQ(format_fixed(-std::numeric_limits<double>::denorm_min(), 30), "0.000000000000000000000000000000");
}

TEST(Format, NeverExponentNotation) {
  EXPECT_EQ(fmt2(1e20), "100000000000000000000.00");
  EXPECT_EQ(format_fixed(1e-20, 4), "0.0000");
  const std::string huge = format_fixed(std::numeric_limits<double>::max(), 2);
  EXPECT_EQ(huge.size(), 309u + 3u);
  EXPECT_EQ(huge.find('e'), std::string::npos);
}

TEST(Format, ZeroDecimalsHasNoPoint) {
  EXPECT_EQ(format_fixed(2.5, 0), "2");
  EXPECT_EQ(format_fixed(3.5, 0), "4");
  EXPECT_EQ(format_fixed(-7.25, 0), "-7");
}

TEST(Format, RefusesNonFiniteValues) {
  EXPECT_THROW((void)fmt2(std::nan("")), ContractError);
  EXPECT_THROW((void)fmt2(std::numeric_limits<double>::infinity()), ContractError);
}

TEST(Format, RowsUseSingleSpacesAndNewlines) {
  const double values[] = {1.0, -0.001, 2.5, 3.25};
  EXPECT_EQ(format_rows(values, 2, 1), "1.0 0.0\n2.5 3.2\n");
}

}  // namespace
}  // namespace attn
