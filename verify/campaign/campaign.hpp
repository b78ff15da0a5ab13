// The verification campaign `attncheck verify` runs against the built-in kernel: samples,
// property suites, oracle agreement, fuzz corpus replay and stress of the in-tree solver.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace attn::verify {

/// Where things are and how much to do.
struct CampaignOptions {
  bool quick = false;
  std::string samples_dir;     ///< corpus/samples: <problem>/X.in with X.ans
  std::string corpus_dir;      ///< corpus: <fuzz target>/ seed files
  std::string replay_dir;      ///< folder of fuzz replay binaries (build/<preset>/fuzz), may be missing
  std::string fuzzer_dir;      ///< folder of libFuzzer binaries (build/fuzz/fuzz), may be missing
  std::string solver_command;  ///< the in-tree solver, e.g. "build/release/attncheck solve"
  std::function<void(const std::string&)> log;                 ///< one line of progress
  std::function<void(const std::string&, int, int)> progress;  ///< stage, done, total (may be empty)
};

/// One run inside a stage that a CI report lists on its own (a property run).
struct StageRun {
  std::string name;  ///< e.g. "weights sum to 1/ai006"
  bool passed = true;
  double seconds = 0;
  std::string message;  ///< the failure report (empty when passed)
};

/// One stage's outcome.
struct StageResult {
  std::string name;
  bool passed = true;
  double seconds = 0;
  std::string summary;  ///< one line
  nlohmann::json details;
  std::vector<StageRun> runs;  ///< the stage's individual runs, when it has any
};

/// Everything the campaign found.
struct CampaignReport {
  std::vector<StageResult> stages;
  std::vector<double> error_ratios;  ///< |kernel - exact| / δ for every certified output value
  [[nodiscard]] bool passed() const;
  [[nodiscard]] nlohmann::json to_json() const;
};

/// Runs every stage (none stops the others).
[[nodiscard]] CampaignReport run_campaign(const CampaignOptions& options);

}  // namespace attn::verify
