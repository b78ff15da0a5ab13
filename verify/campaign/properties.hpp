// The property suite: what every correct attention implementation satisfies, checked against the
// certified oracle, and a library entry point to run it on any Implementation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "campaign/generators.hpp"
#include "campaign/implementation.hpp"

namespace attn::verify {

/// A property: a named check of one implementation on one generated instance. It reports a
/// violation with RC_FAIL / RC_ASSERT, so it runs inside RapidCheck (rc::check, RC_GTEST_PROP).
struct Property {
  const char* name;  ///< what it states, in CamelCase ("WeightsSumToOne"); a GoogleTest suite name
  void (*check)(const Implementation& implementation, const Instance& instance);  ///< RC_FAIL on a violation
};

/// Every property, cheapest first: those that need no oracle, then those checked against its band.
/// The property tests register one GoogleTest per property and problem from this list.
[[nodiscard]] const std::vector<Property>& properties();

/// The property called `name`; throws attn::ContractError when there is none.
[[nodiscard]] const Property& property(const std::string& name);

/// Generator options the suites use for a problem: the edge profile, small typical sizes (the
/// oracle certifies every case) and, for `general`, judge_sized_limits(12).
[[nodiscard]] GenOptions property_gen_options(Problem problem);

/// How check_implementation runs.
struct CheckOptions {
  std::vector<Problem> problems = {Problem::ai006, Problem::ai031, Problem::general};  ///< every property runs on each
  int cases = 100;                     ///< successful cases per property and problem
  std::uint64_t seed = 0;              ///< 0: RC_PARAMS' seed (or RapidCheck's random one)
  bool stop_at_first_failure = false;  ///< skip the remaining properties once one fails
  bool shrink = true;                  ///< shrink counterexamples (slower, smaller)
};

/// One property on one problem.
struct PropertyOutcome {
  std::string property;                ///< Property::name
  Problem problem = Problem::general;  ///< the problem its instances were generated for
  bool passed = false;                 ///< no case failed (a run that gave up on RC_PRE passes)
  int cases = 0;                       ///< cases run, including the failing one
  std::string failure;                 ///< RapidCheck's report: the counterexample and what failed
  double seconds = 0;                  ///< wall time of the run
};

/// Everything check_implementation found.
struct CheckReport {
  std::uint64_t seed = 0;                 ///< every run's seed: CheckOptions::seed = seed replays them
  std::vector<PropertyOutcome> outcomes;  ///< in properties() order, problems within each
  /// No outcome failed.
  [[nodiscard]] bool passed() const;
  /// The first failing outcome, or nullptr.
  [[nodiscard]] const PropertyOutcome* first_failure() const;
};

/// Runs every property on every problem against `implementation`. To replay a failure, run again
/// with the printed seed (CheckOptions::seed or RC_PARAMS="seed=N").
[[nodiscard]] CheckReport check_implementation(const Implementation& implementation, const CheckOptions& options = {});

}  // namespace attn::verify
