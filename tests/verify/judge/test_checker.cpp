// The checker library: every verdict kind, rounding traps (ties, near-ties, "-0.00", digit counts,
// shape), and arbitrary bytes as output. The check command itself: tests/tools/test_oracle_command.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "instance_io.hpp"
#include "judge/checker.hpp"
#include "lesson_samples.hpp"

namespace attn::verify {
namespace {

using testing_support::kAi031Answer;
using testing_support::kAi031Sample;

Certificate certificate_of(const std::string& text, Problem problem) {
  return certify(read_instance(text, problem, default_limits(problem)).value());
}

// The lesson's AI031 sample: "1.34 0.66 2.00 2.00 / 0.00 2.00 4.00 0.00", nothing ambiguous.

Verdict check(const Certificate& certificate, const std::string& output) { return check_output(certificate, output); }

TEST(Verdicts, CanonicalIsOk) {
  const Certificate certificate = certificate_of(kAi031Sample, Problem::ai031);
  const Verdict verdict = check(certificate, kAi031Answer);
  EXPECT_EQ(verdict.kind, VerdictKind::ok) << verdict.message;
  EXPECT_EQ(verdict.row, 0u);
}

TEST(Verdicts, TrailingWhitespaceIsTolerated) {
  const Certificate certificate = certificate_of(kAi031Sample, Problem::ai031);
  for (const std::string output :
       {"1.34 0.66 2.00 2.00 \r\n0.00 2.00 4.00 0.00\t\n\n\n", "1.34 0.66 2.00 2.00\n0.00 2.00 4.00 0.00",
        "1.34 0.66 2.00 2.00\r\n0.00 2.00 4.00 0.00\r\n"}) {
    EXPECT_EQ(check(certificate, output).kind, VerdictKind::ok) << output;
  }
}

TEST(Verdicts, OffByOneInAClearCellIsWrongAnswerWithItsPosition) {
  const Certificate certificate = certificate_of(kAi031Sample, Problem::ai031);
  const Verdict verdict = check(certificate, "1.34 0.66 2.00 2.00\n0.00 2.01 4.00 0.00\n");
  EXPECT_EQ(verdict.kind, VerdictKind::wrong_answer);
  EXPECT_EQ(verdict.row, 2u);
  EXPECT_EQ(verdict.column, 2u);
  EXPECT_NE(verdict.message.find("expected 2.00"), std::string::npos) << verdict.message;
  // A value differing only beyond the band is as wrong as any other.
  EXPECT_EQ(check(certificate, "1.33 0.66 2.00 2.00\n0.00 2.00 4.00 0.00\n").kind, VerdictKind::wrong_answer);
  EXPECT_EQ(check(certificate, "1.34 0.66 2.00 2.00\n0.00 2.00 4.00 -0.01\n").kind, VerdictKind::wrong_answer);
}

TEST(Verdicts, PresentationErrors) {
  const Certificate certificate = certificate_of(kAi031Sample, Problem::ai031);
  const std::string second = "\n0.00 2.00 4.00 0.00\n";
  for (const std::string& output : std::vector<std::string>{
           "1.34 0.66 2.00 2.00\n-0.00 2.00 4.00 0.00\n",      // negative zero
           "1.34 0.66 2.0 2.00" + second,                      // too few decimals
           "1.34 0.66 2.000 2.00" + second,                    // too many decimals
           "1.34 0.66 2 2.00" + second,                        // no point
           "1.34 0.66 2.00e0 2.00" + second,                   // exponent
           "1.34 0.66 +2.00 2.00" + second,                    // plus sign
           "1.34 0.66 02.00 2.00" + second,                    // leading zero
           "1.34 0.66 .00 2.00" + second,                      // no integer digit
           "1.34 0.66 nan 2.00" + second,                      // not a number
           "1.34 0.66 2.00 2.00 0.00 2.00 4.00 0.00\n",        // one line
           "1.34 0.66 2.00 2.00\n",                            // missing row
           "",                                                 // nothing
           "1.34 0.66 2.00\n0.00 2.00 4.00 0.00\n",            // missing value
           "1.34 0.66 2.00 2.00 7.00\n0.00 2.00 4.00 0.00\n",  // extra value
           "1.34  0.66 2.00 2.00" + second,                    // double space
           " 1.34 0.66 2.00 2.00" + second,                    // leading space
           "1.34\t0.66 2.00 2.00" + second,                    // tab separator
           "1.34 0.66 2.00 2.00" + second + "1.00\n",          // extra row
           "1.34 0.66 2.00 2.00\n\n0.00 2.00 4.00 0.00\n",     // blank line inside
       }) {
    const Verdict verdict = check(certificate, output);
    EXPECT_EQ(verdict.kind, VerdictKind::presentation_error) << "'" << output << "' -> " << verdict.message;
    EXPECT_FALSE(verdict.message.empty());
  }
}

TEST(Verdicts, ShownTokensAreQuotedEscapedAndCut) {
  const Certificate certificate = certificate_of(kAi031Sample, Problem::ai031);
  const std::string second = "\n0.00 2.00 4.00 0.00\n";
  const Verdict control = check(certificate, std::string("1.34 0.66 2\x01.00 2.00", 20) + second);
  EXPECT_EQ(control.message,
            "line 1, value 3: expected a fixed decimal with exactly 2 digits after the point, found '2\\x01.00'");
  const Verdict huge = check(certificate, "1.34 0.66 " + std::string(50, '7') + ".00 2.00" + second);
  EXPECT_EQ(huge.kind, VerdictKind::wrong_answer);
  EXPECT_NE(huge.message.find("found '" + std::string(40, '7') + "...' (53 bytes)"), std::string::npos) << huge.message;
}

TEST(Verdicts, MinusZeroAtFourDecimalsIsPresentationError) {
  // ai006: a tiny negative output must be written 0.0000.
  const Certificate certificate = certificate_of("1 1\n1\n1\n-0.00000001\n", Problem::ai006);
  EXPECT_EQ(canonical_text(certificate), "0.0000\n");
  EXPECT_EQ(check(certificate, "0.0000\n").kind, VerdictKind::ok);
  EXPECT_EQ(check(certificate, "-0.0000\n").kind, VerdictKind::presentation_error);
  EXPECT_EQ(check(certificate, "-0.0001\n").kind, VerdictKind::wrong_answer);
}

TEST(RoundingTraps, ExactTieAcceptsBothNeighbours) {
  // Equal scores, V = 0.12 and 0.13: exactly 0.125.
  const Certificate certificate = certificate_of("2 1 1\n1\n0\n0.5\n0.5\n0.12\n0.13\n1 1\n0 1\n", Problem::ai031);
  EXPECT_EQ(certificate.cells[0].canonical, "0.12");
  EXPECT_EQ(check(certificate, "0.12\n0.13\n").kind, VerdictKind::ok);
  const Verdict other = check(certificate, "0.13\n0.13\n");
  EXPECT_EQ(other.kind, VerdictKind::acceptable) << other.message;
  EXPECT_EQ(other.row, 1u);
  EXPECT_EQ(check(certificate, "0.11\n0.13\n").kind, VerdictKind::wrong_answer);
  EXPECT_EQ(check(certificate, "0.14\n0.13\n").kind, VerdictKind::wrong_answer);
}

TEST(RoundingTraps, NearTieTheDoubleCannotSeeAcceptsTheDoublesRounding) {
  // 1.125 + 5.6e-21: canonical 1.13; the double computes 1.125 and prints 1.12 -> acceptable.
  const Certificate certificate =
      certificate_of("2 1 1\n0.0000000001\n0\n0\n0.0000000001\n0\n2.25\n1 1\n0 1\n", Problem::ai031);
  EXPECT_EQ(certificate.cells[0].canonical, "1.13");
  EXPECT_EQ(check(certificate, "1.13\n2.25\n").kind, VerdictKind::ok);
  EXPECT_EQ(check(certificate, "1.12\n2.25\n").kind, VerdictKind::acceptable);
  EXPECT_EQ(check(certificate, "1.14\n2.25\n").kind, VerdictKind::wrong_answer);
  // Row 2 (2.25 exactly, 2 decimals) is not near a boundary: 2.24 and 2.26 are wrong.
  EXPECT_EQ(check(certificate, "1.13\n2.24\n").kind, VerdictKind::wrong_answer);
}

TEST(RoundingTraps, NegativeTieAcceptsMinusOneHundredthButNotMinusZero) {
  // -0.005 exactly: canonical 0.00 (half-even), -0.01 acceptable, -0.00 a presentation error.
  const Certificate certificate = certificate_of("1 1 1\n1\n1\n-0.005\n1\n", Problem::ai031);
  EXPECT_EQ(check(certificate, "0.00\n").kind, VerdictKind::ok);
  EXPECT_EQ(check(certificate, "-0.01\n").kind, VerdictKind::acceptable);
  EXPECT_EQ(check(certificate, "-0.00\n").kind, VerdictKind::presentation_error);
  EXPECT_EQ(check(certificate, "0.01\n").kind, VerdictKind::wrong_answer);
}

TEST(ArbitraryBytes, NeverCrashAndNeverAccept) {
  const Certificate certificate = certificate_of(kAi031Sample, Problem::ai031);
  const std::uint64_t seed = 7;
  std::mt19937_64 rng(seed);
  const std::string alphabet = std::string("0123456789.- \n\t\re+x", 19) + std::string("\0\xff", 2);
  for (int round = 0; round < 3000; ++round) {
    std::string output = kAi031Answer;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % (output.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          output.insert(at, 1, c);
          break;
        case 1:
          if (at < output.size()) output.erase(at, 1);
          break;
        default:
          if (at < output.size()) output[at] = c;
          break;
      }
    }
    const Verdict verdict = check(certificate, output);
    // Only texts equal to the answer up to trailing whitespace may pass (nothing is ambiguous).
    if (verdict.kind == VerdictKind::ok || verdict.kind == VerdictKind::acceptable) {
      std::string trimmed = output;
      while (!trimmed.empty() && std::string(" \t\r\n").find(trimmed.back()) != std::string::npos) trimmed.pop_back();
      std::string lines;
      for (std::size_t start = 0; start <= trimmed.size();) {
        std::size_t end = trimmed.find('\n', start);
        if (end == std::string::npos) end = trimmed.size();
        std::string line = trimmed.substr(start, end - start);
        while (!line.empty() && std::string(" \t\r").find(line.back()) != std::string::npos) line.pop_back();
        lines += line + "\n";
        start = end + 1;
      }
      EXPECT_EQ(lines, kAi031Answer) << "seed " << seed << " round " << round;
    }
  }
  // Huge tokens and pure garbage.
  EXPECT_EQ(check(certificate, std::string(1 << 20, '9') + ".00 0.66 2.00 2.00\n0.00 2.00 4.00 0.00\n").kind,
            VerdictKind::wrong_answer);
  EXPECT_EQ(check(certificate, std::string(1 << 16, '\0')).kind, VerdictKind::presentation_error);
}

}  // namespace
}  // namespace attn::verify
