// Reader and strict validator: accepted forms, rejected forms with their exact positions, round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "instance_io.hpp"

namespace attn {
namespace {

Result<Instance> lenient(std::string_view text, Problem problem = Problem::ai006) {
  return read_instance(text, problem, default_limits(problem));
}
Result<Instance> strict(std::string_view text, Problem problem = Problem::ai006) {
  return read_instance(text, problem, default_limits(problem), Strictness::strict);
}

struct Malformed {
  const char* name;
  Problem problem;
  std::string input;
  std::size_t line;
  std::size_t column;
  const char* message;  // exact text after "line L, column C: "
};

// Test names and failure messages show the case name, not its bytes.
void PrintTo(const Malformed& c, std::ostream* os) { *os << c.name; }

const std::string kAi031Head = "2 4 2\n1 0 1 1\n0 1 0 0\n1 0 0 0\n0 1 0 0\n2 0 0 4\n0 2 4 0\n";

std::vector<Malformed> malformed_inputs() {
  using P = Problem;
  return {
      {"Empty", P::ai006, "", 1, 1, "expected n (an integer), found end of input"},
      {"OnlyN", P::ai006, "3", 1, 2, "expected d (an integer), found end of input"},
      {"WordHeader", P::ai006, "x 1", 1, 1, "expected an integer for n, found 'x'"},
      {"RealHeader", P::ai006, "3.0 1", 1, 1, "expected an integer for n, found '3.0'"},
      {"ZeroN", P::ai006, "0 1", 1, 1, "n = 0 is outside 1 <= n <= 80"},
      {"NAboveLimit", P::ai006, "81 1", 1, 1, "n = 81 is outside 1 <= n <= 80"},
      {"NegativeN", P::ai006, "-1 1", 1, 1, "n = -1 is outside 1 <= n <= 80"},
      {"DAboveLimit", P::ai006, "3  17", 1, 4, "d = 17 is outside 1 <= d <= 16"},
      {"HugeHeaderDigits", P::ai006, "99999999999999999999999 1", 1, 1,
       "n = 99999999999999999999999 is outside 1 <= n <= 80"},
      {"Hex", P::ai006, "1 1\n0x10\n1\n1\n", 2, 1, "expected a real number for Q[0][0], found '0x10'"},
      {"Inf", P::ai006, "1 1\ninf\n1\n1\n", 2, 1, "expected a real number for Q[0][0], found 'inf'"},
      {"NaN", P::ai006, "1 1\n1\nnan\n1\n", 3, 1, "expected a real number for K[0][0], found 'nan'"},
      {"Comma", P::ai006, "1 2\n1,5 2\n", 2, 1, "expected a real number for Q[0][0], found '1,5'"},
      {"DoubleSign", P::ai006, "1 1\n--1\n", 2, 1, "expected a real number for Q[0][0], found '--1'"},
      {"BareExponent", P::ai006, "1 1\n1 1e\n", 2, 3, "expected a real number for K[0][0], found '1e'"},
      {"TwoPoints", P::ai006, "1 1\n1 1 1.2.3\n", 2, 5, "expected a real number for V[0][0], found '1.2.3'"},
      {"NulByte", P::ai006, std::string("1 1\n1\0\n", 7), 2, 1, "expected a real number for Q[0][0], found '1\\x00'"},
      {"Overflow", P::ai006, "1 1\n1e400\n", 2, 1, "Q[0][0] = 1e400 exceeds |x| <= 1000"},
      {"Underflow", P::ai006, "1 1\n1e-400\n", 2, 1,
       "Q[0][0] = 1e-400 is nonzero but below 1e-300 in magnitude (a double would underflow)"},
      {"KOverLimit", P::ai006, "3 1\n1\n1\n1\n0\n0\n1001\n", 7, 1, "K[2][0] = 1001 exceeds |x| <= 1000"},
      {"OverLimitByLessThanAnUlp", P::ai006, "1 1\n1\n1\n1000.0000000000000000001\n", 4, 1,
       "V[0][0] = 1000.0000000000000000001 exceeds |x| <= 1000"},
      {"NegativeOverLimit", P::ai006, "1 1\n-1000.00000000000000001 1 1\n", 2, 1,
       "Q[0][0] = -1000.00000000000000001 exceeds |x| <= 1000"},
      {"MissingToken", P::ai006, "2 1\n1\n2\n3\n4\n5\n", 7, 1, "expected V[1][0] (a real number), found end of input"},
      {"TrailingToken", P::ai006, "1 1\n1\n1\n1\n2\n", 5, 1, "expected end of input, found '2'"},
      {"TrailingGarbageAfterSpaces", P::ai006, "1 1 1 1 1   \r\n  x", 2, 3, "expected end of input, found 'x'"},
      {"HeadsDoNotDivide", P::ai031, "2 4 3\n", 1, 5, "h = 3 does not divide d = 4"},
      {"HeadsAboveD", P::ai031, "2 4 5\n", 1, 5, "h = 5 is outside 1 <= h <= 4"},
      {"QAboveAi031Limit", P::ai031, "1 1 1\n8.5\n", 2, 1, "Q[0][0] = 8.5 exceeds |x| <= 8"},
      {"MaskTwo", P::ai031, kAi031Head + "1 1\n2 1\n", 9, 1, "mask[1][0] = 2 is outside 0 <= mask[1][0] <= 1"},
      {"MaskReal", P::ai031, kAi031Head + "1 1.0\n", 8, 3, "expected an integer for mask[0][1], found '1.0'"},
      {"MaskMissing", P::ai031, kAi031Head + "1 1\n0", 9, 2, "expected mask[1][1] (an integer), found end of input"},
      {"GeneralHeadsDoNotDivide", P::general, "1 2 2 4 6 4 2\n", 1, 11, "h = 4 does not divide d_v = 6"},
      {"GeneralBadMaskWord", P::general, "1 1 1 1 1 1 2\nexplicitly sqrt qkv\n", 2, 1,
       "expected mask none | causal | explicit, found 'explicitly'"},
      {"GeneralZeroScale", P::general, "1 1 1 1 1 1 2\nnone 0 qkv\n", 2, 6, "scale = 0 must be positive"},
      {"GeneralWordScale", P::general, "1 1 1 1 1 1 2\nnone half qkv\n", 2, 6,
       "expected scale none | sqrt | a positive real: expected a real number for scale, found 'half'"},
      {"GeneralSelfNeedsSquare", P::general, "1 2 3 1 1 1 2\nnone sqrt self\n", 2, 11,
       "form self needs n = m and d_k = d_v (X is Q, K and V at once)"},
      {"GeneralBatchNaming", P::general, "2 1 1 1 1 1 2\nnone sqrt qkv\n1\n1\n1\n1\n1\nx\n", 8, 1,
       "expected a real number for V[0][0] of batch item 1, found 'x'"},
      {"GeneralDecimalsAboveLimit", P::general, "1 1 1 1 1 1 13\n", 1, 13,
       "decimals = 13 is outside 0 <= decimals <= 12"},
  };
}

class MalformedInput : public testing::TestWithParam<Malformed> {};

TEST_P(MalformedInput, IsRejectedAtTheRightPlace) {
  const Malformed& c = GetParam();
  const auto result = lenient(c.input, c.problem);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().line, c.line);
  EXPECT_EQ(result.error().column, c.column);
  EXPECT_EQ(result.error().message, c.message);
  // Whatever the lenient reader refuses, the strict validator refuses too.
  EXPECT_FALSE(strict(c.input, c.problem).ok());
}

INSTANTIATE_TEST_SUITE_P(Reader, MalformedInput, testing::ValuesIn(malformed_inputs()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Reader, ReadsTheAi031SampleWithExactText) {
  const auto result = lenient(kAi031Head + "1 1\n0 1\n", Problem::ai031);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  const Instance& instance = result.value();
  EXPECT_EQ(instance.n, 2u);
  EXPECT_EQ(instance.d_k, 4u);
  EXPECT_EQ(instance.heads, 2u);
  EXPECT_EQ(instance.mask, MaskKind::explicit_mask);
  EXPECT_EQ(instance.batch[0].V.at(1, 2), 4.0);
  EXPECT_EQ(instance.batch[0].mask, (std::vector<std::uint8_t>{1, 1, 0, 1}));
}

TEST(Reader, LenientAcceptsWhatReferenceProgramsAccept) {
  // CR/LF, tabs, no final newline, '+', ".5", "1.", exponents, "-0": Python's float() and cin take them.
  const auto result = lenient("2\t1\r\n+1 .5\r\n1. 1E2\r\n-0 -2.5e-1");
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  const Matrix& Q = result.value().batch[0].Q;
  EXPECT_EQ(Q.values, (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(Q.text, (std::vector<std::string>{"1", "0.5"}));
  EXPECT_EQ(result.value().batch[0].K.text, (std::vector<std::string>{"1", "100"}));
  EXPECT_EQ(result.value().batch[0].V.text, (std::vector<std::string>{"0", "-0.25"}));
  EXPECT_TRUE(std::signbit(result.value().batch[0].V.values[0]));  // "-0" is -0.0 as a double
}

TEST(Reader, KeepsDigitsADoubleCannotHold) {
  const auto result = lenient("1 1\n0.1000000000000000000000000001\n1\n999.99999999999999999999\n");
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result.value().batch[0].Q.text[0], "0.1000000000000000000000000001");
  EXPECT_EQ(result.value().batch[0].V.text[0], "999.99999999999999999999");
  EXPECT_EQ(result.value().batch[0].V.values[0], 1000.0);
}

TEST(Reader, MegabyteTokenIsRejectedInLinearTime) {
  std::string input = "1 1\n1" + std::string(1 << 20, '0') + "\n1\n1\n";
  const auto result = lenient(input);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().line, 2u);
  EXPECT_EQ(result.error().column, 1u);
  EXPECT_NE(result.error().message.find("exceeds |x| <= 1000"), std::string::npos);
}

TEST(Reader, TenMegabytesOfSpacesIsEndOfInput) {
  const std::string input(10 << 20, ' ');
  const auto result = lenient(input);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().line, 1u);
  EXPECT_EQ(result.error().column, input.size() + 1);
}

TEST(Reader, GeneralSelfFormSharesX) {
  const auto result = lenient("1 2 2 2 2 1 3\ncausal sqrt self\n1 0\n0 1\n", Problem::general);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  const BatchItem& item = result.value().batch[0];
  EXPECT_EQ(item.Q, item.K);
  EXPECT_EQ(item.K, item.V);
  EXPECT_EQ(result.value().mask, MaskKind::causal);
  EXPECT_EQ(result.value().decimals, 3);
}

TEST(Reader, GeneralCrossAttentionWithExplicitScaleAndMask) {
  const auto result =
      lenient("1 1 2 2 4 2 2\nexplicit 0.5 qkv\n1 2\n3 4\n5 6\n1 2 3 4\n5 6 7 8\n0 1\n", Problem::general);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  const Instance& instance = result.value();
  EXPECT_EQ(instance.m, 2u);
  EXPECT_EQ(instance.d_v, 4u);
  EXPECT_EQ(instance.scale, ScaleKind::explicit_value);
  EXPECT_EQ(instance.scale_divisor(), 0.5);
  EXPECT_EQ(instance.batch[0].mask, (std::vector<std::uint8_t>{0, 1}));
}

struct StrictCase {
  const char* name;
  std::string input;
  std::size_t line;
  std::size_t column;
};

// Test names and failure messages show the case name, not its bytes.
void PrintTo(const StrictCase& c, std::ostream* os) { *os << c.name; }

class StrictlyInvalid : public testing::TestWithParam<StrictCase> {};

TEST_P(StrictlyInvalid, IsRejectedButLenientlyFine) {
  const StrictCase& c = GetParam();
  EXPECT_TRUE(lenient(c.input).ok()) << "lenient reader must accept " << c.name;
  const auto result = strict(c.input);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().line, c.line) << result.error().to_string();
  EXPECT_EQ(result.error().column, c.column) << result.error().to_string();
}

INSTANTIATE_TEST_SUITE_P(
    Validator, StrictlyInvalid,
    testing::Values(
        StrictCase{"CarriageReturn", "1 1\r\n1\n1\n1\n", 1, 4}, StrictCase{"Tab", "1\t1\n1\n1\n1\n", 1, 2},
        StrictCase{"DoubleSpace", "1  1\n1\n1\n1\n", 1, 3}, StrictCase{"TrailingSpace", "1 1 \n1\n1\n1\n", 1, 4},
        StrictCase{"NoFinalNewline", "1 1\n1\n1\n1", 4, 2}, StrictCase{"BlankLine", "1 1\n\n1\n1\n1\n", 2, 1},
        StrictCase{"TrailingBlankLine", "1 1\n1\n1\n1\n\n", 5, 1}, StrictCase{"LeadingSpace", " 1 1\n1\n1\n1\n", 1, 1},
        StrictCase{"RowSplitOverTwoLines", "1 2\n1\n2\n1 2\n1 2\n", 2, 2},
        StrictCase{"PlusSign", "1 1\n+1\n1\n1\n", 2, 1}, StrictCase{"LeadingZero", "1 1\n01\n1\n1\n", 2, 1},
        StrictCase{"BarePoint", "1 1\n1.\n1\n1\n", 2, 1}, StrictCase{"NoInteger", "1 1\n.5\n1\n1\n", 2, 1},
        StrictCase{"Exponent", "1 1\n1e2\n1\n1\n", 2, 1}, StrictCase{"NegativeZero", "1 1\n-0\n1\n1\n", 2, 1},
        StrictCase{"NegativeZeroFraction", "1 1\n1\n-0.000\n1\n", 3, 1},
        StrictCase{"HeaderLeadingZero", "01 1\n1\n1\n1\n", 1, 1}, StrictCase{"HeaderPlus", "+1 1\n1\n1\n1\n", 1, 1},
        // problemtools pads every decimal with ten zeros: beyond the 10 digits the grammar allows.
        StrictCase{"ElevenFractionDigits", "1 1\n1\n0.50000000000\n1\n", 3, 1}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Validator, AcceptsCanonicalInputAndTrailingZeros) {
  const auto result = strict("2 1\n-1.50\n0\n0.25\n1000\n-1000\n3\n");
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(result.value(), lenient("2 1\n-1.5 0 .25 1e3 -1000 3").value());
}

TEST(Validator, TakesTenDigitsAfterThePointAndSaysTheLimit) {
  EXPECT_TRUE(strict("1 1\n1\n0.5000000000\n1\n").ok());
  const auto eleven = strict("1 1\n1\n0.50000000000\n1\n");
  ASSERT_FALSE(eleven.ok());
  EXPECT_NE(eleven.error().to_string().find("has 11 digits after the point, at most 10 allowed"), std::string::npos)
      << eleven.error().to_string();
  Limits wide = default_limits(Problem::ai006);
  wide.max_fraction_digits = 11;
  EXPECT_TRUE(read_instance("1 1\n1\n0.50000000000\n1\n", Problem::ai006, wide, Strictness::strict).ok());
}

TEST(Writer, RoundTripsEveryProblemStrictly) {
  const std::pair<Problem, std::string> cases[] = {
      {Problem::ai006, "2 1\n+1.50 -0 1E-2 7 8 9"},
      {Problem::ai031, kAi031Head + "1 1\n0 1\n"},
      {Problem::general,
       "2 1 2 2 2 2 5\nexplicit 1.5e0 qkv\n1 2\n1 2\n3 4\n5 6\n7 8\n1 0\n"
       "2 3\n4 5\n6 7\n8 9\n1 1\n0 0\n"},
      {Problem::general, "1 2 2 1 1 1 0\ncausal none self\n3\n-4\n"},
  };
  for (const auto& [problem, text] : cases) {
    const auto first = lenient(text, problem);
    ASSERT_TRUE(first.ok()) << first.error().to_string();
    const std::string written = write_instance(first.value());
    const auto again = strict(written, problem);
    ASSERT_TRUE(again.ok()) << again.error().to_string() << "\n" << written;
    EXPECT_EQ(again.value(), first.value());
    EXPECT_EQ(write_instance(again.value()), written);
  }
}

}  // namespace
}  // namespace attn
