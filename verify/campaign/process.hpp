// Running an external solution program: input on stdin, output captured, a wall-clock limit.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace attn::verify {

/// How a run ended.
enum class ProcessEnd { exited, signaled, timed_out, output_limit, spawn_failed };

/// What the program did.
struct ProcessResult {
  ProcessEnd end = ProcessEnd::spawn_failed;
  int status = 0;          ///< exit status (exited) or signal number (signaled)
  std::string output;      ///< stdout, up to the output limit
  std::string error_tail;  ///< the last bytes of stderr, for reports
  double seconds = 0;      ///< wall-clock time
};

/// Runs `/bin/sh -c command` with `input` on stdin. The whole process group is killed at the
/// time limit or when stdout exceeds `output_limit` bytes. Never throws.
[[nodiscard]] ProcessResult run_process(const std::string& command, std::string_view input, double timeout_seconds,
                                        std::size_t output_limit = std::size_t{64} << 20);

/// "exit 3", "killed by signal 11 (SIGSEGV)", "timed out after 2 s", ...
[[nodiscard]] std::string describe(const ProcessResult& result, double timeout_seconds);

}  // namespace attn::verify
