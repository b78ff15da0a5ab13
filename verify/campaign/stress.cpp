#include "campaign/stress.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "campaign/shrink.hpp"
#include "instance_io.hpp"
#include "numeric/mpfr.hpp"

namespace attn::verify {

std::string_view failure_name(FailureKind kind) {
  switch (kind) {
    case FailureKind::none:
      return "passed";
    case FailureKind::wrong_answer:
      return "wrong answer";
    case FailureKind::presentation_error:
      return "presentation error";
    case FailureKind::runtime_error:
      return "runtime error";
    case FailureKind::time_limit:
      return "time limit exceeded";
    case FailureKind::output_limit:
      return "output limit exceeded";
  }
  return "?";
}

CaseOutcome run_case(const StressOptions& options, const Instance& instance) {
  CaseOutcome outcome;
  outcome.run = run_process(options.command, write_instance(instance), options.timeout_seconds);
  const ProcessResult& run = outcome.run;
  if (run.end == ProcessEnd::timed_out) {
    outcome.failure = FailureKind::time_limit;
  } else if (run.end == ProcessEnd::output_limit) {
    outcome.failure = FailureKind::output_limit;
  } else if (run.end != ProcessEnd::exited || run.status != 0) {
    outcome.failure = FailureKind::runtime_error;
  }
  if (outcome.failure != FailureKind::none) {
    outcome.reason = describe(run, options.timeout_seconds);
    return outcome;
  }
  const Verdict verdict = check_output(certify(instance), run.output);
  if (verdict.kind == VerdictKind::wrong_answer) outcome.failure = FailureKind::wrong_answer;
  if (verdict.kind == VerdictKind::presentation_error) outcome.failure = FailureKind::presentation_error;
  outcome.reason = verdict.message;
  return outcome;
}

namespace {

GenOptions case_options(const StressOptions& options, Profile profile) {
  GenOptions gen = gen_options(options.problem, profile);
  gen.limits = options.limits;
  return gen;
}

// Greedy shrinking: take the first smaller instance that still fails the same way, until none
// does or the budget is spent.
void shrink(const StressOptions& options, StressFailure& failure) {
  Instance current = failure.original;
  bool progressed = true;
  while (progressed && failure.shrink_runs < options.shrink_budget) {
    progressed = false;
    for_each_shrink(current, [&](const Instance& candidate) {
      if (failure.shrink_runs >= options.shrink_budget) return true;
      ++failure.shrink_runs;
      CaseOutcome outcome = run_case(options, candidate);
      if (outcome.failure != failure.outcome.failure) return false;
      current = candidate;
      failure.outcome = std::move(outcome);
      progressed = true;
      return true;
    });
  }
  failure.minimal = std::move(current);
}

}  // namespace

StressReport stress(const StressOptions& options) {
  StressReport report;
  report.cases_per_profile.assign(options.profiles.size(), 0);
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  auto worker = [&] {
    while (!failed.load()) {
      const int k = next.fetch_add(1);
      if (k >= options.cases) return;
      const std::size_t p = static_cast<std::size_t>(k) % options.profiles.size();
      const std::uint64_t seed = options.seed + static_cast<std::uint64_t>(k);
      Instance instance = sample_instance(case_options(options, options.profiles[p]), seed);
      CaseOutcome outcome = run_case(options, instance);
      std::lock_guard lock(mutex);
      ++report.cases_run;
      ++report.cases_per_profile[p];
      // Keep the lowest failing case index, so the report does not depend on thread timing.
      if (outcome.failure != FailureKind::none && (!report.failure || k < report.failure->case_index)) {
        report.failure = StressFailure{k, seed, options.profiles[p], instance, instance, std::move(outcome), 0};
        failed = true;
      }
      if (options.progress) options.progress(++done, options.cases);
    }
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < std::max(options.jobs, 1); ++j) {
    threads.emplace_back([&worker] {
      const MpfrThreadCaches caches;  // freed when this worker ends
      worker();
    });
  }
  worker();
  for (std::thread& t : threads) t.join();
  if (report.failure) shrink(options, *report.failure);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace attn::verify
