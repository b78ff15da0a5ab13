// attncheck verify: the main job. The whole campaign against the built-in kernel, a text summary,
// reports/verify.json and a histogram of |kernel - exact| / δ (reports/verify-error.svg).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "campaign/campaign.hpp"
#include "campaign/report_junit.hpp"
#include "campaign/report_svg.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

namespace fs = std::filesystem;

struct VerifyFlags {
  bool quick = false;
  std::string source = ATTNCHECK_SOURCE_DIR;
  std::string reports = "reports";
  std::string junit;  ///< also write JUnit XML here (empty: no)
};

// The folder this binary lives in: the build directory, next to the fuzz replay binaries.
fs::path binary_dir() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::current_path() : self.parent_path();
}

int run_verify(const VerifyFlags& flags) {
  const fs::path build = binary_dir();
  verify::CampaignOptions options;
  options.quick = flags.quick;
  options.samples_dir = (fs::path(flags.source) / "corpus" / "samples").string();
  options.corpus_dir = (fs::path(flags.source) / "corpus").string();
  options.replay_dir = (build / "fuzz").string();
  options.fuzzer_dir = (build.parent_path() / "fuzz" / "fuzz").string();  // the fuzz preset
  options.solver_command = (build / "attncheck").string() + " solve";
  options.log = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  if (::isatty(2)) {
    auto last = std::make_shared<std::chrono::steady_clock::time_point>();
    options.progress = [last](const std::string& stage, int done, int total) {
      const auto now = std::chrono::steady_clock::now();
      if (done != total && now - *last < std::chrono::milliseconds(200)) return;
      *last = now;
      std::fprintf(stderr, "\r  %s: %d/%d%s", stage.c_str(), done, total, done == total ? "\n" : "");
    };
  }
  std::printf("attncheck verify%s: samples, properties, oracle agreement, fuzz corpora, stress\n",
              flags.quick ? " --quick" : "");
  const auto start = std::chrono::steady_clock::now();
  const verify::CampaignReport report = verify::run_campaign(options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const fs::path json_path = fs::path(flags.reports) / "verify.json";
  const fs::path svg_path = fs::path(flags.reports) / "verify-error.svg";
  nlohmann::json json = report.to_json();
  json["seconds"] = seconds;
  json["quick"] = flags.quick;
  // A report that cannot be written fails the run: CI would otherwise publish a stale one.
  std::optional<Error> write_error;
  if (auto made = make_directories(flags.reports); !made) write_error = made.error();
  std::vector<std::pair<fs::path, std::string>> files = {{json_path, json.dump(2) + "\n"},
                                                         {svg_path, verify::error_histogram_svg(report.error_ratios)}};
  if (!flags.junit.empty()) files.emplace_back(flags.junit, verify::junit_xml(report, seconds));
  for (const auto& [path, text] : files) {
    if (write_error) break;
    if (auto written = write_file(path.string(), text); !written) write_error = written.error();
  }

  std::printf("\nsummary (%.0f s):\n", seconds);
  for (const auto& stage : report.stages) {
    std::printf("  %-18s %s  %s\n", stage.name.c_str(), stage.passed ? "PASS" : "FAIL", stage.summary.c_str());
  }
  if (write_error) {
    std::printf("verify: FAILED (the reports could not be written)\n");
    return fail(*write_error, 1);
  }
  std::printf("reports: %s, %s%s%s\nverify: %s\n", json_path.c_str(), svg_path.c_str(), flags.junit.empty() ? "" : ", ",
              flags.junit.c_str(), report.passed() ? "PASSED" : "FAILED");
  return report.passed() ? 0 : 1;
}

}  // namespace

void register_verify(CLI::App& app, Commands& commands) {
  auto flags = std::make_shared<VerifyFlags>();
  auto* command = app.add_subcommand("verify", "Run the verification campaign against the built-in kernel");
  command->add_flag("--quick", flags->quick, "the short campaign (about a minute)");
  command->add_option("--source", flags->source, "source tree holding corpus/")->capture_default_str();
  command->add_option("--reports", flags->reports, "folder for verify.json and verify-error.svg")
      ->capture_default_str();
  command->add_option("--junit", flags->junit,
                      "also write a JUnit XML report here (a testcase per stage and per property run)");
  command->footer(
      "Stages: bundled samples certified; the property suite at campaign size; kernel versus oracle\n"
      "on generated cases (max and mean |error|/band); fuzz corpora replayed (plus 20 s of fuzzing per\n"
      "target when the clang fuzz build exists); the in-tree solver stressed as an external program.\n"
      "Exit 0 when every stage passes, 1 otherwise.\n");
  commands.push_back({command, [flags] { return run_verify(*flags); }});
}

}  // namespace attn::cli
