// The certified oracle and its ambiguity bands: the lesson's numbers, exact ties, near-ties a
// double cannot see, negative and tiny values, huge scores, and the band holding the error of
// two different double implementations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "instance_io.hpp"
#include "judge/band.hpp"
#include "judge/checker.hpp"
#include "judge/oracle.hpp"
#include "judge/rules.hpp"
#include "lesson_samples.hpp"
#include "solve.hpp"

namespace attn::verify {
namespace {

using testing_support::kAi031Sample;

Instance parse(const std::string& text, Problem problem) {
  auto instance = read_instance(text, problem, default_limits(problem));
  if (!instance.ok()) {
    ADD_FAILURE() << instance.error().to_string() << "\n" << text;
    return {};
  }
  return std::move(instance).value();
}

// ai031, d = h = 1, query 0 sees keys 0 and 1 (query 1 sees key 1): the first output is
// (v0 e^{q k0} + v1 e^{q k1}) / (e^{q k0} + e^{q k1}).
Instance two_keys(const std::string& q, const std::string& k0, const std::string& k1, const std::string& v0,
                  const std::string& v1) {
  return parse("2 1 1\n" + q + "\n0\n" + k0 + "\n" + k1 + "\n" + v0 + "\n" + v1 + "\n1 1\n0 1\n", Problem::ai031);
}

// ai031 with a single visible key whose V is `v`: the exact output is v itself.
Instance single_value(const std::string& v) { return parse("1 1 1\n1\n1\n" + v + "\n1\n", Problem::ai031); }

// "value value ... value", count times.
std::string repeated(const std::string& value, int count) {
  std::string out = value;
  for (int i = 1; i < count; ++i) out.append(" ").append(value);
  return out;
}

bool within_band(double computed, const Interval& exact, double band) {
  return computed >= exact.lo - band && computed <= exact.hi + band;
}

// The lesson's samples (corpus/samples), answers as the lesson prints them.
const std::string kSample2 = "3 1\n1\n1\n1\n0\n0\n10\n1\n2\n100\n";
const std::string kThreeByTwo = "3 2\n1 0\n0 1\n1 1\n1 0\n0 1\n1 1\n1 2\n3 4\n5 6\n";

TEST(LessonAi006, Sample2ThirdValueToThirtyDigits) {
  const Instance instance = parse(kSample2, Problem::ai006);
  const Certificate certificate = certify(instance);
  EXPECT_EQ(canonical_text(certificate), "1.0000\n1.5000\n99.9911\n");
  const ExactInstance exact = make_exact(instance);
  // (1 + 2 + 100 e^10) / (2 + e^10) = 99.99105702585758635084323169762643...
  const SignificantDigits third = exact_digits(exact, exact_block(exact, 0, 2, 0), 0, 30);
  EXPECT_TRUE(third.resolved);
  EXPECT_EQ(third.text, "99.9910570258575863508432316976");
  EXPECT_FALSE(certificate.cells[2].ambiguous);
  EXPECT_TRUE(certificate.cells[1].value.lo <= 1.5 && 1.5 <= certificate.cells[1].value.hi);
}

TEST(LessonAi006, ThreeByTwoCausal) {
  const Certificate certificate = certify(parse(kThreeByTwo, Problem::ai006));
  EXPECT_EQ(canonical_text(certificate), "1.0000 2.0000\n2.3395 3.3395\n3.5105 4.5105\n");
}

TEST(LessonAi031, SampleMaskedTwoHeads) {
  const Certificate certificate = certify(parse(kAi031Sample, Problem::ai031));
  EXPECT_EQ(canonical_text(certificate), "1.34 0.66 2.00 2.00\n0.00 2.00 4.00 0.00\n");
}

TEST(LessonExamples, BandHoldsTheProductionKernelError) {
  for (const auto& [text, problem] : {std::pair{kSample2, Problem::ai006}, std::pair{kThreeByTwo, Problem::ai006},
                                      std::pair{kAi031Sample, Problem::ai031}}) {
    const Instance instance = parse(text, problem);
    const Certificate certificate = certify(instance);
    const Solution solution = solve(instance, true);
    for (std::size_t i = 0; i < solution.values.size(); ++i) {
      EXPECT_TRUE(within_band(solution.values[i], certificate.cells[i].value, certificate.cells[i].band)) << i;
      EXPECT_GT(certificate.cells[i].band, 0.0);
      EXPECT_LT(certificate.cells[i].band, 1e-13);  // a few u·|v| for these small inputs
    }
    for (std::size_t i = 0; i < solution.weights.size(); ++i) {
      EXPECT_TRUE(within_band(solution.weights[i], certificate.weights[i].value, certificate.weights[i].band)) << i;
    }
  }
}

TEST(ExactTies, SingleKeyTiesRoundHalfEven) {
  for (const auto& [v, canonical, other] :
       {std::tuple{"0.125", "0.12", "0.13"}, std::tuple{"0.135", "0.14", "0.13"}, std::tuple{"2.5", "2.50", ""}}) {
    const CellCertificate cell = certify(single_value(v)).cells.at(0);
    EXPECT_EQ(cell.canonical, canonical) << v;
    EXPECT_EQ(cell.exact_tie, std::string(other) != "") << v;
    EXPECT_EQ(cell.ambiguous, std::string(other) != "") << v;
    EXPECT_EQ(cell.alternative, other) << v;
  }
}

TEST(ExactTies, EqualScoresWithEqualMeansAreRationalTies) {
  // Keys 0 and 1 have the same score: the output is the mean (0.12 + 0.13) / 2 = 0.125 exactly.
  const CellCertificate cell = certify(two_keys("1", "0.5", "0.5", "0.12", "0.13")).cells.at(0);
  EXPECT_TRUE(cell.exact_tie);
  EXPECT_EQ(cell.canonical, "0.12");
  EXPECT_EQ(cell.alternative, "0.13");
}

TEST(ExactTies, DistinctScoresWithEqualMeansAreRational) {
  // Lindemann–Weierstrass: distinct scores but every group mean 0.125 -> the value is exactly 0.125.
  const Instance instance =
      parse("3 1 1\n1\n0\n0\n0\n1\n2\n0.125\n0.125\n0.125\n1 1 1\n0 1 0\n0 0 1\n", Problem::ai031);
  const CellCertificate cell = certify(instance).cells.at(0);
  EXPECT_TRUE(cell.exact_tie);
  EXPECT_EQ(cell.canonical, "0.12");
}

TEST(NearTies, RationalNearTiesADoubleCannotSee) {
  // Both decimals convert to the double 0.125; only the exact value knows the side.
  EXPECT_EQ(certify(single_value("0.12500000000000000001")).cells[0].canonical, "0.13");
  EXPECT_EQ(certify(single_value("0.12499999999999999999")).cells[0].canonical, "0.12");
  const CellCertificate above = certify(single_value("0.12500000000000000001")).cells[0];
  EXPECT_FALSE(above.exact_tie);
  EXPECT_TRUE(above.ambiguous);  // 1e-20 from the boundary, far inside δ
  EXPECT_EQ(above.alternative, "0.12");
}

TEST(NearTies, TranscendentalNearTiesNeedMoreBits) {
  // y = 2.25 e^t / (1 + e^t), t = ±1e-20: 1.125 ± 5.6e-21, beyond double and beyond 64 bits.
  const CellCertificate above = certify(two_keys("0.0000000001", "0", "0.0000000001", "0", "2.25")).cells[0];
  const CellCertificate below = certify(two_keys("0.0000000001", "0", "-0.0000000001", "0", "2.25")).cells[0];
  const CellCertificate negative = certify(two_keys("0.0000000001", "0", "0.0000000001", "0", "-2.25")).cells[0];
  EXPECT_EQ(above.canonical, "1.13");
  EXPECT_EQ(below.canonical, "1.12");
  EXPECT_EQ(negative.canonical, "-1.13");
  for (const CellCertificate& cell : {above, below, negative}) {
    EXPECT_FALSE(cell.exact_tie);
    EXPECT_FALSE(cell.unresolved);
    EXPECT_TRUE(cell.ambiguous);
  }
  // The production kernel sees t = 1e-20 -> e^t = 1 exactly and prints the half-even 1.12.
  const Instance instance = two_keys("0.0000000001", "0", "0.0000000001", "0", "2.25");
  EXPECT_EQ(format_solution(instance, solve(instance)).substr(0, 4), "1.12");
}

TEST(NearTies, PastTheCapIsReportedUnresolved) {
  OracleOptions tiny;
  tiny.initial_bits = 16;
  tiny.max_bits = 32;  // 5.6e-21 needs ~70 bits
  const Instance instance = two_keys("0.0000000001", "0", "0.0000000001", "0", "2.25");
  const CellCertificate cell = certify(instance, tiny).cells[0];
  EXPECT_TRUE(cell.unresolved);
  EXPECT_TRUE(cell.ambiguous);
  EXPECT_TRUE((cell.canonical == "1.12" && cell.alternative == "1.13") ||
              (cell.canonical == "1.13" && cell.alternative == "1.12"));
}

TEST(NegativeValues, NegativeTiesRoundHalfEvenAndNeverPrintMinusZero) {
  const CellCertificate eighth = certify(single_value("-0.125")).cells[0];
  EXPECT_EQ(eighth.canonical, "-0.12");
  EXPECT_EQ(eighth.alternative, "-0.13");
  const CellCertificate half_cent = certify(single_value("-0.005")).cells[0];
  EXPECT_TRUE(half_cent.exact_tie);
  EXPECT_EQ(half_cent.canonical, "0.00");  // -0.5 hundredths rounds to the even 0, written unsigned
  EXPECT_EQ(half_cent.alternative, "-0.01");
}

TEST(NegativeValues, TinyNegativesPrintZero) {
  const CellCertificate rational = certify(single_value("-0.000000001")).cells[0];
  EXPECT_EQ(rational.canonical, "0.00");
  EXPECT_FALSE(rational.ambiguous);
  // (-1e-6 + 1e-7 e) / (1 + e) < 0, transcendental.
  const CellCertificate transcendental = certify(two_keys("1", "0", "1", "-0.000001", "0.0000001")).cells[0];
  EXPECT_FALSE(transcendental.value.hi >= 0);
  EXPECT_EQ(transcendental.canonical, "0.00");
  EXPECT_FALSE(transcendental.ambiguous);
}

TEST(HugeScores, DominantKeyOnABoundaryIsDecidedExactly) {
  // Row 2 scores 4e6 and -4e6 (|x| = 1000, d = 16, √16 = 4): y = V0 + (V1 - V0)·e^{-8e6}/(1 + e^{-8e6})
  // with V0 = 1.00005 on a boundary. The side is the sign of V1 - V0, not a 2^-11e6 computation.
  const std::string q = repeated("1000", 16), k_minus = repeated("-1000", 16);
  for (const auto& [v1, expected] : {std::pair{"0", "1.0000"}, std::pair{"2", "1.0001"}}) {
    const std::string v0_row = repeated("1.00005", 16), v1_row = repeated(v1, 16);
    const Instance instance = parse(
        "2 16\n" + q + "\n" + q + "\n" + q + "\n" + k_minus + "\n" + v0_row + "\n" + v1_row + "\n", Problem::ai006);
    const Certificate certificate = certify(instance);
    const CellCertificate& first = certificate.cells[0];    // row 1 sees only key 0: exactly 1.00005
    const CellCertificate& second = certificate.cells[16];  // row 2
    EXPECT_TRUE(first.exact_tie);
    EXPECT_EQ(first.canonical, "1.0000");
    EXPECT_EQ(second.canonical, expected) << v1;
    EXPECT_FALSE(second.unresolved);
    EXPECT_FALSE(second.exact_tie);
    EXPECT_TRUE(second.ambiguous);
    const Solution solution = solve(instance);
    for (std::size_t i = 0; i < solution.values.size(); ++i) {
      EXPECT_TRUE(within_band(solution.values[i], certificate.cells[i].value, certificate.cells[i].band));
    }
  }
}

TEST(HugeScores, NearTiedTopKeysKeepTheBandSmall) {
  // Two keys at scores 4e6 and 4e6 - 0.4: weights ~0.6 / 0.4 of V = ±1000. Worst case of the
  // AI006 limits; the band must stay far below the 5e-5 half-unit of the fourth decimal.
  const std::string q = repeated("1000", 16), k0 = q, k1 = repeated("999.9999", 16), v0 = q, v1 = repeated("-1000", 16);
  const Instance instance =
      parse("2 16\n" + q + "\n" + q + "\n" + k0 + "\n" + k1 + "\n" + v0 + "\n" + v1 + "\n", Problem::ai006);
  const Certificate certificate = certify(instance);
  const Solution solution = solve(instance);
  for (std::size_t i = 16; i < 32; ++i) {
    EXPECT_LT(certificate.cells[i].band, 2.5e-5);
    EXPECT_TRUE(within_band(solution.values[i], certificate.cells[i].value, certificate.cells[i].band));
  }
}

TEST(Shapes, HeadsMustDivideD) {
  const auto instance = read_instance("2 4 3\n", Problem::ai031, default_limits(Problem::ai031));
  ASSERT_FALSE(instance.ok());
  EXPECT_NE(instance.error().message.find("does not divide"), std::string::npos);
}

TEST(Shapes, FullyMaskedRowIsExactZeroWithNoBand) {
  const Instance instance = parse("2 2 1\n1 1\n1 1\n1 1\n1 1\n5 6\n7 8\n0 0\n1 1\n", Problem::ai031);
  const Certificate certificate = certify(instance);
  EXPECT_EQ(canonical_text(certificate).substr(0, 10), "0.00 0.00\n");
  EXPECT_EQ(certificate.cells[0].band, 0.0);
  EXPECT_FALSE(certificate.cells[0].ambiguous);
}

TEST(Weights, EnclosuresSumToOneAndEqualScoresGiveExactFractions) {
  const Instance instance = parse("3 1\n1\n1\n1\n2\n2\n2\n1\n2\n3\n", Problem::ai006);
  const Certificate certificate = certify(instance);
  // Row 3 sees three keys with equal scores: each weight is exactly 1/3.
  double lo = 0, hi = 0;
  for (std::size_t j = 0; j < 3; ++j) {
    const Interval w = certificate.weights[2 * 3 + j].value;
    EXPECT_TRUE(w.lo <= 1.0 / 3 + 1e-16 && 1.0 / 3 - 1e-16 <= w.hi);
    lo += w.lo;
    hi += w.hi;
  }
  EXPECT_TRUE(lo <= 1 && 1 <= hi);
  EXPECT_EQ(certificate.cells[2].canonical, "2.0000");  // the mean of 1, 2, 3
}

TEST(General, ExplicitAndNoScaleAndBatches) {
  // Rule 3 example of the lesson as a general instance with an explicit divisor 1.4142135 and
  // as scale none; batches stack rows.
  const std::string body = "1 0\n0 1\n1 1\n1 0\n0 1\n1 1\n1 2\n3 4\n5 6\n";
  auto read = [&](const std::string& header) {
    return read_instance(header + body + body, Problem::general, default_limits(Problem::general)).value();
  };
  const Certificate sqrt_scale = certify(read("2 3 3 2 2 1 4\nnone sqrt qkv\n"));
  EXPECT_EQ(canonical_text(sqrt_scale).substr(0, 42), "3.0000 4.0000\n3.4067 4.4067\n3.5105 4.5105\n");
  EXPECT_EQ(sqrt_scale.rows, 6u);
  const Certificate none = certify(read("2 3 3 2 2 1 4\nnone none qkv\n"));
  const Certificate explicit_one = certify(read("2 3 3 2 2 1 4\nnone 1 qkv\n"));
  EXPECT_EQ(canonical_text(none), canonical_text(explicit_one));
  EXPECT_NE(canonical_text(none), canonical_text(sqrt_scale));
}

TEST(Band, GammaIsHighamsGamma) {
  EXPECT_GE(gamma(1), kUnitRoundoff / (1 - kUnitRoundoff));
  EXPECT_LE(gamma(1), kUnitRoundoff * (1 + 1e-5));  // the evaluation's safety factor is 1 + 2^-20
  EXPECT_TRUE(std::isinf(gamma(std::size_t{1} << 52)));
}

// ---- Random instances: the band holds the production kernel and an independent textbook form. ----

std::string random_decimal(std::mt19937_64& rng, long bound, int decimals) {
  long scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  const long value = std::uniform_int_distribution<long>(-bound * scale, bound * scale)(rng);
  std::string digits = std::to_string(std::labs(value) % scale);
  if (decimals > 0) digits.insert(0, static_cast<std::size_t>(decimals) - digits.size(), '0');
  std::string out = value < 0 ? "-" : "";
  out += std::to_string(std::labs(value) / scale);
  if (decimals > 0) out.append(".").append(digits);
  return out;
}

Instance random_instance(std::mt19937_64& rng, Problem problem) {
  const bool ai031 = problem == Problem::ai031;
  const std::size_t n = 1 + rng() % (ai031 ? 8 : 12), d = 1 + rng() % 8;
  std::size_t h = 1;
  while (ai031 && (h = 1 + rng() % d, d % h != 0)) {}
  const long qk_bound = ai031 ? 8 : std::vector<long>{1, 10, 1000}[rng() % 3];
  const int decimals = static_cast<int>(rng() % 4);
  Header header;
  header.problem = problem, header.n = n, header.d_k = d, header.heads = h;
  std::string text = write_header(header);
  for (int matrix = 0; matrix < 3; ++matrix) {
    for (std::size_t i = 0; i < n * d; ++i) {
      const std::string value = random_decimal(rng, matrix < 2 ? qk_bound : 1000, decimals);
      text += (value == "-0" || value.find_first_not_of("-0.") == std::string::npos ? "0" : value);
      text += (i + 1) % d == 0 ? "\n" : " ";
    }
  }
  for (std::size_t i = 0; ai031 && i < n * n; ++i)
    text += std::string(rng() % 3 ? "1" : "0") + ((i + 1) % n ? " " : "\n");
  return parse(text, problem);
}

// The textbook form, deliberately unlike the production kernel: s = dot/σ with the dot summed
// backwards, e = exp(s - max s), y = (Σ e v) / Σ e summed from the last key.
std::vector<double> textbook(const Instance& instance) {
  const double sigma = divisor_as_double(instance);
  const std::size_t hk = instance.d_k / instance.heads, hv = instance.d_v / instance.heads;
  std::vector<double> out(instance.batch.size() * instance.n * instance.d_v, 0.0);
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    const BatchItem& item = instance.batch[b];
    for (std::size_t i = 0; i < instance.n; ++i) {
      for (std::size_t g = 0; g < instance.heads; ++g) {
        std::vector<std::size_t> keys;
        std::vector<double> s;
        for (std::size_t j = 0; j < instance.m; ++j) {
          if (!key_visible(instance, b, i, j)) continue;
          double dot = 0;
          for (std::size_t c = hk; c-- > 0;) dot += item.Q.at(i, g * hk + c) * item.K.at(j, g * hk + c);
          keys.push_back(j);
          s.push_back(dot / sigma);
        }
        if (keys.empty()) continue;
        const double top = *std::max_element(s.begin(), s.end());
        for (std::size_t c = 0; c < hv; ++c) {
          double numerator = 0, total = 0;
          for (std::size_t t = keys.size(); t-- > 0;) {
            const double e = std::exp(s[t] - top);
            numerator += e * item.V.at(keys[t], g * hv + c);
            total += e;
          }
          out[(b * instance.n + i) * instance.d_v + g * hv + c] = numerator / total;
        }
      }
    }
  }
  return out;
}

TEST(RandomInstances, BandHoldsTwoDifferentDoubleImplementations) {
  const std::uint64_t seed = 20240601;
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 120; ++round) {
    const Problem problem = round % 2 ? Problem::ai031 : Problem::ai006;
    const Instance instance = random_instance(rng, problem);
    const Certificate certificate = certify(instance);
    const Solution production = solve(instance, true);
    const std::vector<double> other = textbook(instance);
    for (std::size_t i = 0; i < certificate.cells.size(); ++i) {
      const CellCertificate& cell = certificate.cells[i];
      ASSERT_TRUE(within_band(production.values[i], cell.value, cell.band))
          << "seed " << seed << " round " << round << " cell " << i << "\n"
          << write_instance(instance);
      ASSERT_TRUE(within_band(other[i], cell.value, cell.band))
          << "seed " << seed << " round " << round << " cell " << i << "\n"
          << write_instance(instance);
      EXPECT_LE(cell.value.lo, cell.value.hi);
    }
    for (std::size_t i = 0; i < certificate.weights.size(); ++i) {
      const WeightCertificate& w = certificate.weights[i];
      ASSERT_TRUE(within_band(production.weights[i], w.value, w.band)) << "seed " << seed << " round " << round;
    }
    // Whatever the kernel prints is accepted: its value is inside the band by the checks above.
    const Verdict verdict = check_output(certificate, format_solution(instance, production));
    EXPECT_TRUE(verdict.kind == VerdictKind::ok || verdict.kind == VerdictKind::acceptable) << verdict.message;
  }
}

bool overlap(const Interval& a, const Interval& b) { return a.lo <= b.hi && b.lo <= a.hi; }

TEST(RandomInstances, FastPassAgreesWithZivsLoop) {
  // initial_bits below 53 skips the first pass in doubles: every value then comes from MPFI alone.
  OracleOptions mpfi_only;
  mpfi_only.initial_bits = 52;
  const std::uint64_t seed = 20240602;
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 60; ++round) {
    const Instance instance = random_instance(rng, round % 2 ? Problem::ai031 : Problem::ai006);
    const Certificate fast = certify(instance);
    const Certificate slow = certify(instance, mpfi_only);
    ASSERT_EQ(fast.cells.size(), slow.cells.size());
    for (std::size_t i = 0; i < fast.cells.size(); ++i) {
      EXPECT_EQ(fast.cells[i].canonical, slow.cells[i].canonical) << "seed " << seed << " round " << round;
      // Both enclose the same exact value.
      EXPECT_TRUE(overlap(fast.cells[i].value, slow.cells[i].value)) << "seed " << seed << " round " << round;
    }
    for (std::size_t i = 0; i < fast.weights.size(); ++i) {
      EXPECT_TRUE(overlap(fast.weights[i].value, slow.weights[i].value)) << "seed " << seed << " round " << round;
    }
  }
}

TEST(RandomInstances, FastPassWeightsAreTight) {
  // The fast pass's weights are products of up to 16 table entries over a sum: a few dozen
  // roundings of 2^-53 each. A table entry enclosed loosely (say its chain of squarings run at too
  // low a precision, where 2^-64 grows to 2^-28 by level 9) would widen them by orders of magnitude
  // while every answer stayed right (more cells left to Ziv's loop); this bound catches that.
  const std::uint64_t seed = 20261130;
  std::mt19937_64 rng(seed);
  double widest = 0;
  for (int round = 0; round < 60; ++round) {
    const Instance instance = random_instance(rng, round % 2 ? Problem::ai031 : Problem::ai006);
    const Certificate certificate = certify(instance);
    for (const WeightCertificate& weight : certificate.weights) {
      if (weight.value.lo <= 0) continue;  // a masked key, or one in the tail: [0, e^-L] rounded out
      widest = std::max(widest, (weight.value.hi - weight.value.lo) / weight.value.hi);
    }
  }
  char shown[32];
  std::snprintf(shown, sizeof shown, "%.3g", widest);
  RecordProperty("widest_relative_weight_enclosure", shown);
  EXPECT_LE(widest, 0x1p-44) << "seed " << seed;
  EXPECT_GT(widest, 0) << "seed " << seed << ": no weight came from an inexact exponential";
}

}  // namespace
}  // namespace attn::verify
