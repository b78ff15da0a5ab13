#include "worker_pool.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace attn {
namespace {

// One call at a time: `busy_` is held for the whole call, so a second caller (another thread of the
// user's) does not wait for it but starts threads of its own. Each call is a generation, published
// under `mutex_`: the workers it wants (indices 1 .. wanted_) run the task once and count down
// `remaining_`; the caller waits for 0. A worker reads a generation's task and size under the
// mutex, so a late one only ever sees the newest generation (or none new), and a generation cannot
// end without every worker it wanted: no worker runs a task twice or misses one.
//
// Waiting spins first (kSpin), then sleeps on a condition variable: waking a sleeping thread on
// another core took about 35 µs in this VM (an inter-processor interrupt through the hypervisor),
// most of what thread creation cost, while back-to-back calls find their workers still spinning.
class Pool {
 public:
  // false when the pool is in use or belongs to the parent of a fork(): the caller runs the call
  // on threads of its own then.
  bool try_run(std::size_t count, const std::function<void(std::size_t)>& task) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock() || getpid() != owner_) return false;
    while (threads_.size() + 1 < count) {  // worker i runs task(i), i >= 1
      const std::size_t index = threads_.size() + 1;
      threads_.emplace_back([this, index] { serve(index); });
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      wanted_ = count - 1;
      remaining_.store(count - 1, std::memory_order_relaxed);
      generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    wake_.notify_all();
    task(0);
    if (!spin_until([this] { return remaining_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return remaining_.load(std::memory_order_acquire) == 0; });
    }
    return true;
  }

 private:
  static constexpr std::chrono::microseconds kSpin{500};

  // Polls `ready` for up to kSpin; true as soon as it holds.
  template <class Ready> static bool spin_until(const Ready& ready) {
    const auto deadline = std::chrono::steady_clock::now() + kSpin;
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      if (std::chrono::steady_clock::now() >= deadline) return ready();
    }
  }

  [[noreturn]] void serve(std::size_t index) {
    std::uint64_t seen = 0;
    for (;;) {
      const auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
      if (spin_until(fresh)) {
        lock.lock();
      } else {
        lock.lock();
        wake_.wait(lock, fresh);
      }
      seen = generation_.load(std::memory_order_relaxed);
      if (index > wanted_) continue;
      const std::function<void(std::size_t)>* task = task_;
      lock.unlock();
      (*task)(index);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        const std::lock_guard<std::mutex> done(mutex_);  // the caller checks under it before sleeping
        done_.notify_one();
      }
    }
  }

  const pid_t owner_ = getpid();
  std::mutex busy_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;  // parked in serve() until the process exits; never joined
  const std::function<void(std::size_t)>* task_ = nullptr;  // the generation's, under mutex_
  std::size_t wanted_ = 0;                                  // under mutex_
  std::atomic<std::size_t> remaining_{0};
  std::atomic<std::uint64_t> generation_{0};                // written under mutex_
};

}  // namespace

void run_on_workers(std::size_t count, const std::function<void(std::size_t)>& task) {
  if (count <= 1) {
    if (count == 1) task(0);
    return;
  }
  // Never destroyed: its workers wait on its members until the process exits, and a call made
  // during static destruction still finds it.
  static Pool* const pool = new Pool;
  if (pool->try_run(count, task)) return;
  std::vector<std::jthread> threads;
  for (std::size_t t = 1; t < count; ++t) threads.emplace_back(task, t);
  task(0);
}

}  // namespace attn
