// attncheck verify: the main job. Solves every bundled sample with the production kernel and
// checks the answer byte for byte against the sample's .ans file.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "common.hpp"
#include "instance_io.hpp"
#include "solve.hpp"

namespace attn::cli {
namespace {

namespace fs = std::filesystem;

struct SampleTally {
  int passed = 0;
  int failed = 0;
};

// One sample: strict-valid input, and the kernel's formatted answer equal to X.ans.
bool check_sample(Problem problem, const fs::path& input_path, SampleTally& tally) {
  const fs::path answer_path = fs::path(input_path).replace_extension(".ans");
  auto fail = [&](const std::string& why) {
    std::printf("  FAIL %s: %s\n", input_path.filename().c_str(), why.c_str());
    ++tally.failed;
    return false;
  };
  const auto input = read_input(input_path.string());
  const auto answer = read_input(answer_path.string());
  if (!input || !answer) return fail("cannot read the .in/.ans pair");
  const auto instance = read_instance(*input, problem, default_limits(problem), Strictness::strict);
  if (!instance) return fail("invalid input: " + instance.error().to_string());
  const std::string output = format_solution(instance.value(), solve(instance.value()));
  if (output != *answer) return fail("output differs from " + answer_path.filename().string());
  std::printf("  ok   %s\n", input_path.filename().c_str());
  ++tally.passed;
  return true;
}

}  // namespace

void register_verify(CLI::App& app, Commands& commands) {
  auto samples = std::make_shared<std::string>(std::string(ATTNCHECK_SOURCE_DIR) + "/corpus/samples");
  auto quick = std::make_shared<bool>(false);
  auto* command = app.add_subcommand("verify", "Run the verification campaign against the built-in kernel");
  command->add_option("--samples", *samples, "folder of <problem>/X.in + X.ans samples")->capture_default_str();
  command->add_flag("--quick", *quick, "the short campaign");
  command->footer("Exit 0 when every stage passes, 1 otherwise.\n");
  commands.push_back({command, [samples]() -> int {
                        SampleTally tally;
                        for (Problem problem : {Problem::ai006, Problem::ai031, Problem::general}) {
                          const fs::path folder = fs::path(*samples) / std::string(problem_name(problem));
                          if (!fs::is_directory(folder)) continue;
                          std::vector<fs::path> inputs;
                          for (const auto& entry : fs::directory_iterator(folder)) {
                            if (entry.path().extension() == ".in") inputs.push_back(entry.path());
                          }
                          std::sort(inputs.begin(), inputs.end());
                          std::printf("samples/%s: %zu inputs\n", std::string(problem_name(problem)).c_str(),
                                      inputs.size());
                          for (const fs::path& input : inputs) check_sample(problem, input, tally);
                        }
                        if (tally.passed + tally.failed == 0) {
                          std::fprintf(stderr, "attncheck verify: no samples found under %s\n", samples->c_str());
                          return 1;
                        }
                        std::printf("verify: %d passed, %d failed\n", tally.passed, tally.failed);
                        return tally.failed == 0 ? 0 : 1;
                      }});
}

}  // namespace attn::cli
