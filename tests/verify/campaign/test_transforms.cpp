// Instance transformations: where rows, columns and mask entries go, text and double staying
// consistent, the result reading back as a valid instance, and the documented relation between the
// production kernel's answers before and after (exact where the arithmetic is the same, within a
// derived rounding bound where it is reordered).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "campaign/generators.hpp"
#include "campaign/transforms.hpp"
#include "instance_io.hpp"
#include "judge/rules.hpp"
#include "result.hpp"
#include "solve.hpp"

namespace attn::verify {
namespace {

constexpr double kUnitRoundoff = DBL_EPSILON / 2;  // u = 2^-53

// Small sizes: every test runs the kernel on many instances under sanitizers.
GenOptions small_options(Problem problem) {
  GenOptions options = gen_options(problem, Profile::edge);
  options.limits.max_n = options.limits.max_m = 12;
  options.limits.max_d = 8;
  options.limits.max_batch = std::min<std::size_t>(options.limits.max_batch, 3);
  options.typical_n = 5;
  options.typical_d = 4;
  return options;
}

// Seeds 1..kSeeds of each problem (fixed: a failure names its seed and replays).
constexpr std::uint64_t kSeeds = 25;

Instance sample(Problem problem, std::uint64_t seed) { return sample_instance(small_options(problem), seed); }

// The first sample (in seed order) with the wanted shape.
Instance first_sample(Problem problem, const std::function<bool(const Instance&)>& wanted) {
  for (std::uint64_t seed = 1; seed < 2000; ++seed) {
    Instance instance = sample(problem, seed);
    if (wanted(instance)) return instance;
  }
  ADD_FAILURE() << "no sample of the wanted shape";
  return sample(problem, 1);
}

// Limits for a transformed instance: the general ones, or wider where a transform grows a size.
Limits general_limits(std::size_t extra_d = 0, const char* max_abs_v = "1000") {
  Limits limits = default_limits(Problem::general);
  limits.max_d += extra_d;
  limits.max_abs_v = max_abs_v;
  return limits;
}

// The instance written out canonically reads back, strictly, as the same instance.
testing::AssertionResult reads_back(const Instance& instance, const Limits& limits) {
  const std::string text = write_instance(instance);
  const auto read = read_instance(text, instance.problem, limits, Strictness::strict);
  if (!read) return testing::AssertionFailure() << read.error().to_string() << " in\n" << text;
  if (!(read.value() == instance)) return testing::AssertionFailure() << "reads back differently:\n" << text;
  return testing::AssertionSuccess();
}

// Every value's double is the correctly rounded conversion of its canonical text.
testing::AssertionResult consistent(const Matrix& matrix) {
  if (matrix.values.size() != matrix.rows * matrix.cols || matrix.text.size() != matrix.values.size()) {
    return testing::AssertionFailure() << "matrix storage does not match its shape";
  }
  for (std::size_t k = 0; k < matrix.text.size(); ++k) {
    if (std::strtod(matrix.text[k].c_str(), nullptr) != matrix.values[k]) {
      return testing::AssertionFailure() << "element " << k << ": text " << matrix.text[k] << ", value "
                                         << matrix.values[k];
    }
  }
  return testing::AssertionSuccess();
}

// A permutation of 0..count-1 from a seed (Fisher–Yates on a 64-bit LCG; same on every platform).
std::vector<std::size_t> shuffled(std::size_t count, std::uint64_t seed) {
  std::vector<std::size_t> order(count);
  for (std::size_t k = 0; k < count; ++k) order[k] = k;
  std::uint64_t state = seed * 0x9e3779b97f4a7c15u + 1;
  for (std::size_t k = count; k > 1; --k) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    std::swap(order[k - 1], order[(state >> 33) % k]);
  }
  return order;
}

double max_abs(const std::vector<double>& values) {
  double top = 0;
  for (double v : values) top = std::max(top, std::abs(v));
  return top;
}

// Element (r, c) of `to` equals element (from_r, from_c) of `from`, text and double alike.
bool same_element(const Matrix& to, std::size_t r, std::size_t c, const Matrix& from, std::size_t from_r,
                  std::size_t from_c) {
  return to.text_at(r, c) == from.text_at(from_r, from_c) && to.at(r, c) == from.at(from_r, from_c);
}

// Columns [to_c, to_c + width) of `to` are columns [from_c, from_c + width) of `from`, row by row.
testing::AssertionResult same_columns(const Matrix& to, std::size_t to_c, const Matrix& from, std::size_t from_c,
                                      std::size_t width) {
  if (to.rows != from.rows) return testing::AssertionFailure() << "row counts differ";
  for (std::size_t r = 0; r < to.rows; ++r) {
    for (std::size_t c = 0; c < width; ++c) {
      if (!same_element(to, r, to_c + c, from, r, from_c + c)) {
        return testing::AssertionFailure() << "row " << r << ": column " << to_c + c << " is not column " << from_c + c;
      }
    }
  }
  return testing::AssertionSuccess();
}

TEST(Transforms, AsGeneralStatesTheSameComputation) {
  for (Problem problem : {Problem::ai006, Problem::ai031}) {
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const Instance original = sample(problem, seed);
      const Instance general = as_general(original);
      ASSERT_EQ(general.problem, Problem::general);
      Instance relabelled = general;
      relabelled.problem = problem;
      EXPECT_TRUE(relabelled == original) << "seed " << seed;
      // README: ai006 is causal, sqrt, 4 decimals; ai031 explicit, sqrt, 2 decimals; one batch item.
      const std::string d = std::to_string(original.d_k), n = std::to_string(original.n);
      const std::string header = problem == Problem::ai006
                                     ? "1 " + n + " " + n + " " + d + " " + d + " 1 4\ncausal sqrt qkv\n"
                                     : "1 " + n + " " + n + " " + d + " " + d + " " + std::to_string(original.heads) +
                                           " 2\nexplicit sqrt qkv\n";
      EXPECT_EQ(write_instance(general).rfind(header, 0), 0u) << "seed " << seed;
      EXPECT_TRUE(reads_back(general, general_limits())) << "seed " << seed;
      EXPECT_EQ(solve(general).values, solve(original).values) << "seed " << seed;
    }
  }
}

TEST(Transforms, WithExplicitMaskSpellsOutVisibility) {
  for (Problem problem : {Problem::ai006, Problem::ai031, Problem::general}) {
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const Instance original = sample(problem, seed);
      const Instance masked = with_explicit_mask(original);
      ASSERT_EQ(masked.mask, MaskKind::explicit_mask);
      for (std::size_t b = 0; b < original.batch.size(); ++b) {
        ASSERT_EQ(masked.batch[b].mask.size(), original.n * original.m);
        for (std::size_t i = 0; i < original.n; ++i) {
          for (std::size_t j = 0; j < original.m; ++j) {
            // Independently of MaskView: none sees all, causal sees j <= i, explicit keeps its bit.
            const bool expected = original.mask == MaskKind::none     ? true
                                  : original.mask == MaskKind::causal ? j <= i
                                                                      : original.batch[b].mask[i * original.m + j] != 0;
            ASSERT_EQ(masked.batch[b].mask[i * original.m + j] != 0, expected)
                << "seed " << seed << " item " << b << " mask[" << i << "][" << j << "]";
          }
        }
        EXPECT_TRUE(masked.batch[b].Q == original.batch[b].Q && masked.batch[b].K == original.batch[b].K &&
                    masked.batch[b].V == original.batch[b].V);
      }
      // ai006 has no explicit-mask form; ai031 already is one.
      EXPECT_EQ(masked.problem, problem == Problem::ai006 ? Problem::general : problem);
      if (original.mask == MaskKind::explicit_mask) {
        EXPECT_TRUE(masked == original) << "seed " << seed;
      }
      const Limits limits = masked.problem == Problem::general ? general_limits() : small_options(problem).limits;
      EXPECT_TRUE(reads_back(masked, limits)) << "seed " << seed;
      // Same visible keys in the same order: the kernel does the same arithmetic.
      EXPECT_EQ(solve(masked).values, solve(original).values) << "seed " << seed;
    }
  }
}

TEST(Transforms, SetTextKeepsTextAndDoubleTogether) {
  Matrix matrix{1, 5, std::vector<double>(5, 7.0), std::vector<std::string>(5, "7")};
  set_text(matrix, 0, "1.50");
  set_text(matrix, 1, "-.25e1");
  set_text(matrix, 2, "0.1");
  set_text(matrix, 3, "123456789012345678901234567890.5");
  set_text(matrix, 4, "-0");
  EXPECT_EQ(matrix.text, (std::vector<std::string>{"1.5", "-2.5", "0.1", "123456789012345678901234567890.5", "0"}));
  EXPECT_EQ(matrix.values[0], 1.5);
  EXPECT_EQ(matrix.values[1], -2.5);
  EXPECT_EQ(matrix.values[2], 0.1);  // the correctly rounded double, as the compiler converts it
  EXPECT_EQ(matrix.values[3], 123456789012345678901234567890.5);
  EXPECT_EQ(matrix.values[4], 0.0);
  EXPECT_TRUE(std::signbit(matrix.values[4])) << "\"-0\" keeps its sign in the double, as the reader does";
}

TEST(Transforms, SetTextRefusesWhatIsNotADecimal) {
  Matrix matrix{1, 1, {0.0}, {"0"}};
  EXPECT_THROW(set_text(matrix, 0, "1,5"), ContractError);
  EXPECT_THROW(set_text(matrix, 0, "nan"), ContractError);
}

TEST(Transforms, PermuteKeysMovesKeysValuesAndMaskColumns) {
  for (Problem problem : {Problem::ai006, Problem::ai031, Problem::general}) {
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const Instance original = sample(problem, seed);
      const std::vector<std::size_t> order = shuffled(original.m, seed);
      const Instance permuted = permute_keys(original, order);
      ASSERT_EQ(permuted.mask, MaskKind::explicit_mask);
      EXPECT_FALSE(permuted.self_form);
      for (std::size_t b = 0; b < original.batch.size(); ++b) {
        const BatchItem& from = original.batch[b];
        const BatchItem& to = permuted.batch[b];
        EXPECT_TRUE(to.Q == from.Q) << "queries stay in place";
        for (std::size_t j = 0; j < original.m; ++j) {
          for (std::size_t c = 0; c < original.d_k; ++c) ASSERT_TRUE(same_element(to.K, j, c, from.K, order[j], c));
          for (std::size_t c = 0; c < original.d_v; ++c) ASSERT_TRUE(same_element(to.V, j, c, from.V, order[j], c));
          for (std::size_t i = 0; i < original.n; ++i) {
            ASSERT_EQ(to.mask[i * original.m + j] != 0, key_visible(original, b, i, order[j]))
                << "seed " << seed << " mask[" << i << "][" << j << "]";
          }
        }
      }
      const Limits limits = permuted.problem == Problem::general ? general_limits() : small_options(problem).limits;
      EXPECT_TRUE(reads_back(permuted, limits)) << "seed " << seed;
    }
  }
}

TEST(Transforms, IdentityKeyPermutationOnlyMakesTheMaskExplicit) {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Instance original = sample(Problem::general, seed);
    std::vector<std::size_t> identity(original.m);
    for (std::size_t j = 0; j < original.m; ++j) identity[j] = j;
    Instance expected = with_explicit_mask(original);
    expected.self_form = false;
    EXPECT_TRUE(permute_keys(original, identity) == expected) << "seed " << seed;
  }
}

TEST(Transforms, PermutingKeysChangesOutputsOnlyByRounding) {
  // Scores, the row maximum and each exp are computed per key exactly as before; only the two sums
  // over keys (Σ exp and Σ w·v) run in another order. Each recursive sum of m terms is off by at
  // most (m-1)·u·Σ|terms| (Higham, Accuracy and Stability, (4.4)); Σ exp's error reaches every
  // weight, Σ w·v's reaches the output, both relative to Σ w·|v| <= max|V|. Both runs err, so the
  // outputs differ by at most about 6·m·u·max|V|; 8·m·u·max|V| leaves room for the division.
  for (Problem problem : {Problem::ai006, Problem::ai031, Problem::general}) {
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const Instance original = sample(problem, seed);
      const Solution before = solve(original);
      const Solution after = solve(permute_keys(original, shuffled(original.m, seed + 1000)));
      ASSERT_EQ(after.values.size(), before.values.size());
      for (std::size_t k = 0; k < before.values.size(); ++k) {
        const std::size_t b = k / (original.n * original.d_v);
        const double tolerance =
            8.0 * static_cast<double>(original.m) * kUnitRoundoff * max_abs(original.batch[b].V.values);
        ASSERT_NEAR(after.values[k], before.values[k], tolerance) << "seed " << seed << " value " << k;
      }
    }
  }
}

TEST(Transforms, PermuteHeadsMovesBlocksAndTheirAnswers) {
  const Instance original = first_sample(Problem::ai031, [](const Instance& x) { return x.heads >= 3; });
  const std::size_t h = original.heads, head_k = original.d_k / h, head_v = original.d_v / h;
  std::vector<std::size_t> rotation(h);  // never the identity: new head g is old head g + 1
  for (std::size_t g = 0; g < h; ++g) rotation[g] = (g + 1) % h;
  for (const std::vector<std::size_t>& order : {rotation, shuffled(h, 1), shuffled(h, 2)}) {
    const Instance permuted = permute_heads(original, order);
    const BatchItem& from = original.batch[0];
    const BatchItem& to = permuted.batch[0];
    for (std::size_t g = 0; g < h; ++g) {
      EXPECT_TRUE(same_columns(to.Q, g * head_k, from.Q, order[g] * head_k, head_k)) << "head " << g;
      EXPECT_TRUE(same_columns(to.K, g * head_k, from.K, order[g] * head_k, head_k)) << "head " << g;
      EXPECT_TRUE(same_columns(to.V, g * head_v, from.V, order[g] * head_v, head_v)) << "head " << g;
    }
    EXPECT_EQ(to.mask, from.mask);
    EXPECT_TRUE(reads_back(permuted, small_options(Problem::ai031).limits));
    // Each head is computed from its own blocks alone, so its answers move with it, bit for bit.
    const Solution before = solve(original, true), after = solve(permuted, true);
    for (std::size_t g = 0; g < h; ++g) {
      for (std::size_t i = 0; i < original.n; ++i) {
        for (std::size_t c = 0; c < head_v; ++c) {
          ASSERT_EQ(after.values[i * original.d_v + g * head_v + c],
                    before.values[i * original.d_v + order[g] * head_v + c]);
        }
        for (std::size_t j = 0; j < original.m; ++j) {
          ASSERT_EQ(after.weights[(g * original.n + i) * original.m + j],
                    before.weights[(order[g] * original.n + i) * original.m + j]);
        }
      }
    }
  }
}

TEST(Transforms, HeadSliceIsOneHeadOfTheWhole) {
  for (Problem problem : {Problem::ai031, Problem::general}) {
    // For general, Q/K blocks and V blocks of different widths, so neither can stand in for the other.
    const Instance original = first_sample(
        problem, [](const Instance& x) { return x.heads >= 2 && (x.problem != Problem::general || x.d_k != x.d_v); });
    const std::size_t h = original.heads, head_k = original.d_k / h, head_v = original.d_v / h;
    const Solution whole = solve(original);
    for (std::size_t g = 0; g < h; ++g) {
      const Instance slice = head_slice(original, g);
      ASSERT_EQ(slice.heads, 1u);
      ASSERT_EQ(slice.d_k, head_k);
      ASSERT_EQ(slice.d_v, head_v);
      EXPECT_EQ(slice.problem, Problem::general);
      EXPECT_EQ(divisor_as_double(slice), divisor_as_double(original)) << "same divisor rule";
      for (std::size_t b = 0; b < original.batch.size(); ++b) {
        const BatchItem& from = original.batch[b];
        const BatchItem& to = slice.batch[b];
        EXPECT_TRUE(same_columns(to.Q, 0, from.Q, g * head_k, head_k)) << "head " << g;
        EXPECT_TRUE(same_columns(to.K, 0, from.K, g * head_k, head_k)) << "head " << g;
        EXPECT_TRUE(same_columns(to.V, 0, from.V, g * head_v, head_v)) << "head " << g;
        EXPECT_EQ(to.mask, from.mask);
      }
      EXPECT_TRUE(reads_back(slice, general_limits()));
      // Same blocks, same divisor, same visible keys: the head's outputs, bit for bit.
      const Solution part = solve(slice);
      for (std::size_t row = 0; row < whole.rows; ++row) {
        for (std::size_t c = 0; c < head_v; ++c) {
          ASSERT_EQ(part.values[row * head_v + c], whole.values[row * original.d_v + g * head_v + c])
              << "head " << g << " row " << row;
        }
      }
    }
  }
}

TEST(Transforms, ScaleValuesIsExactInDecimal) {
  const Instance original = instance_from_text("1 6\n0 0 0 0 0 0\n0 0 0 0 0 0\n0.5 -3 999.75 0.001 0 -0.0005\n",
                                               Problem::ai006, default_limits(Problem::ai006));
  // By hand: x/4 and 8x of each value.
  const Instance quarter = scale_values(original, -2);
  EXPECT_EQ(quarter.batch[0].V.text,
            (std::vector<std::string>{"0.125", "-0.75", "249.9375", "0.00025", "0", "-0.000125"}));
  const Instance eight = scale_values(original, 3);
  EXPECT_EQ(eight.batch[0].V.text, (std::vector<std::string>{"4", "-24", "7998", "0.008", "0", "-0.004"}));
  for (const Instance* scaled : {&quarter, &eight}) {
    EXPECT_EQ(scaled->problem, Problem::general);
    EXPECT_TRUE(consistent(scaled->batch[0].V));
    EXPECT_TRUE(scaled->batch[0].Q == original.batch[0].Q && scaled->batch[0].K == original.batch[0].K);
  }
}

TEST(Transforms, ScaleValuesByPowersOfTwoScalesOutputsExactly) {
  // Weights do not depend on V, and multiplying by 2^p commutes with every rounding of w·v and of
  // the sums unless a result is subnormal: outputs scale exactly. Near underflow each of the m
  // products may differ by one subnormal ulp (2^-1074) after scaling, hence that slack there.
  for (Problem problem : {Problem::ai006, Problem::ai031, Problem::general}) {
    for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
      const Instance original = sample(problem, seed);
      for (int power : {-1, 1, 3}) {
        const Instance scaled = scale_values(original, power);
        ASSERT_EQ(scaled.problem, Problem::general);
        EXPECT_FALSE(scaled.self_form);
        for (std::size_t b = 0; b < original.batch.size(); ++b) {
          const Matrix& V = scaled.batch[b].V;
          EXPECT_TRUE(consistent(V)) << "seed " << seed;
          EXPECT_TRUE(scaled.batch[b].Q == original.batch[b].Q && scaled.batch[b].K == original.batch[b].K);
          for (std::size_t k = 0; k < V.values.size(); ++k) {
            ASSERT_EQ(V.values[k], std::ldexp(original.batch[b].V.values[k], power)) << "seed " << seed;
          }
        }
        // |V| <= 1000 before, so <= 8000 after 2^3.
        EXPECT_TRUE(reads_back(scaled, general_limits(0, "8000"))) << "seed " << seed;
        const Solution before = solve(original), after = solve(scaled);
        for (std::size_t k = 0; k < before.values.size(); ++k) {
          const double expected = std::ldexp(before.values[k], power);
          const double slack = std::abs(expected) >= 0x1p-900
                                   ? 0.0
                                   : static_cast<double>(original.m + 1) * std::ldexp(0x1p-1074, std::max(power, 0));
          ASSERT_LE(std::abs(after.values[k] - expected), slack) << "seed " << seed << " power " << power;
        }
      }
    }
  }
}

// One shift per query row, cycling through integers and fractions of both signs.
std::vector<std::string> row_shifts(std::size_t n) {
  const std::vector<std::string> cycle{"-4.5", "0", "1.25", "7", "-0.125"};
  std::vector<std::string> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = cycle[i % cycle.size()];
  return out;
}

// A general sample whose divisor does not depend on d_k (shift_scores' precondition).
Instance shiftable(std::uint64_t seed, bool explicit_divisor) {
  Instance instance = sample(Problem::general, seed);
  if (instance.scale == ScaleKind::sqrt_head_dim) instance.scale = ScaleKind::none;
  if (explicit_divisor) {
    instance.scale = ScaleKind::explicit_value;
    instance.scale_text = "2.5";
  }
  return instance;
}

TEST(Transforms, ShiftScoresAddsOneColumnPerHead) {
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Instance original = shiftable(seed, seed % 2 == 0);
    const std::vector<std::string> shifts = row_shifts(original.n);
    const Instance shifted = shift_scores(original, shifts);
    const std::size_t h = original.heads, head_k = original.d_k / h;
    ASSERT_EQ(shifted.d_k, original.d_k + h);
    EXPECT_EQ(shifted.heads, h);
    EXPECT_EQ(divisor_as_double(shifted), divisor_as_double(original));
    for (std::size_t b = 0; b < original.batch.size(); ++b) {
      const BatchItem& from = original.batch[b];
      const BatchItem& to = shifted.batch[b];
      EXPECT_TRUE(to.V == from.V);
      EXPECT_TRUE(consistent(to.Q) && consistent(to.K));
      for (std::size_t g = 0; g < h; ++g) {
        const std::size_t extra = g * (head_k + 1) + head_k;  // the new last column of head g's block
        EXPECT_TRUE(same_columns(to.Q, g * (head_k + 1), from.Q, g * head_k, head_k)) << "head " << g;
        EXPECT_TRUE(same_columns(to.K, g * (head_k + 1), from.K, g * head_k, head_k)) << "head " << g;
        for (std::size_t i = 0; i < original.n; ++i) EXPECT_EQ(to.Q.text_at(i, extra), shifts[i]);
        for (std::size_t j = 0; j < original.m; ++j) EXPECT_EQ(to.K.text_at(j, extra), "1");
      }
    }
    EXPECT_TRUE(reads_back(shifted, general_limits(original.heads))) << "seed " << seed;
  }
}

TEST(Transforms, ShiftingScoresChangesOutputsOnlyByRounding) {
  // Per row i and head g, with A = max_j Σ_c |q_c·k_c| over the head's block and s the shift:
  // each dot product is off by at most γ_{hd+1}·(A + |s|) (Higham (3.4)), so every difference of
  // two scaled scores moves by Δ <= 4·(hd+1)·u·(A + |s|)/divisor between the two runs, and each
  // weight by a factor within e^{±2Δ}. The rest is the reordering-free rounding of exp, Σ exp and
  // Σ w·v in each run (about 3·m·u·max|V| each). Bound: max|V|·(expm1(2Δ) + 8·m·u), doubled.
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Instance original = shiftable(seed, seed % 2 == 1);
    const std::vector<std::string> shifts = row_shifts(original.n);
    const Solution before = solve(original), after = solve(shift_scores(original, shifts));
    const std::size_t h = original.heads, head_k = original.d_k / h, head_v = original.d_v / h;
    const double divisor = divisor_as_double(original);
    for (std::size_t b = 0; b < original.batch.size(); ++b) {
      const BatchItem& item = original.batch[b];
      const double top_v = max_abs(item.V.values);
      for (std::size_t i = 0; i < original.n; ++i) {
        const double shift = std::abs(std::strtod(shifts[i].c_str(), nullptr));
        for (std::size_t g = 0; g < h; ++g) {
          double a = 0;
          for (std::size_t j = 0; j < original.m; ++j) {
            double sum = 0;
            for (std::size_t c = 0; c < head_k; ++c)
              sum += std::abs(item.Q.at(i, g * head_k + c) * item.K.at(j, g * head_k + c));
            a = std::max(a, sum);
          }
          const double delta = 4.0 * static_cast<double>(head_k + 1) * kUnitRoundoff * (a + shift) / divisor;
          const double tolerance =
              2.0 * top_v * (std::expm1(2.0 * delta) + 8.0 * static_cast<double>(original.m) * kUnitRoundoff);
          for (std::size_t c = 0; c < head_v; ++c) {
            const std::size_t k = (b * original.n + i) * original.d_v + g * head_v + c;
            ASSERT_NEAR(after.values[k], before.values[k], tolerance)
                << "seed " << seed << " row " << i << " head " << g;
          }
        }
      }
    }
  }
}

TEST(Transforms, ShiftScoresRefusesASqrtRule) {
  // √(d_k/h) would change with the added columns: the relation would not hold, so it is refused.
  const std::vector<std::string> shifts(12, "1");
  EXPECT_THROW((void)shift_scores(sample(Problem::ai006, 1), shifts), ContractError);
  EXPECT_THROW((void)shift_scores(sample(Problem::ai031, 1), shifts), ContractError);
  Instance general = sample(Problem::general, 1);
  general.scale = ScaleKind::sqrt_head_dim;
  EXPECT_THROW((void)shift_scores(general, shifts), ContractError);
}

}  // namespace
}  // namespace attn::verify
