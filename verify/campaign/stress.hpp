// Stress testing a judge solution program: generated inputs, certified verdicts, and a shrunk
// counterexample on the first failure.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "campaign/generators.hpp"
#include "campaign/process.hpp"
#include "judge/checker.hpp"

namespace attn::verify {

/// What a stress run does.
struct StressOptions {
  Problem problem = Problem::ai006;
  Limits limits = default_limits(Problem::ai006);
  std::string command;  ///< run through /bin/sh -c, input on stdin
  int cases = 100;
  std::uint64_t seed = 1;        ///< case k uses seed + k
  double timeout_seconds = 2.0;  ///< per run
  int jobs = 1;
  std::vector<Profile> profiles = {Profile::random, Profile::edge, Profile::max};  ///< case k: profiles[k % size]
  int shrink_budget = 400;                            ///< most program runs spent shrinking a counterexample
  std::function<void(int done, int total)> progress;  ///< called after each case (from any thread)
};

/// How a case failed.
enum class FailureKind { none, wrong_answer, presentation_error, runtime_error, time_limit, output_limit };

/// "wrong answer", "presentation error", "runtime error", ...
[[nodiscard]] std::string_view failure_name(FailureKind kind);

/// One case: the program's run and the certified verdict.
struct CaseOutcome {
  FailureKind failure = FailureKind::none;
  std::string reason;  ///< one line
  ProcessResult run;
};

/// Runs the program on one instance and judges its output against the certified answer.
[[nodiscard]] CaseOutcome run_case(const StressOptions& options, const Instance& instance);

/// The first failing case, shrunk.
struct StressFailure {
  int case_index = 0;
  std::uint64_t seed = 0;  ///< `--seed <seed> --cases 1` replays it
  Profile profile = Profile::random;
  Instance original;
  Instance minimal;
  CaseOutcome outcome;  ///< on the minimal instance
  int shrink_runs = 0;
};

/// What a stress run found.
struct StressReport {
  int cases_run = 0;
  std::vector<int> cases_per_profile;  ///< parallel to StressOptions::profiles
  double seconds = 0;
  std::optional<StressFailure> failure;
};

/// Runs options.cases cases on options.jobs threads; stops at the first failure and shrinks it.
[[nodiscard]] StressReport stress(const StressOptions& options);

}  // namespace attn::verify
