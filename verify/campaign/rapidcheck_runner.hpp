// Running a property through RapidCheck's runner and reading the result back. RapidCheck's public
// API (rc::check, RC_GTEST_PROP) only prints a run's outcome or fails a test with it; choosing the
// seed and case count per run and getting the counterexample as text takes its rc::detail
// internals, so every use of them stays behind this one function.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace attn::verify {

/// How a property run ended.
enum class RunVerdict {
  passed,   ///< every case held (or RC_PARAMS holds reproduce strings of other ids only)
  failed,   ///< a case failed: RC_ASSERT, RC_FAIL or an exception
  gave_up,  ///< too many cases discarded by RC_PRE before enough held
  error,    ///< a reproduce string that no longer reproduces a failure
};

/// What run_property found.
struct RunOutcome {
  RunVerdict verdict = RunVerdict::passed;  ///< how the run ended
  int cases = 0;                            ///< cases that held, plus the failing one
  std::string message;                      ///< RapidCheck's report: counterexample and failure (empty on a plain pass)
};

/// How to run a property. Unset fields take RapidCheck's configuration: RC_PARAMS, else its defaults.
struct RunSettings {
  /// "Suite/Name", the key of RC_PARAMS="reproduce=...": a failure under an id is listed with its
  /// reproduce string when the process exits. Empty: the run cannot be reproduced by id.
  std::string id;
  std::optional<std::uint64_t> seed;  ///< the random seed of the run
  std::optional<int> cases;           ///< cases that must hold for a pass
  std::optional<bool> shrink;         ///< shrink a counterexample before reporting it
};

/// The seed of runs that set none: RC_PARAMS' seed or the random one RapidCheck drew for this
/// process. The first use of RapidCheck prints it on stderr ("Using configuration: seed=N").
[[nodiscard]] std::uint64_t configured_seed();

/// Runs `body` as a RapidCheck property: its generators draw (*gen), RC_ASSERT and RC_FAIL fail
/// the case, RC_PRE discards it. When RC_PARAMS holds reproduce strings it runs only the
/// reproduction stored under settings.id and passes with no cases when there is none.
[[nodiscard]] RunOutcome run_property(const std::function<void()>& body, const RunSettings& settings = {});

}  // namespace attn::verify
