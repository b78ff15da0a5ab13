// Running a program under /bin/sh: exit status, stdout, stdin (large and ignored), stderr tail,
// the time limit on the whole process group, the output cap, signals, a missing command.
// Limits are generous (a loaded 2-core machine); tests assert how a run ended, never its speed.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "campaign/process.hpp"

namespace attn::verify {
namespace {

// Generous for commands that finish at once: only a hang would reach it.
constexpr double kPlentyOfTime = 60;

// 8 MiB: far above any pipe buffer (64 KiB on Linux), so writing and reading must interleave.
constexpr std::size_t kLargeInput = std::size_t{8} << 20;

// Bytes that differ from position to position (a 64-bit LCG), so a dropped or reordered chunk shows.
std::string patterned_bytes(std::size_t size) {
  std::string out(size, '\0');
  std::uint64_t state = 0x9e3779b97f4a7c15u;
  for (char& c : out) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    c = static_cast<char>(state >> 56);
  }
  return out;
}

// True once /proc says `pid` is gone or a zombie (dead, waiting for whoever reaps it).
bool process_is_dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return true;
  const char state = text[close + 2];
  return state == 'Z' || state == 'X';
}

// Waits up to 10 s for a process to die (the kernel delivers SIGKILL asynchronously).
bool dies_soon(pid_t pid) {
  for (int tries = 0; tries < 200; ++tries) {
    if (process_is_dead(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(Process, ExitStatusIsReported) {
  const ProcessResult result = run_process("exit 3", "", kPlentyOfTime);
  EXPECT_EQ(result.end, ProcessEnd::exited);
  EXPECT_EQ(result.status, 3);
  EXPECT_EQ(describe(result, kPlentyOfTime), "exit 3");
  EXPECT_GE(result.seconds, 0.0);
}

TEST(Process, StdoutIsCaptured) {
  const ProcessResult result = run_process("printf 'a b\\n'; printf 'c'", "", kPlentyOfTime);
  EXPECT_EQ(result.end, ProcessEnd::exited);
  EXPECT_EQ(result.status, 0);
  EXPECT_EQ(result.output, "a b\nc");
  EXPECT_EQ(result.error_tail, "");
}

TEST(Process, StdinIsDelivered) {
  const ProcessResult result = run_process("cat", "1 2\n3 4\n", kPlentyOfTime);
  EXPECT_EQ(result.end, ProcessEnd::exited);
  EXPECT_EQ(result.output, "1 2\n3 4\n");
}

TEST(Process, EmptyInputIsEndOfFile) {
  // cat only ends when its stdin closes: a hang here would end as timed_out.
  const ProcessResult result = run_process("cat; echo done", "", kPlentyOfTime);
  EXPECT_EQ(result.end, ProcessEnd::exited);
  EXPECT_EQ(result.output, "done\n");
}

TEST(Process, LargeInputPassesThroughCatIntact) {
  const std::string input = patterned_bytes(kLargeInput);
  const ProcessResult result = run_process("cat", input, kPlentyOfTime);
  ASSERT_EQ(result.end, ProcessEnd::exited) << describe(result, kPlentyOfTime);
  EXPECT_EQ(result.status, 0);
  ASSERT_EQ(result.output.size(), input.size());
  EXPECT_TRUE(result.output == input) << "cat's output differs from its input";
}

TEST(Process, LargeInputIsReadToTheEnd) {
  // wc reads everything before it writes: the whole input arrives and stdin is closed after it.
  const ProcessResult result = run_process("wc -c", patterned_bytes(kLargeInput), kPlentyOfTime);
  ASSERT_EQ(result.end, ProcessEnd::exited) << describe(result, kPlentyOfTime);
  std::istringstream count(result.output);
  std::size_t bytes = 0;
  ASSERT_TRUE(count >> bytes) << result.output;
  EXPECT_EQ(bytes, kLargeInput);
}

TEST(Process, SmallStderrIsKeptWhole) {
  const ProcessResult result = run_process("echo oops >&2; exit 1", "", kPlentyOfTime);
  EXPECT_EQ(result.end, ProcessEnd::exited);
  EXPECT_EQ(result.status, 1);
  EXPECT_EQ(result.error_tail, "oops\n");
  EXPECT_EQ(result.output, "");
}

TEST(Process, StderrTailKeepsTheLastBytes) {
  // seq 1 200000 writes about 1.3 MB, then a short last write; the expected text is built here
  // independently. The pause makes the last write arrive on its own, after the bulk.
  std::string full;
  for (int k = 1; k <= 200000; ++k) full += std::to_string(k) + "\n";
  full += "END\n";
  const ProcessResult result = run_process("seq 1 200000 >&2; sleep 0.2; echo END >&2; echo out", "", kPlentyOfTime);
  ASSERT_EQ(result.end, ProcessEnd::exited) << describe(result, kPlentyOfTime);
  EXPECT_EQ(result.output, "out\n");
  ASSERT_FALSE(result.error_tail.empty());
  EXPECT_LT(result.error_tail.size(), full.size()) << "the tail is a bounded suffix, not everything";
  ASSERT_LE(result.error_tail.size(), full.size());
  EXPECT_EQ(full.compare(full.size() - result.error_tail.size(), result.error_tail.size(), result.error_tail), 0)
      << "error_tail is not the end of stderr";
  EXPECT_GE(result.error_tail.size(), std::string("199999\n200000\nEND\n").size());
}

TEST(Process, TimeoutKillsTheProcessGroup) {
  // Two background sleeps and the shell itself: all three belong to the group the limit kills.
  // Each prints its pid first; 5 s is ample for sh to start and echo even on a loaded machine.
  constexpr double kLimit = 5;
  const ProcessResult result = run_process("echo $$; sleep 300 & echo $!; sleep 300 & echo $!; wait", "", kLimit);
  EXPECT_EQ(result.end, ProcessEnd::timed_out);
  EXPECT_EQ(describe(result, kLimit), "timed out after 5 s");
  // A survivor would keep the run alive for 300 s; 60 s is the generous bound that tells them apart.
  EXPECT_LT(result.seconds, 60.0);
  std::istringstream pids(result.output);
  std::vector<pid_t> started;
  for (pid_t pid = 0; pids >> pid;) started.push_back(pid);
  ASSERT_EQ(started.size(), 3u) << "output: " << result.output;
  for (pid_t pid : started) {
    const bool dead = dies_soon(pid);
    EXPECT_TRUE(dead) << "pid " << pid << " survived the time limit";
    if (!dead) ::kill(pid, SIGKILL);  // do not leave it behind
  }
}

TEST(Process, OutputLimitStopsARunawayWriter) {
  constexpr std::size_t kLimit = std::size_t{1} << 20;
  const ProcessResult result = run_process("yes", "", kPlentyOfTime, kLimit);
  ASSERT_EQ(result.end, ProcessEnd::output_limit) << describe(result, kPlentyOfTime);
  // It stops because stdout passed the limit; what is kept is exactly the first kLimit bytes.
  EXPECT_EQ(result.output.size(), kLimit);
  for (std::size_t k = 0; k < result.output.size(); ++k) {
    if (result.output[k] != (k % 2 == 0 ? 'y' : '\n')) {
      ADD_FAILURE() << "output byte " << k << " is not what yes wrote";
      break;
    }
  }
}

TEST(Process, CrashIsReportedAsASignal) {
  const ProcessResult result = run_process("kill -SEGV $$", "", kPlentyOfTime);
  ASSERT_EQ(result.end, ProcessEnd::signaled) << describe(result, kPlentyOfTime);
  EXPECT_EQ(result.status, SIGSEGV);
  const std::string text = describe(result, kPlentyOfTime);
  EXPECT_EQ(text, "killed by signal " + std::to_string(SIGSEGV) + " (SIGSEGV)");
}

TEST(Process, ProgramIgnoringItsInputDoesNotKillTheHarness) {
  // Writing 8 MiB to a pipe nobody reads raises SIGPIPE; the harness must survive it and report
  // how the program ended. Reaching the next line at all is half the test.
  const std::string input = patterned_bytes(kLargeInput);
  const ProcessResult ignored = run_process("exit 0", input, kPlentyOfTime);
  EXPECT_EQ(ignored.end, ProcessEnd::exited) << describe(ignored, kPlentyOfTime);
  EXPECT_EQ(ignored.status, 0);
  const ProcessResult partly = run_process("head -c 5", input, kPlentyOfTime);
  EXPECT_EQ(partly.end, ProcessEnd::exited) << describe(partly, kPlentyOfTime);
  EXPECT_EQ(partly.output, input.substr(0, 5));
  // And the harness keeps working afterwards.
  EXPECT_EQ(run_process("cat", "still here", kPlentyOfTime).output, "still here");
}

TEST(Process, ChildStartsWithDefaultSigpipe) {
  // The harness ignores SIGPIPE; the program must not inherit that (a writer into a closed pipe
  // should die, as it would from a terminal). SigIgn is the hex mask of ignored signals.
  const ProcessResult result = run_process("grep '^SigIgn:' /proc/$$/status", "", kPlentyOfTime);
  ASSERT_EQ(result.end, ProcessEnd::exited);
  std::istringstream line(result.output);
  std::string label;
  std::uint64_t ignored = 0;
  ASSERT_TRUE(line >> label >> std::hex >> ignored) << result.output;
  EXPECT_EQ(ignored & (std::uint64_t{1} << (SIGPIPE - 1)), 0u) << result.output;
}

TEST(Process, MissingCommandExits127) {
  // POSIX: the shell exits 127 when it cannot find the command, and says so on stderr.
  const ProcessResult result = run_process("/nonexistent/attncheck-no-such-program", "1\n", kPlentyOfTime);
  EXPECT_EQ(result.end, ProcessEnd::exited);
  EXPECT_EQ(result.status, 127);
  EXPECT_FALSE(result.error_tail.empty());
  EXPECT_EQ(describe(result, kPlentyOfTime), "exit 127");
}

}  // namespace
}  // namespace attn::verify
