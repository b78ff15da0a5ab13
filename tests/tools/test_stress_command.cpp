// attncheck stress on solution programs kept in tests/solutions: the lesson's wrong
// implementations (§08) and two formatting bugs are caught with a small counterexample; correct
// programs in Python and C++ pass, including on genuinely ambiguous roundings.
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "cli_runner.hpp"

namespace attn {
namespace {

using testing_support::run_attncheck;

// Debian's interpreter starts in a fraction of the time of a version manager's shim.
std::string python() { return ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3"; }

std::string solution(const std::string& file) {
  return python() + " " + std::string(ATTNCHECK_SOURCE_DIR) + "/tests/solutions/" + file;
}

struct WrongProgram {
  const char* name;
  const char* problem;
  const char* file;
  const char* verdict;  // what stress must report
  int max_rows;         // the shrunk counterexample's n is at most this
};

// Test names and failure messages show the case name, not its bytes.
void PrintTo(const WrongProgram& c, std::ostream* os) { *os << c.name; }

class WrongSolution : public testing::TestWithParam<WrongProgram> {};

TEST_P(WrongSolution, IsCaughtWithASmallCounterexample) {
  const WrongProgram& w = GetParam();
  const auto p = run_attncheck(std::string("stress --problem ") + w.problem + " --solution '" + solution(w.file) +
                                   "' --cases 100 --seed 1 --jobs 2",
                               "");
  EXPECT_EQ(p.status, 1) << p.out << p.err;
  EXPECT_NE(p.out.find(std::string(": ") + w.verdict + ":"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("canonical answer:"), std::string::npos);
  EXPECT_NE(p.out.find("replay: attncheck stress"), std::string::npos);
  // The shrunk input is small: its header's n is at most max_rows.
  const std::size_t start = p.out.find("shrink runs):\n");
  ASSERT_NE(start, std::string::npos) << p.out;
  const std::string header = p.out.substr(start + 14, p.out.find('\n', start + 14) - start - 14);
  EXPECT_LE(std::stoi(header), w.max_rows) << "counterexample is not small:\n" << p.out;
}

INSTANTIATE_TEST_SUITE_P(
    Stress, WrongSolution,
    testing::Values(WrongProgram{"SqrtDInsteadOfSqrtHd", "ai031", "ai031_sqrt_d.py", "wrong answer", 3},
                    WrongProgram{"AllMaskedRowNotZeroed", "ai031", "ai031_masked_row_not_zeroed.py", "wrong answer", 3},
                    WrongProgram{"WrongHeadSlicing", "ai031", "ai031_wrong_head_slicing.py", "wrong answer", 3},
                    WrongProgram{"NoMaxSubtraction", "ai006", "ai006_no_max_subtraction.py", "runtime error", 3},
                    WrongProgram{"NegativeZeroPrinted", "ai031", "ai031_negative_zero.py", "presentation error", 3},
                    WrongProgram{"DoubleRounding", "ai006", "ai006_double_rounding.py", "wrong answer",
                                 // needs a value within 5e-7 of a boundary: no row can go without moving it
                                 8}),
    [](const auto& info) { return std::string(info.param.name); });

struct CorrectProgram {
  const char* name;
  const char* problem;
  std::string command;
};

// Test names and failure messages show the case name, not its bytes.
void PrintTo(const CorrectProgram& c, std::ostream* os) { *os << c.name; }

class CorrectSolution : public testing::TestWithParam<CorrectProgram> {};

TEST_P(CorrectSolution, PassesWithoutFalseAlarms) {
  const CorrectProgram& c = GetParam();
  const auto p = run_attncheck(
      std::string("stress --problem ") + c.problem + " --solution '" + c.command + "' --cases 150 --seed 7 --jobs 2",
      "");
  EXPECT_EQ(p.status, 0) << p.out << p.err;
  EXPECT_NE(p.out.find("stress: 150 cases passed"), std::string::npos) << p.out;
}

INSTANTIATE_TEST_SUITE_P(Stress, CorrectSolution,
                         testing::Values(CorrectProgram{"PythonAi006", "ai006", solution("ai006_reference.py")},
                                         CorrectProgram{"PythonAi031", "ai031", solution("ai031_reference.py")},
                                         CorrectProgram{"CppAi031", "ai031", ATTNCHECK_REFERENCE_SOLUTION},
                                         CorrectProgram{"InTreeSolverGeneral",
                                                        "general --max-n 12 --max-m 12 --max-d 8 --max-batch 2",
                                                        std::string(ATTNCHECK_BINARY) + " solve --problem general"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(StressCommand, ACrashingProgramIsARuntimeError) {
  const auto p = run_attncheck("stress --problem ai006 --solution 'kill -SEGV $$' --cases 3", "");
  EXPECT_EQ(p.status, 1);
  EXPECT_NE(p.out.find("runtime error: killed by signal 11"), std::string::npos) << p.out;
}

TEST(StressCommand, ASlowProgramTimesOut) {
  const auto p = run_attncheck("stress --problem ai006 --solution 'sleep 5' --cases 1 --timeout 0.2", "");
  EXPECT_EQ(p.status, 1);
  EXPECT_NE(p.out.find("time limit exceeded"), std::string::npos) << p.out;
}

TEST(StressCommand, EmptyOutputIsAPresentationError) {
  const auto p = run_attncheck("stress --problem ai031 --solution 'cat >/dev/null' --cases 1", "");
  EXPECT_EQ(p.status, 1);
  EXPECT_NE(p.out.find("presentation error"), std::string::npos) << p.out;
}

TEST(GenCommand, IsReproducibleAndStrictValid) {
  const auto first = run_attncheck("gen --problem ai031 --seed 11 --profile edge", "");
  const auto second = run_attncheck("gen --problem ai031 --seed 11 --profile edge", "");
  EXPECT_EQ(first.status, 0);
  EXPECT_EQ(first.out, second.out);
  EXPECT_NE(first.out, run_attncheck("gen --problem ai031 --seed 12 --profile edge", "").out);
  EXPECT_EQ(run_attncheck("validate --problem ai031", first.out).status, 0);
}

}  // namespace
}  // namespace attn
