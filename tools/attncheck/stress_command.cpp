// attncheck gen / stress: reproducible test data, and QuickCheck for judge solution programs.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "campaign/generators.hpp"
#include "campaign/stress.hpp"
#include "common.hpp"
#include "instance_io.hpp"
#include "judge/checker.hpp"

namespace attn::cli {
namespace {

namespace fs = std::filesystem;
using verify::Profile;

std::vector<Profile> parse_profiles(const std::vector<std::string>& names) {
  std::vector<Profile> profiles;
  for (const std::string& name : names) profiles.push_back(*verify::profile_from_name(name));
  return profiles;
}

struct GenFlags {
  ProblemOptions problem;
  std::uint64_t seed = 1;
  std::string profile = "random";
  int count = 1;
  std::string out;
};

int run_gen(const GenFlags& flags) {
  const auto setup = resolve_problem(flags.problem);
  if (!setup) return fail(setup.error(), 1);
  verify::GenOptions options = verify::gen_options(setup->problem, *verify::profile_from_name(flags.profile));
  options.limits = setup->limits;
  if (flags.out.empty()) {
    if (flags.count != 1) return fail(Error{"gen: --count " + std::to_string(flags.count) + " needs --out DIR"}, 1);
    const auto written = write_stdout(write_instance(verify::sample_instance(options, flags.seed)));
    return written ? 0 : fail(written.error(), 1);
  }
  if (const auto made = make_directories(flags.out); !made) return fail(made.error(), 1);
  int ambiguous_files = 0;
  for (int k = 0; k < flags.count; ++k) {
    const std::uint64_t seed = flags.seed + static_cast<std::uint64_t>(k);
    const Instance instance = verify::sample_instance(options, seed);
    const verify::Certificate certificate = verify::certify(instance, {}, verify::Weights::skip);
    const std::string stem = flags.profile + "-" + std::to_string(seed);
    for (const auto& [extension, text] :
         {std::pair{".in", write_instance(instance)}, std::pair{".ans", verify::canonical_text(certificate)}}) {
      const auto written = write_file((fs::path(flags.out) / (stem + extension)).string(), text);
      if (!written) return fail(written.error(), 1);
    }
    int ambiguous = 0;
    for (const auto& cell : certificate.cells) ambiguous += cell.ambiguous ? 1 : 0;
    if (ambiguous > 0) {
      ++ambiguous_files;
      std::fprintf(stderr, "%s.ans: %d ambiguous cell(s); `attncheck check` accepts either neighbour there\n",
                   stem.c_str(), ambiguous);
    }
  }
  std::printf("gen: wrote %d .in/.ans pairs to %s (%d with ambiguous cells)\n", flags.count, flags.out.c_str(),
              ambiguous_files);
  return 0;
}

struct StressFlags {
  ProblemOptions problem;
  std::string solution;
  int cases = 100;
  std::uint64_t seed = 1;
  double timeout = 2.0;
  int jobs = 1;
  std::vector<std::string> profiles = {"random", "edge", "max"};
};

void print_failure(const StressFlags& flags, const verify::StressFailure& failure) {
  const auto& outcome = failure.outcome;
  std::printf("FAILED: case %d (seed %llu, profile %s): %s: %s\n", failure.case_index,
              static_cast<unsigned long long>(failure.seed), std::string(verify::profile_name(failure.profile)).c_str(),
              std::string(verify::failure_name(outcome.failure)).c_str(), outcome.reason.c_str());
  std::printf("\nminimal failing input (%d shrink runs):\n%s", failure.shrink_runs,
              write_instance(failure.minimal).c_str());
  std::printf("\ncanonical answer:\n%s",
              verify::canonical_text(verify::certify(failure.minimal, {}, verify::Weights::skip)).c_str());
  std::printf("\nprogram output (%zu bytes):\n%s%s", outcome.run.output.size(),
              outcome.run.output.substr(0, 4000).c_str(),
              outcome.run.output.empty() || outcome.run.output.back() != '\n' ? "\n" : "");
  if (!outcome.run.error_tail.empty()) std::printf("\nprogram stderr (tail):\n%s\n", outcome.run.error_tail.c_str());
  std::printf("\nreplay: attncheck stress --problem %s --solution '%s' --seed %llu --cases 1 --profile %s\n",
              flags.problem.problem.c_str(), flags.solution.c_str(), static_cast<unsigned long long>(failure.seed),
              std::string(verify::profile_name(failure.profile)).c_str());
}

int run_stress(const StressFlags& flags) {
  const auto setup = resolve_problem(flags.problem);
  if (!setup) return fail(setup.error(), 1);
  verify::StressOptions options;
  options.problem = setup->problem;
  options.limits = setup->limits;
  options.command = flags.solution;
  options.cases = flags.cases;
  options.seed = flags.seed;
  options.timeout_seconds = flags.timeout;
  options.jobs = flags.jobs;
  options.profiles = parse_profiles(flags.profiles);
  const bool terminal = ::isatty(2) != 0;
  auto last = std::chrono::steady_clock::now();
  if (terminal) {
    options.progress = [&last](int done, int total) {
      const auto now = std::chrono::steady_clock::now();
      if (done != total && now - last < std::chrono::milliseconds(200)) return;
      last = now;
      std::fprintf(stderr, "\rstress: %d/%d cases", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  const verify::StressReport report = verify::stress(options);
  if (terminal) std::fprintf(stderr, "\n");
  if (report.failure) {
    print_failure(flags, *report.failure);
    return 1;
  }
  std::printf("stress: %d cases passed (", report.cases_run);
  for (std::size_t p = 0; p < options.profiles.size(); ++p) {
    std::printf("%s%s %d", p ? ", " : "", std::string(verify::profile_name(options.profiles[p])).c_str(),
                report.cases_per_profile[p]);
  }
  // A slow program runs under one case per second, where "%.0f" would print "0 cases/s".
  const double rate = report.cases_run / std::max(report.seconds, 1e-9);
  std::printf(rate >= 10 ? ") in %.2f s, %.0f cases/s\n" : ") in %.2f s, %.3g cases/s\n", report.seconds, rate);
  return 0;
}

}  // namespace

void register_gen(CLI::App& app, Commands& commands) {
  auto flags = std::make_shared<GenFlags>();
  auto* command = app.add_subcommand("gen", "Generate reproducible, strict-valid test inputs (and certified answers)");
  add_problem_options(*command, flags->problem);
  command->add_option("--seed,-s", flags->seed, "seed; instance k of --count uses seed + k")->capture_default_str();
  command->add_option("--profile", flags->profile, "random | edge | max")
      ->check(CLI::IsMember({"random", "edge", "max"}))
      ->capture_default_str();
  command->add_option("--count,-n", flags->count, "number of instances (needs --out when > 1)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  command->add_option("--out,-o", flags->out, "write PROFILE-SEED.in and the certified PROFILE-SEED.ans here");
  command->footer("Same arguments, same bytes. Without --out the instance goes to stdout.\n");
  commands.push_back({command, [flags] { return run_gen(*flags); }});
}

void register_stress(CLI::App& app, Commands& commands) {
  auto flags = std::make_shared<StressFlags>();
  auto* command =
      app.add_subcommand("stress", "Run a solution program on generated inputs and judge it with the oracle");
  add_problem_options(*command, flags->problem);
  command->add_option("--solution", flags->solution, "command run through /bin/sh -c, input on stdin")->required();
  command->add_option("--cases,-n", flags->cases, "number of cases")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  command->add_option("--seed,-s", flags->seed, "case k uses seed + k")->capture_default_str();
  command->add_option("--timeout", flags->timeout, "seconds per run")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  command->add_option("--jobs,-j", flags->jobs, "cases run in parallel")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  command->add_option("--profile", flags->profiles, "profiles to cycle through (random, edge, max)")
      ->check(CLI::IsMember({"random", "edge", "max"}))
      ->capture_default_str();
  command->footer(
      "Verdicts come from the certified checker: ambiguous cells accept either neighbour.\n"
      "A crash, non-zero exit, timeout, empty or malformed output is a failure. The first failure\n"
      "is shrunk and printed with the canonical answer and a replay command; exit 1.\n");
  commands.push_back({command, [flags] { return run_stress(*flags); }});
}

}  // namespace attn::cli
