// run_on_workers: every index runs exactly once per call, index 0 on the caller, with callers on
// several threads at once, from within a task, after task 0 threw, and in a child process after
// fork() (where the parent's workers do not exist); and the fast kernel's bits do not change when
// several callers share the workers.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "flash_attention.hpp"
#include "worker_pool.hpp"

namespace attn {
namespace {

// Runs one call of `count` and returns how often each index ran; flags index 0 off the caller.
std::vector<int> run_once(std::size_t count, bool& zero_on_caller) {
  std::vector<std::atomic<int>> runs(count);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> zero_here{true};
  run_on_workers(count, [&](std::size_t t) {
    runs.at(t).fetch_add(1);
    if (t == 0 && std::this_thread::get_id() != caller) zero_here = false;
  });
  zero_on_caller = zero_here;
  std::vector<int> result;
  for (const auto& r : runs) result.push_back(r.load());
  return result;
}

TEST(WorkerPool, EveryIndexRunsExactlyOnceAndZeroOnTheCaller) {
  for (int call = 0; call < 2000; ++call) {
    const std::size_t count = static_cast<std::size_t>(call % 5);  // 0 .. 4: more workers than a call wants
    bool zero_on_caller = false;
    const std::vector<int> runs = run_once(count, zero_on_caller);
    ASSERT_EQ(runs, std::vector<int>(count, 1)) << "call " << call << ", count " << count;
    if (count > 0) {
      ASSERT_TRUE(zero_on_caller) << "call " << call;
    }
  }
}

TEST(WorkerPool, ThrowingTaskZeroLeavesAfterTheOthersAndTheNextCallIsWhole) {
  std::atomic<int> others{0};
  EXPECT_THROW(run_on_workers(3,
                              [&](std::size_t t) {
                                if (t == 0) throw std::runtime_error("task 0");
                                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                ++others;
                              }),
               std::runtime_error);
  EXPECT_EQ(others.load(), 2);  // both had returned when the exception left
  bool zero_on_caller = false;
  EXPECT_EQ(run_once(3, zero_on_caller), std::vector<int>(3, 1));
}

TEST(WorkerPool, CallFromWithinATaskIsWhole) {
  std::atomic<int> wrong{0};
  run_on_workers(2, [&](std::size_t) {
    bool zero_on_caller = false;
    if (run_once(3, zero_on_caller) != std::vector<int>(3, 1) || !zero_on_caller) ++wrong;
  });
  EXPECT_EQ(wrong.load(), 0);
}

TEST(WorkerPool, ConcurrentCallersEachGetEveryIndexOnce) {
  // One caller holds the workers, the others start threads of their own: every call is whole.
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int call = 0; call < 300; ++call) {
        const std::size_t count = 2 + static_cast<std::size_t>((call + c) % 3);
        bool zero_on_caller = false;
        if (run_once(count, zero_on_caller) != std::vector<int>(count, 1) || !zero_on_caller) ++wrong;
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(WorkerPool, ChildAfterForkRunsEveryIndex) {
  bool zero_on_caller = false;
  ASSERT_EQ(run_once(3, zero_on_caller), std::vector<int>(3, 1));  // the parent's workers exist now
  const pid_t child = fork();
  ASSERT_NE(child, -1) << std::strerror(errno);
  if (child == 0) {
    alarm(30);  // a call waiting for the parent's workers would hang: SIGALRM fails the test instead
    bool ok = true;
    for (int call = 0; call < 50 && ok; ++call) {  // on the child's own workers after the first
      bool child_zero = false;
      ok = run_once(2 + call % 3, child_zero) == std::vector<int>(2 + call % 3, 1) && child_zero;
    }
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(WorkerPool, KernelBitsUnchangedWhenTwoCallersShareTheWorkers) {
  const FlashShape shape{2, 4, 2, 150, 130, 24, 20};
  std::vector<float> Q(2 * 4 * 150 * 24), K(2 * 2 * 130 * 24), V(2 * 2 * 130 * 20);
  std::uint32_t state = 12345;
  for (auto* v : {&Q, &K, &V})
    for (float& x : *v) {
      state = state * 1664525u + 1013904223u;
      x = static_cast<float>(state >> 8) / static_cast<float>(1 << 24) * 4.0f - 2.0f;
    }
  FlashOptions options;
  options.causal = CausalAlignment::bottom_right;
  options.query_tile = 32;
  options.scale_divisor = 5;
  std::vector<float> one(2 * 4 * 150 * 20);
  ASSERT_EQ(flash_attention(shape, std::span<const float>(Q), K, V, one, options), KernelStatus::ok);
  options.threads = 2;
  std::atomic<int> differ{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      std::vector<float> out(one.size());
      for (int call = 0; call < 40; ++call) {
        if (flash_attention(shape, std::span<const float>(Q), K, V, out, options) != KernelStatus::ok ||
            std::memcmp(out.data(), one.data(), one.size() * sizeof(float)) != 0)
          ++differ;
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(differ.load(), 0);
}

}  // namespace
}  // namespace attn
