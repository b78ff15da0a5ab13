// Threads kept across calls of the fast kernel. Starting and joining a thread per call cost the
// kernel about 43 µs per 2-thread call (a Zen 5 VM; a tiny call took 53 µs on 2 threads against
// 9.5 µs on 1), a sixth of a 2-thread fp32 causal call at n = 512; a parked worker is woken instead.
#pragma once

#include <cstddef>
#include <functional>

namespace attn {

/// Runs task(t) for every t in [0, count) and returns when every one has returned: t = 0 on the
/// calling thread, the others on the process's parked workers (started on first use, kept until
/// the process exits; a child of fork() makes its own), or, while another call holds them or from
/// within a task, on threads started for this call. When task(0) throws, the exception leaves
/// after the other indices have returned; the others must not throw. Throws std::system_error
/// when a thread cannot be started (as std::thread does).
void run_on_workers(std::size_t count, const std::function<void(std::size_t)>& task);

}  // namespace attn
