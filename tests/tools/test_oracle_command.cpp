// attncheck oracle / check / certify: testlib and Kattis exit codes, the judge message, ambiguous
// cells on stderr, and a directory of judge answers certified file by file.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli_runner.hpp"
#include "lesson_samples.hpp"

namespace attn {
namespace {

using testing_support::kAi031Answer;
using testing_support::kAi031Sample;
using testing_support::run_attncheck;
using testing_support::slurp;
using testing_support::TempDir;

TEST(CheckCommand, TestlibExitCodes) {
  TempDir dir;
  const std::string in = dir.file("t.in", kAi031Sample);
  const std::string ans = dir.file("t.ans", kAi031Answer);
  auto run = [&](const std::string& output, const std::string& extra = "") {
    return run_attncheck("check --problem ai031 " + in + " " + dir.file("t.out", output) + extra, "");
  };
  EXPECT_EQ(run(kAi031Answer).status, 0);
  EXPECT_EQ(run(kAi031Answer, " " + ans).status, 0);
  const auto wrong = run("1.34 0.66 2.00 2.00\n0.00 2.01 4.00 0.00\n");
  EXPECT_EQ(wrong.status, 1);
  EXPECT_NE(wrong.err.find("row 2, column 2"), std::string::npos) << wrong.err;
  EXPECT_EQ(run("1.34 0.66 2.00 2.00\n").status, 2);
  EXPECT_EQ(run("-0.00").status, 2);
  const auto bad_in = run_attncheck("check --problem ai031 " + dir.file("bad.in", "2 4 3\n") + " " + ans, "");
  EXPECT_EQ(bad_in.status, 3);
  EXPECT_NE(bad_in.err.find("does not divide"), std::string::npos) << bad_in.err;
  EXPECT_EQ(run_attncheck("check --problem ai031 " + in, "").status, 3);  // usage error is FAIL
  // A wrong answer file is reported but does not decide the verdict.
  const auto noted = run(kAi031Answer, " " + dir.file("wrong.ans", "9.99 0.66 2.00 2.00\n0.00 2.00 4.00 0.00\n"));
  EXPECT_EQ(noted.status, 0);
  EXPECT_NE(noted.err.find("answer file"), std::string::npos) << noted.err;
  // Exactly one line on stderr.
  EXPECT_EQ(std::count(wrong.err.begin(), wrong.err.end(), '\n'), 1);
}

TEST(CheckCommand, KattisExitCodesAndJudgeMessage) {
  TempDir dir;
  const std::string in = dir.file("t.in", kAi031Sample);
  const std::string ans = dir.file("t.ans", kAi031Answer);
  const std::string feedback = dir.path() + "/feedback";
  std::filesystem::create_directory(feedback);
  const std::string args = "check --problem ai031 --kattis " + in + " " + ans + " " + feedback;
  EXPECT_EQ(run_attncheck(args, kAi031Answer).status, 42);
  EXPECT_EQ(run_attncheck(args, "1.34 0.66 2.00 2.00\n0.00 2.01 4.00 0.00\n").status, 43);
  EXPECT_NE(slurp(feedback + "/judgemessage.txt").find("wrong answer"), std::string::npos);
  EXPECT_EQ(run_attncheck(args, "1.34 0.66 2.00 2.00 0.00 2.00 4.00 0.00\n").status, 43);  // PE counts as wrong
  EXPECT_NE(slurp(feedback + "/judgemessage.txt").find("presentation error"), std::string::npos);
  EXPECT_EQ(run_attncheck(args, std::string("\0\xff\x80 garbage", 12)).status, 43);
}

TEST(OracleCommand, CanonicalOnStdoutAmbiguousCellsOnStderr) {
  const auto plain = run_attncheck("oracle --problem ai031", kAi031Sample);
  EXPECT_EQ(plain.status, 0);
  EXPECT_EQ(plain.out, kAi031Answer);
  EXPECT_EQ(plain.err, "");
  const auto tie = run_attncheck("oracle --problem ai031", "2 1 1\n1\n0\n0.5\n0.5\n0.12\n0.13\n1 1\n0 1\n");
  EXPECT_EQ(tie.out, "0.12\n0.13\n");
  EXPECT_NE(tie.err.find("row 1, column 1: exact 0.1250000000000000000000000"), std::string::npos) << tie.err;
  EXPECT_NE(tie.err.find("exact tie"), std::string::npos) << tie.err;
  EXPECT_NE(tie.err.find("0.12 or 0.13"), std::string::npos) << tie.err;
  const auto digits = run_attncheck("oracle --problem ai006 --digits 30", "3 1\n1\n1\n1\n0\n0\n10\n1\n2\n100\n");
  EXPECT_EQ(digits.out,
            "1.00000000000000000000000000000\n1.50000000000000000000000000000\n"
            "99.9910570258575863508432316976\n");
  EXPECT_EQ(run_attncheck("oracle --problem ai031", "2 4 3\n").status, 1);
}

TEST(CertifyCommand, ReportsEachFileAndFailsOnAWrongOne) {
  TempDir dir;
  dir.file("a.in", kAi031Sample);
  dir.file("a.ans", kAi031Answer);
  dir.file("b.in", "2 1 1\n1\n0\n0.5\n0.5\n0.12\n0.13\n1 1\n0 1\n");
  dir.file("b.out", "0.13\n0.13\n");  // the tie's other neighbour
  const auto good = run_attncheck("certify --problem ai031 " + dir.path(), "");
  EXPECT_EQ(good.status, 0) << good.out << good.err;
  EXPECT_NE(good.out.find("a.ans: certified\n"), std::string::npos) << good.out;
  EXPECT_NE(good.out.find("b.out: certified with ambiguous cells r1c1"), std::string::npos) << good.out;
  dir.file("c.in", kAi031Sample);
  dir.file("c.ans", "1.34 0.66 2.00 2.00\n0.00 2.00 4.01 0.00\n");
  dir.file("d.in", "2 4 2\n1 0 1 1\n0 1 0 0\n1 0 0 0\n0 1 0 0\n2 0 0 4\n0 2 4 0\n1 1\n0 1\n\n");  // blank line
  dir.file("d.ans", kAi031Answer);
  const auto bad = run_attncheck("certify --problem ai031 " + dir.path(), "");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("c.ans: wrong: row 2, column 3"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("d.in: invalid input"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("4 inputs: 2 certified"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace attn
