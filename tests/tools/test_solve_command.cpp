// attncheck solve / validate as a process: bytes in, bytes and exit codes out.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli_runner.hpp"
#include "lesson_samples.hpp"

namespace attn {
namespace {

using testing_support::kAi031Sample;

using testing_support::run_attncheck;

TEST(SolveCommand, PrintsTheLessonAnswersByteForByte) {
  auto p = run_attncheck("solve --problem ai031", kAi031Sample);
  EXPECT_EQ(p.status, 0);
  EXPECT_EQ(p.out, "1.34 0.66 2.00 2.00\n0.00 2.00 4.00 0.00\n");
  EXPECT_EQ(p.err, "");
  p = run_attncheck("solve --problem ai006", "3 1\r\n1 1 1\r\n0 0 10\r\n1 2 100");
  EXPECT_EQ(p.status, 0);
  EXPECT_EQ(p.out, "1.0000\n1.5000\n99.9911\n");
}

TEST(SolveCommand, BadInputExitsOneWithOnePositionedLineAndNoOutput) {
  const auto p = run_attncheck("solve --problem ai006", "3 1\n1\n1\n1\n0\n0\n1001\n1\n2\n3\n");
  EXPECT_EQ(p.status, 1);
  EXPECT_EQ(p.out, "");
  EXPECT_EQ(p.err, "line 7, column 1: K[2][0] = 1001 exceeds |x| <= 1000\n");
}

TEST(SolveCommand, LimitFlagsWidenTheBounds) {
  const std::string input = "1 1\n2000\n1\n1\n";
  EXPECT_EQ(run_attncheck("solve --problem ai006", input).status, 1);
  const auto p = run_attncheck("solve --problem ai006 --max-abs 1e4", input);
  EXPECT_EQ(p.status, 0);
  EXPECT_EQ(p.out, "1.0000\n");
}

TEST(SolveCommand, RefusesUnsafeLimits) {
  const auto p = run_attncheck("solve --problem ai006 --max-abs 1e200", "1 1\n1\n1\n1\n");
  EXPECT_EQ(p.status, 1);
  EXPECT_EQ(p.out, "");
  EXPECT_NE(p.err.find("--max-abs"), std::string::npos);
}

TEST(SolveCommand, UsageErrorsAreNotSilent) {
  const auto p = run_attncheck("solve --problem ai999", "");
  EXPECT_EQ(p.status, 2);
  EXPECT_FALSE(p.err.empty());
}

TEST(ValidateCommand, ExitCodesInBothConventions) {
  EXPECT_EQ(run_attncheck("validate --problem ai031", kAi031Sample).status, 0);
  EXPECT_EQ(run_attncheck("validate --problem ai031 --kattis", kAi031Sample).status, 42);
  const std::string crlf = "2 4 2\r" + kAi031Sample.substr(5);
  auto p = run_attncheck("validate --problem ai031", crlf);
  EXPECT_EQ(p.status, 1);
  EXPECT_EQ(p.err, "line 1, column 6: expected a line end '\\n', found '\\r'\n");
  EXPECT_EQ(run_attncheck("validate --problem ai031 --kattis", crlf).status, 43);
}

}  // namespace
}  // namespace attn
