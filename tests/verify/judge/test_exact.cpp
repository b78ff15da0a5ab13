// The exact integer form of an instance (exact.hpp): scale_matrix's int64 path against the digit
// path it stands in for, the int64 value sums of a block against its GMP sums, and the cached
// powers of ten. Each randomized test names its seed in the failure message.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "campaign/generators.hpp"
#include "instance_io.hpp"
#include "judge/exact.hpp"
#include "judge/rules.hpp"
#include "result.hpp"

namespace attn::verify {
namespace {

// A canonical decimal text (as Matrix::text holds it) with `digits` digits, `fraction` of them
// after the point: -?(0|[1-9]D*)(.D*[1-9])?, never "-0".
std::string canonical_text(std::mt19937_64& random, int digits, int fraction) {
  std::uniform_int_distribution<int> digit(0, 9), nonzero(1, 9);
  std::string integer, tail;
  for (int i = 0; i < digits - fraction; ++i)
    integer += static_cast<char>('0' + (i == 0 ? nonzero(random) : digit(random)));
  for (int i = 0; i < fraction; ++i)
    tail += static_cast<char>('0' + (i + 1 == fraction ? nonzero(random) : digit(random)));
  if (integer.empty()) integer = "0";
  const bool negative = random() % 2 == 0;
  return (negative ? "-" : "") + integer + (tail.empty() ? "" : "." + tail);
}

// The reference: each text through parse_scaled, then brought to the largest exponent with GMP.
ScaledMatrix scaled_by_digits(const Matrix& matrix) {
  ScaledMatrix out;
  std::vector<ScaledDecimal> parsed;
  for (const std::string& text : matrix.text) {
    parsed.push_back(parse_scaled(text));
    out.exponent = std::max(out.exponent, parsed.back().exponent);
  }
  for (const ScaledDecimal& value : parsed)
    out.values.push_back(value.mantissa * power_of_ten(out.exponent - value.exponent));
  return out;
}

TEST(ScaleMatrix, Int64PathAgreesWithTheDigitPath) {
  constexpr std::uint64_t kSeed = 20261130;
  std::mt19937_64 random(kSeed);
  int fits = 0, too_long = 0, overflows = 0;
  for (int round = 0; round < 3000; ++round) {
    SCOPED_TRACE("seed " + std::to_string(kSeed) + " round " + std::to_string(round));
    Matrix matrix;
    matrix.rows = 1 + random() % 3;
    matrix.cols = 1 + random() % 4;
    // Digit counts around the int64 path's limit of 18, and fractions that force a rescale.
    const int max_digits = round % 3 == 0 ? 22 : round % 3 == 1 ? 18 : 6;
    bool long_text = false;
    for (std::size_t i = 0; i < matrix.rows * matrix.cols; ++i) {
      const int digits = 1 + static_cast<int>(random() % max_digits);
      const int fraction = static_cast<int>(random() % (digits + 1));
      matrix.text.push_back(random() % 7 == 0 ? "0" : canonical_text(random, digits, fraction));
      long_text = long_text || digits > 18;
    }
    const ScaledMatrix fast = scale_matrix(matrix);
    const ScaledMatrix reference = scaled_by_digits(matrix);
    ASSERT_EQ(fast.exponent, reference.exponent);
    Integer scratch;
    for (std::size_t i = 0; i < reference.values.size(); ++i) {
      ASSERT_EQ(mpz_cmp(fast.integer(i / matrix.cols, i % matrix.cols, scratch), reference.values[i].backend().data()),
                0)
          << "entry " << i << ": " << matrix.text[i];
    }
    bool narrow = true, wide = false;
    for (const Integer& value : reference.values) {
      narrow = narrow && abs(value) < (Integer(1) << 26);
      wide = wide || abs(value) >= (Integer(1) << 63);  // past int64: the int64 path must hand back
    }
    // Exactly one form holds the integers: int64 when all are below 2^26, else GMP.
    ASSERT_EQ(fast.narrow.size(), narrow ? reference.values.size() : 0);
    ASSERT_EQ(fast.values.size(), narrow ? 0 : reference.values.size());
    (long_text ? too_long : wide ? overflows : fits) += 1;
  }
  // The draw reaches both paths: texts the int64 path takes, and texts or rescales it hands back.
  EXPECT_GT(fits, 100);
  EXPECT_GT(too_long, 100);
  EXPECT_GT(overflows, 10);
}

TEST(ExactBlock, SumsAndRationalTestAgreeWithGmp) {
  int narrow_blocks = 0, wide_blocks = 0, rational_cells = 0;
  for (const Problem problem : {Problem::ai006, Problem::ai031, Problem::general}) {
    for (const Profile profile : {Profile::random, Profile::edge}) {
      for (std::uint64_t seed = 0; seed < 40; ++seed) {
        SCOPED_TRACE(std::string(problem_name(problem)) + " " + std::string(profile_name(profile)) + " seed " +
                     std::to_string(seed));
        const Instance instance = sample_instance(gen_options(problem, profile), seed);
        const ExactInstance exact = make_exact(instance);
        ExactBlock block;  // reused, as certify does: sums from a larger block must not leak
        for (std::size_t b = 0; b < instance.batch.size(); ++b) {
          for (std::size_t i = 0; i < instance.n; ++i) {
            for (std::size_t g = 0; g < instance.heads; ++g) {
              exact_block(exact, b, i, g, block);
              const std::size_t groups = block.group_dot.size();
              // The sums again, in GMP from the scaled V entries.
              const ScaledMatrix& V = exact.V[b];
              std::vector<Integer> expected(groups * block.head_v);
              Integer entry, scratch;
              for (std::size_t t = 0; t < block.keys.size(); ++t) {
                for (std::size_t c = 0; c < block.head_v; ++c) {
                  expected[block.group_of[t] * block.head_v + c] +=
                      Integer(V.integer(block.keys[t], g * block.head_v + c, entry));
                }
              }
              if (!block.narrow_value_sum.empty()) {
                ++narrow_blocks;
                ASSERT_EQ(block.narrow_value_sum.size(), groups * block.head_v);
              } else if (groups > 0) {
                ++wide_blocks;
              }
              for (std::size_t k = 0; k < expected.size(); ++k) {
                ASSERT_EQ(block.value_sum(k / block.head_v, k % block.head_v, scratch), expected[k]) << "sum " << k;
              }
              for (std::size_t c = 0; c < block.head_v && groups > 0; ++c) {
                bool rational = true;  // every group's mean Σ V / n equals the first group's
                for (std::size_t h = 1; h < groups; ++h) {
                  rational = rational && expected[h * block.head_v + c] * block.group_size[0] ==
                                             expected[c] * block.group_size[h];
                }
                ASSERT_EQ(is_rational_cell(block, c), rational) << "column " << c;
                rational_cells += rational ? 1 : 0;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(narrow_blocks, 1000);
  EXPECT_GT(wide_blocks, 0) << "no block took the GMP path";
  EXPECT_GT(rational_cells, 100);
}

// One query, keys with dot products 2, 1, 1: groups of sizes 1 and 2, so the rational test must
// weigh each group's sum by its size (3 / 1 = 6 / 2) rather than compare the sums.
TEST(ExactBlock, RationalCellsWeighGroupsOfUnequalSize) {
  const auto block_for = [](const std::string& values) {
    const std::string text =
        write_header({Problem::general, 1, 1, 3, 1, 1, 1, 4, MaskKind::none, "none", false}) + "1\n2\n1\n1\n" + values;
    const Instance instance = instance_from_text(text, Problem::general, default_limits(Problem::general));
    return exact_block(make_exact(instance), 0, 0, 0);
  };
  const ExactBlock equal_means = block_for("3\n3\n3\n");
  ASSERT_EQ(equal_means.group_size, (std::vector<std::size_t>{1, 2}));
  ASSERT_FALSE(equal_means.narrow_value_sum.empty());
  EXPECT_TRUE(is_rational_cell(equal_means, 0));
  EXPECT_FALSE(is_rational_cell(block_for("3\n3\n4\n"), 0));  // means 3 and 3.5
  EXPECT_FALSE(is_rational_cell(block_for("6\n3\n3\n"), 0));  // sums 6 and 6, means 6 and 3
}

// Two heads and a V too wide for int64 sums (999.99999 scales to 99999999 >= 2^26): head 1's block
// sums V's second column in GMP. Keys 0 and 1 have head-1 dot products 1 and 0: a group each.
TEST(ExactBlock, WideSumsReadTheirHeadsColumns) {
  const std::string text = write_header({Problem::general, 1, 1, 2, 2, 2, 2, 2, MaskKind::none, "none", false}) +
                           "1 1\n1 1\n0 0\n999.99999 1\n-999.99999 3\n";
  const Instance instance = instance_from_text(text, Problem::general, default_limits(Problem::general));
  const ExactBlock block = exact_block(make_exact(instance), 0, 0, 1);
  ASSERT_TRUE(block.narrow_value_sum.empty());
  ASSERT_EQ(block.group_size, (std::vector<std::size_t>{1, 1}));
  Integer scratch;
  ASSERT_EQ(block.value_exponent, 5);
  EXPECT_EQ(block.value_sum(0, 0, scratch), 100000);
  EXPECT_EQ(block.value_sum(1, 0, scratch), 300000);
}

TEST(PowerOfTen, CachedPowersAreExactAndStable) {
  const Integer& first = power_of_ten(0);
  for (long e = 0; e <= 400; ++e) {
    Integer expected;
    mpz_ui_pow_ui(expected.backend().data(), 10, static_cast<unsigned long>(e));
    ASSERT_EQ(power_of_ten(e), expected) << e;
  }
  EXPECT_EQ(&power_of_ten(0), &first);  // the same entry, still valid after the cache grew
  EXPECT_EQ(first, 1);
  EXPECT_THROW(static_cast<void>(power_of_ten(-1)), ContractError);
}

}  // namespace
}  // namespace attn::verify
