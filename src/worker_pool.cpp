#include "worker_pool.hpp"

#include <pthread.h>

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
  // false when the pool is in use: the caller runs the call on threads of its own then.
  bool try_run(std::size_t count, const std::function<void(std::size_t)>& task) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
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
    try {
      task(0);
    } catch (...) {  // the workers still read `task`: wait for them before it goes
      wait_for_workers();
      throw;
    }
    wait_for_workers();
    return true;
  }

 private:
  static constexpr std::chrono::microseconds kSpin{500};

  void wait_for_workers() {
    if (!spin_until([this] { return remaining_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return remaining_.load(std::memory_order_acquire) == 0; });
    }
  }

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

  // A worker the last generation did not want sleeps at once instead of spinning (calls with
  // fewer threads than the pool has leave the rest of the machine alone).
  [[noreturn]] void serve(std::size_t index) {
    std::uint64_t seen = 0;
    bool spin = true;
    for (;;) {
      const auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
      if (spin && spin_until(fresh)) {
        lock.lock();
      } else {
        lock.lock();
        wake_.wait(lock, fresh);
      }
      seen = generation_.load(std::memory_order_relaxed);
      spin = index <= wanted_;
      if (!spin) continue;
      const std::function<void(std::size_t)>* task = task_;
      lock.unlock();
      (*task)(index);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        const std::lock_guard<std::mutex> done(mutex_);  // the caller checks under it before sleeping
        done_.notify_one();
      }
    }
  }

  std::mutex busy_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;  // parked in serve() until the process exits; never joined
  const std::function<void(std::size_t)>* task_ = nullptr;  // the generation's, under mutex_
  std::size_t wanted_ = 0;                                  // under mutex_
  std::atomic<std::size_t> remaining_{0};
  std::atomic<std::uint64_t> generation_{0};                // written under mutex_

 public:
  Pool* ancestor = nullptr;  // in a child of fork(): the pool forgotten before this one's parent's
};

// The process's pool, made on first use and never destroyed: its workers wait on its members until
// the process exits, and a call made during static destruction still finds it. A child of fork()
// has none of its workers (and maybe a mutex copied locked): the handler forgets the parent's pool
// (leaked in the child, never touched again) and the child's first call makes its own.
// `forgotten` keeps each forgotten pool reachable (LeakSanitizer), chained through `ancestor`.
std::atomic<Pool*> process_pool{nullptr};
Pool* forgotten = nullptr;
void forget_pool_in_child() {  // the child has one thread here
  if (Pool* parents = process_pool.load(std::memory_order_relaxed); parents != nullptr) {
    parents->ancestor = forgotten;
    forgotten = parents;
  }
  process_pool.store(nullptr, std::memory_order_relaxed);
}

// nullptr when the handler could not be registered (ENOMEM): then every call starts its threads.
Pool* pool() {
  static const bool registered = pthread_atfork(nullptr, nullptr, forget_pool_in_child) == 0;
  if (!registered) return nullptr;
  Pool* current = process_pool.load(std::memory_order_acquire);
  if (current != nullptr) return current;
  auto* made = new Pool;
  if (process_pool.compare_exchange_strong(current, made, std::memory_order_acq_rel)) return made;
  delete made;  // another thread made one first
  return current;
}

thread_local bool in_call = false;  // task(0) calling run_on_workers again runs that call on new threads

}  // namespace

void run_on_workers(std::size_t count, const std::function<void(std::size_t)>& task) {
  if (count <= 1) {
    if (count == 1) task(0);
    return;
  }
  if (!in_call) {
    in_call = true;
    struct Leave {
      ~Leave() { in_call = false; }
    } leave;
    if (Pool* workers = pool(); workers != nullptr && workers->try_run(count, task)) return;
  }
  std::vector<std::jthread> threads;
  for (std::size_t t = 1; t < count; ++t) threads.emplace_back(task, t);
  task(0);
}

}  // namespace attn
