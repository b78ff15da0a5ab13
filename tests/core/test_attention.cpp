// The production kernel on every number the lesson gives, plus its structural guarantees.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attention.hpp"
#include "format.hpp"
#include "instance_io.hpp"
#include "lesson_samples.hpp"
#include "solve.hpp"

namespace attn {
namespace {

using testing_support::kAi031Sample;

// The lesson's §05 example: n = 3, d = 2, Q = K = [[1,0],[0,1],[1,1]], V = [[1,2],[3,4],[5,6]].
const std::vector<double> kQK = {1, 0, 0, 1, 1, 1};
const std::vector<double> kV = {1, 2, 3, 4, 5, 6};

struct KernelRun {
  std::vector<double> out;
  std::vector<double> weights;
};

KernelRun run(const AttentionShape& shape, const std::vector<double>& Q, const std::vector<double>& K,
              const std::vector<double>& V, MaskView mask, double divisor) {
  KernelRun r{std::vector<double>(shape.n * shape.d_v), std::vector<double>(shape.heads * shape.n * shape.m)};
  EXPECT_EQ(masked_multihead_attention(shape, Q, K, V, mask, divisor, r.out, r.weights), KernelStatus::ok);
  return r;
}

std::vector<std::string> formatted(std::span<const double> values, int decimals) {
  std::vector<std::string> out;
  for (double v : values) out.push_back(format_fixed(v, decimals));
  return out;
}

using Strings = std::vector<std::string>;

TEST(LessonExample, FullAttentionOutputs) {
  const KernelRun r = run({3, 3, 2, 2, 1}, kQK, kQK, kV, {}, std::sqrt(2.0));
  EXPECT_EQ(formatted(r.out, 4), (Strings{"3.0000", "4.0000", "3.4067", "4.4067", "3.5105", "4.5105"}));
}

TEST(LessonExample, CausalRow1Weights) {
  const KernelRun r = run({3, 3, 2, 2, 1}, kQK, kQK, kV, {MaskKind::causal, {}}, std::sqrt(2.0));
  EXPECT_EQ(formatted(std::span(r.weights).subspan(3, 3), 4), (Strings{"0.3302", "0.6698", "0.0000"}));
  EXPECT_EQ(r.weights[5], 0.0);  // masked weights are exactly zero
}

TEST(LessonExample, Row3WeightsScaledVersusUnscaled) {
  const KernelRun scaled = run({3, 3, 2, 2, 1}, kQK, kQK, kV, {}, std::sqrt(2.0));
  const KernelRun unscaled = run({3, 3, 2, 2, 1}, kQK, kQK, kV, {}, 1.0);
  EXPECT_EQ(formatted(std::span(scaled.weights).subspan(6, 3), 4), (Strings{"0.2483", "0.2483", "0.5035"}));
  EXPECT_EQ(formatted(std::span(unscaled.weights).subspan(6, 3), 4), (Strings{"0.2119", "0.2119", "0.5761"}));
}

std::string solve_text(std::string_view input, Problem problem) {
  const auto instance = read_instance(input, problem, default_limits(problem));
  if (!instance.ok()) return "error: " + instance.error().to_string();
  return format_solution(instance.value(), solve(instance.value()));
}

TEST(LessonSamples, Ai006Sample2) {
  EXPECT_EQ(solve_text("3 1\n1\n1\n1\n0\n0\n10\n1\n2\n100\n", Problem::ai006), "1.0000\n1.5000\n99.9911\n");
}

TEST(LessonSamples, Ai031Sample) {
  EXPECT_EQ(solve_text(kAi031Sample, Problem::ai031), "1.34 0.66 2.00 2.00\n0.00 2.00 4.00 0.00\n");
}

TEST(LessonSamples, Ai031WithSqrtDInsteadOfSqrtHdGivesTheWrongAnswer) {
  // §08, first wrong implementation: dividing by √d = 2 instead of √hd = √2. Head 0 of row 0 has
  // scores 1/2 and 0, weights 1/(1+e^-0.5) = 0.6225 and 0.3775: 1.24 0.76 instead of 1.34 0.66.
  const Instance instance = read_instance(kAi031Sample, Problem::ai031, default_limits(Problem::ai031)).value();
  const BatchItem& item = instance.batch[0];
  std::vector<double> out(8);
  ASSERT_EQ(masked_multihead_attention({2, 2, 4, 4, 2}, item.Q.values, item.K.values, item.V.values,
                                       {MaskKind::explicit_mask, item.mask}, 2.0, out),
            KernelStatus::ok);
  EXPECT_EQ(format_rows(out, 4, 2), "1.24 0.76 2.00 2.00\n0.00 2.00 4.00 0.00\n");
}

TEST(LessonExercises, Exercise1NewValuesSameWeights) {
  // Row 0 weights stay [0.4011, 0.1978, 0.4011]; with V = [[1,0],[0,1],[2,2]] the output is
  // [3/(2+e^{-1/√2}), 1] = [1.2033..., exactly 1].
  const KernelRun r = run({3, 3, 2, 2, 1}, kQK, kQK, {1, 0, 0, 1, 2, 2}, {}, std::sqrt(2.0));
  EXPECT_EQ(formatted(std::span(r.out).subspan(0, 2), 4), (Strings{"1.2033", "1.0000"}));
}

TEST(LessonExercises, Exercise2AllOnesMaskRow1) {
  std::string input = kAi031Sample;
  input.replace(input.size() - 8, 8, "1 1\n1 1\n");
  const std::string text = solve_text(input, Problem::ai031);
  EXPECT_EQ(text.substr(text.find('\n') + 1), "0.66 1.34 2.00 2.00\n");
}

TEST(LessonExercises, Exercise3SingleHeadRow0) {
  std::string input = kAi031Sample;
  input.replace(0, 5, "2 4 1");
  const std::string text = solve_text(input, Problem::ai031);
  EXPECT_EQ(text.substr(0, text.find('\n') + 1), "1.24 0.76 1.51 2.49\n");
}

TEST(Kernel, AllMaskedRowIsExactlyPositiveZero) {
  // §08's fourth case: the sample with row 0's mask set to 0 0.
  std::string input = kAi031Sample;
  input.replace(input.size() - 8, 8, "0 0\n0 1\n");
  EXPECT_EQ(solve_text(input, Problem::ai031), "0.00 0.00 0.00 0.00\n0.00 2.00 4.00 0.00\n");
  const Instance instance = read_instance(input, Problem::ai031, default_limits(Problem::ai031)).value();
  const Solution solution = solve(instance, true);
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(solution.values[c], 0.0);
    EXPECT_FALSE(std::signbit(solution.values[c]));
  }
  for (std::size_t g = 0; g < 2; ++g) EXPECT_EQ(solution.weights[g * 4 + 0] + solution.weights[g * 4 + 1], 0.0);
}

TEST(Kernel, HugeScoresStayFinite) {
  // AI006 at its limits: |x| = 1000, d = 16 gives scaled scores of ±4e6 with gaps of thousands;
  // exp(4e6) overflows, so only the shifted softmax survives.
  const std::size_t n = 3, d = 16;
  std::vector<double> Q(n * d, 1000.0), K(n * d, 1000.0), V(n * d, -1000.0);
  for (std::size_t c = 0; c < d; ++c) K[1 * d + c] = 999.5;    // score gap 8000/4 = 2000
  for (std::size_t c = 0; c < d; ++c) K[2 * d + c] = -1000.0;  // score -4e6
  V[0] = 1000.0;
  const KernelRun r = run({n, n, d, d, 1}, Q, K, V, {MaskKind::causal, {}}, 4.0);
  for (double x : r.out) EXPECT_TRUE(std::isfinite(x));
  for (double w : r.weights) EXPECT_TRUE(std::isfinite(w));
  EXPECT_EQ(r.out[1 * d + 0], 1000.0);  // row 1: key 0 outweighs key 1 by e^2000
  EXPECT_EQ(r.out[2 * d + 0], 1000.0);
}

TEST(Kernel, TinyExplicitScaleDoesNotOverflow) {
  // Dividing the *shifted* dot products keeps exp's argument <= 0 even for a divisor of 1e-300.
  const KernelRun r = run({1, 2, 1, 1, 1}, {1}, {1, 2}, {3, 5}, {}, 1e-300);
  EXPECT_EQ(r.out[0], 5.0);
  EXPECT_EQ(r.weights[0], 0.0);
  EXPECT_EQ(r.weights[1], 1.0);
}

TEST(Kernel, HeadsAreConcatenatedInOrder) {
  // Two heads, one visible key each way: head 0 copies V's block 0, head 1 V's block 1.
  const KernelRun r = run({1, 1, 2, 4, 2}, {1, -1}, {2, 3}, {1, 2, 3, 4}, {}, 1.0);
  EXPECT_EQ(r.out, (std::vector<double>{1, 2, 3, 4}));
}

TEST(Kernel, CrossAttentionWithMoreKeysThanQueries) {
  // n = 1 query, m = 2 keys of d_k = 1, values of d_v = 2; equal scores give weights of exactly 1/2.
  const KernelRun r = run({1, 2, 1, 2, 1}, {0}, {1, 2}, {3, 6, 5, 8}, {}, 1.0);
  EXPECT_EQ(r.out, (std::vector<double>{4, 7}));
}

TEST(Kernel, ZeroKeysGiveExactlyPositiveZeroRowsForEveryMaskKind) {
  const std::vector<double> Q = {1, -2, 3, 4, 5, -6};  // 3 queries, d_k = 2
  for (MaskKind kind : {MaskKind::none, MaskKind::causal, MaskKind::explicit_mask}) {
    std::vector<double> out(3 * 2, 7.0);
    ASSERT_EQ(masked_multihead_attention({3, 0, 2, 2, 1}, Q, {}, {}, {kind, {}}, 1.0, out), KernelStatus::ok);
    for (double x : out) EXPECT_TRUE(x == 0.0 && !std::signbit(x)) << x;
  }
}

TEST(Kernel, ZeroQueriesWriteNothing) {
  const std::vector<double> K = {1, 2}, V = {3, 4};
  std::vector<double> out;
  EXPECT_EQ(masked_multihead_attention({0, 1, 2, 2, 1}, {}, K, V, {MaskKind::causal, {}}, 1.0, out), KernelStatus::ok);
  EXPECT_TRUE(out.empty());
}

TEST(Kernel, RefusesInconsistentArgumentsWithoutWriting) {
  const std::vector<double> Q(2 * 4, 1.0), K(3 * 4, 1.0), V(3 * 2, 1.0);
  const std::vector<std::uint8_t> bits(2 * 3, 1);
  std::vector<double> out(2 * 2, 7.0);
  auto status = [&](AttentionShape shape, std::span<const double> q, MaskView mask, double divisor) {
    return masked_multihead_attention(shape, q, K, V, mask, divisor, out);
  };
  const AttentionShape shape{2, 3, 4, 2, 2};
  EXPECT_EQ(status(shape, std::span(Q).first(7), {}, 1.0), KernelStatus::size_mismatch);
  EXPECT_EQ(status({2, 3, 4, 2, 0}, Q, {}, 1.0), KernelStatus::bad_heads);
  EXPECT_EQ(status({2, 3, 4, 2, 4}, Q, {}, 1.0), KernelStatus::bad_heads);  // 4 heads do not divide d_v = 2
  EXPECT_EQ(status(shape, Q, {MaskKind::explicit_mask, std::span(bits).first(5)}, 1.0),
            KernelStatus::mask_size_mismatch);
  EXPECT_EQ(status(shape, Q, {}, 0.0), KernelStatus::bad_scale_divisor);
  EXPECT_EQ(status(shape, Q, {}, std::numeric_limits<double>::infinity()), KernelStatus::bad_scale_divisor);
  for (double x : out) EXPECT_EQ(x, 7.0);
  EXPECT_EQ(status(shape, Q, {MaskKind::explicit_mask, bits}, 1.0), KernelStatus::ok);
}

}  // namespace
}  // namespace attn
