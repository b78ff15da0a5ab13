#include "campaign/campaign.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "campaign/generators.hpp"
#include "campaign/process.hpp"
#include "campaign/properties.hpp"
#include "campaign/stress.hpp"
#include "instance_io.hpp"
#include "judge/checker.hpp"
#include "solve.hpp"

namespace attn::verify {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const Problem kProblems[] = {Problem::ai006, Problem::ai031, Problem::general};
const Profile kProfiles[] = {Profile::random, Profile::edge, Profile::max};

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream buffer;
  buffer << file.rdbuf();
  return buffer.str();
}

// Campaign limits: the judge problems' own, and `general` at sizes the oracle certifies quickly:
// n, m <= 32 (AI031 allows 40), where a max-profile case generates and certifies in about 20 ms
// (attncheck gen | attncheck oracle, 20 seeds), so the agreement stage's 500 per profile stay cheap.
Limits campaign_limits(Problem problem) {
  return problem == Problem::general ? judge_sized_limits(32) : default_limits(problem);
}

template <typename Stage> StageResult timed(const std::string& name, const CampaignOptions& options, Stage&& stage) {
  if (options.log) options.log("stage " + name + " ...");
  const auto start = std::chrono::steady_clock::now();
  StageResult result{name, true, 0, "", json::object(), {}};
  stage(result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.log) {
    std::ostringstream line;
    line << "stage " << name << ": " << (result.passed ? "PASS" : "FAIL") << " (" << std::fixed << std::setprecision(1)
         << result.seconds << " s) " << result.summary;
    options.log(line.str());
  }
  return result;
}

// Each sample: strict-valid input, a certified .ans, and the kernel's answer accepted.
void samples_stage(const CampaignOptions& options, StageResult& result) {
  int files = 0, failures = 0;
  for (Problem problem : kProblems) {
    const fs::path folder = fs::path(options.samples_dir) / std::string(problem_name(problem));
    if (!fs::is_directory(folder)) continue;
    std::vector<fs::path> inputs;
    for (const auto& entry : fs::directory_iterator(folder)) {
      if (entry.path().extension() == ".in") inputs.push_back(entry.path());
    }
    std::sort(inputs.begin(), inputs.end());
    for (const fs::path& input : inputs) {
      ++files;
      std::string problem_text;
      const auto instance = read_instance(read_text(input), problem, default_limits(problem), Strictness::strict);
      if (!instance) {
        problem_text = "invalid input: " + instance.error().to_string();
      } else {
        const Certificate certificate = certify(instance.value());
        const Verdict answer = check_output(certificate, read_text(fs::path(input).replace_extension(".ans")));
        const Verdict kernel = check_output(certificate, format_solution(instance.value(), solve(instance.value())));
        if (answer.kind > VerdictKind::acceptable) problem_text = ".ans: " + answer.message;
        if (kernel.kind > VerdictKind::acceptable) problem_text = "kernel: " + kernel.message;
      }
      result.details[input.filename().string()] = problem_text.empty() ? "certified" : problem_text;
      if (!problem_text.empty()) ++failures;
    }
  }
  result.passed = failures == 0 && files > 0;
  result.summary = std::to_string(files) + " samples, " + std::to_string(failures) + " failed";
}

// The property suite at campaign size against the production kernel.
void properties_stage(const CampaignOptions& options, StageResult& result) {
  CheckOptions check;
  check.cases = options.quick ? 100 : 5000;  // 50x RapidCheck's default per property and problem
  const CheckReport report = check_implementation(ProductionKernel{}, check);
  int failed = 0;
  for (const PropertyOutcome& outcome : report.outcomes) {
    const std::string key = outcome.property + "/" + std::string(problem_name(outcome.problem));
    result.details[key] = outcome.passed ? json(outcome.cases) : json(outcome.failure);
    result.runs.push_back({key, outcome.passed, outcome.seconds, outcome.failure});
    if (!outcome.passed) {
      ++failed;
      if (options.log) options.log("  " + key + " FAILED:\n" + outcome.failure);
    }
  }
  result.details["seed"] = std::to_string(report.seed);
  result.passed = failed == 0;
  result.summary = std::to_string(report.outcomes.size()) + " property runs of " + std::to_string(check.cases) +
                   " cases, " + std::to_string(failed) + " failed (seed " + std::to_string(report.seed) + ")";
}

// Kernel versus oracle on generated cases: |error| / δ per value, and the printed verdict.
void agreement_stage(const CampaignOptions& options, StageResult& result, std::vector<double>& ratios) {
  const int per_profile = options.quick ? 15 : 500;
  const int total = per_profile * 9;
  int done = 0, rejected = 0, ambiguous = 0;
  double worst = 0, sum = 0;
  std::size_t values = 0;
  for (Problem problem : kProblems) {
    for (Profile profile : kProfiles) {
      GenOptions gen = gen_options(problem, profile);
      gen.limits = campaign_limits(problem);
      for (int k = 0; k < per_profile; ++k) {
        const Instance instance = sample_instance(gen, 1000 + static_cast<std::uint64_t>(k));
        const Solution solution = solve(instance);
        const Certificate certificate = certify(instance);
        double instance_worst = 0;
        for (std::size_t c = 0; c < solution.values.size(); ++c) {
          const CellCertificate& cell = certificate.cells[c];
          const double x = solution.values[c];
          const double distance = std::max({0.0, x - cell.value.hi, cell.value.lo - x});
          const double ratio = cell.band > 0 ? distance / cell.band : (distance > 0 ? INFINITY : 0.0);
          ratios.push_back(ratio);
          instance_worst = std::max(instance_worst, ratio);
          sum += ratio;
          ++values;
          ambiguous += cell.ambiguous ? 1 : 0;
        }
        const Verdict verdict = check_output(certificate, format_solution(instance, solution));
        if (verdict.kind > VerdictKind::acceptable || instance_worst > 1) ++rejected;
        worst = std::max(worst, instance_worst);
        if (options.progress) options.progress("oracle agreement", ++done, total);
      }
    }
  }
  result.passed = rejected == 0;
  result.details = {{"cases", total},
                    {"values", values},
                    {"max_ratio", worst},
                    {"mean_ratio", values ? sum / static_cast<double>(values) : 0.0},
                    {"ambiguous_values", ambiguous},
                    {"failures", rejected}};
  std::ostringstream line;
  line << total << " cases, " << values << " values, max |error|/δ " << std::setprecision(3) << worst << ", mean "
       << (values ? sum / static_cast<double>(values) : 0.0) << ", " << ambiguous << " ambiguous, " << rejected
       << " failed";
  result.summary = line.str();
}

// Replays every fuzz corpus with the replay binaries; a short libFuzzer run where they are built.
void fuzz_stage(const CampaignOptions& options, StageResult& result) {
  int replayed = 0, failed = 0;
  if (!fs::is_directory(options.corpus_dir)) {
    result.passed = false;
    result.summary = "no corpus at " + options.corpus_dir;
    return;
  }
  for (const auto& entry : fs::directory_iterator(options.corpus_dir)) {
    const std::string target = entry.path().filename().string();
    if (!entry.is_directory() || target == "samples") continue;
    const fs::path replay = fs::path(options.replay_dir) / target;
    if (fs::exists(replay)) {
      const ProcessResult run = run_process(replay.string() + " " + entry.path().string(), "", 600);
      const bool ok = run.end == ProcessEnd::exited && run.status == 0;
      result.details[target]["replay"] = ok ? "ok" : describe(run, 600) + ": " + run.error_tail;
      ++replayed;
      failed += ok ? 0 : 1;
    }
    const fs::path fuzzer = fs::path(options.fuzzer_dir) / target;
    if (!options.quick && fs::exists(fuzzer)) {
      // A short run on a scratch copy of the corpus: findings fail the stage, the corpus is untouched.
      const std::string scratch = (fs::temp_directory_path() / ("attncheck-fuzz-" + target)).string();
      fs::remove_all(scratch);
      fs::copy(entry.path(), scratch);
      const ProcessResult run = run_process(
          fuzzer.string() + " -max_total_time=20 -artifact_prefix=" + scratch + "/crash- " + scratch, "", 120);
      const bool ok = run.end == ProcessEnd::exited && run.status == 0;
      result.details[target]["fuzz_20s"] = ok ? "ok" : describe(run, 120) + ": " + run.error_tail;
      failed += ok ? 0 : 1;
      if (ok) fs::remove_all(scratch);
    }
  }
  result.passed = failed == 0 && replayed > 0;
  result.summary = std::to_string(replayed) + " corpora replayed, " + std::to_string(failed) + " failed" +
                   (replayed == 0 ? " (no replay binaries in " + options.replay_dir + ")" : "");
}

// The in-tree solver as an external program, judged by the certified checker.
void stress_stage(const CampaignOptions& options, StageResult& result) {
  int failed = 0, cases = 0;
  for (Problem problem : kProblems) {
    StressOptions stress_options;
    stress_options.problem = problem;
    stress_options.limits = campaign_limits(problem);
    stress_options.command = options.solver_command + " --problem " + std::string(problem_name(problem));
    if (problem == Problem::general) {
      // The solver validates its input against the same cut limits the cases are generated under.
      const Limits& limits = stress_options.limits;
      stress_options.command += " --max-n " + std::to_string(limits.max_n) + " --max-m " +
                                std::to_string(limits.max_m) + " --max-d " + std::to_string(limits.max_d) +
                                " --max-batch " + std::to_string(limits.max_batch) + " --max-decimals " +
                                std::to_string(limits.max_decimals);
    }
    stress_options.cases = options.quick ? 60 : 1000;
    stress_options.seed = 77;
    stress_options.jobs = 2;
    const StressReport report = stress(stress_options);
    cases += report.cases_run;
    std::ostringstream line;
    line << report.cases_run << " cases in " << std::setprecision(3) << report.seconds << " s";
    if (report.failure) {
      ++failed;
      line << "; FAILED: " << failure_name(report.failure->outcome.failure) << ": " << report.failure->outcome.reason;
    }
    result.details[std::string(problem_name(problem))] = line.str();
  }
  result.passed = failed == 0;
  result.summary = std::to_string(cases) + " cases over 3 problems, " + std::to_string(failed) + " failed";
}

}  // namespace

bool CampaignReport::passed() const {
  return std::all_of(stages.begin(), stages.end(), [](const StageResult& s) { return s.passed; });
}

json CampaignReport::to_json() const {
  json out = {{"passed", passed()}, {"stages", json::array()}};
  for (const StageResult& s : stages) {
    out["stages"].push_back({{"name", s.name},
                             {"passed", s.passed},
                             {"seconds", s.seconds},
                             {"summary", s.summary},
                             {"details", s.details}});
  }
  return out;
}

CampaignReport run_campaign(const CampaignOptions& options) {
  CampaignReport report;
  report.stages.push_back(timed("samples", options, [&](StageResult& r) { samples_stage(options, r); }));
  report.stages.push_back(timed("properties", options, [&](StageResult& r) { properties_stage(options, r); }));
  report.stages.push_back(
      timed("oracle agreement", options, [&](StageResult& r) { agreement_stage(options, r, report.error_ratios); }));
  report.stages.push_back(timed("fuzz corpora", options, [&](StageResult& r) { fuzz_stage(options, r); }));
  report.stages.push_back(timed("stress", options, [&](StageResult& r) { stress_stage(options, r); }));
  return report;
}

}  // namespace attn::verify
