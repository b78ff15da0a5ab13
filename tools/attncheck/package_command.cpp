// attncheck package: a complete, self-contained judge package (Kattis/ICPC problem package or
// Polygon) with certified answers and the portable checker and validator (tools/portable/).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "campaign/generators.hpp"
#include "common.hpp"
#include "instance_io.hpp"
#include "judge/checker.hpp"
#include "portable_sources.hpp"

namespace attn::cli {
namespace {

namespace fs = std::filesystem;

// Written at the top of every package: marks the folder as one `package` may replace.
constexpr const char* kMarkerName = "attncheck-package.txt";

struct PackageFlags {
  ProblemOptions problem;
  std::string out;
  std::string format = "icpc";
  int tests = 30;
  std::uint64_t seed = 1;
  std::string add_tests;
};

// One test of the package, before it is written.
struct PackageTest {
  std::string name;  ///< file stem (icpc) or description (polygon)
  bool sample = false;
  std::string input;  ///< the .in text, strict-valid
  Instance instance;
};

// The portable source with its settings block replaced by `settings`.
std::string with_settings(std::string_view source, const std::string& settings) {
  constexpr std::string_view kBegin = "// ---- attncheck package settings: begin";
  constexpr std::string_view kEnd = "// ---- attncheck package settings: end";
  const std::size_t begin = source.find(kBegin);
  const std::size_t begin_line = begin == std::string_view::npos ? begin : source.find('\n', begin);
  const std::size_t end = source.find(kEnd);
  if (begin_line == std::string_view::npos || end == std::string_view::npos || end < begin_line) {
    throw ContractError("a portable source has lost its settings markers");
  }
  return std::string(source.substr(0, begin_line + 1)) + settings + std::string(source.substr(end));
}

std::string checker_source(Problem problem) {
  return with_settings(embedded::kCheckSource, "namespace settings {\nconstexpr const char* kProblem = \"" +
                                                   std::string(problem_name(problem)) +
                                                   "\";  // how the input's header reads\n}  // namespace settings\n");
}

std::string validator_source(const ProblemSetup& setup, bool kattis) {
  const Limits& limits = setup.limits;
  auto size = [](std::size_t value) { return std::to_string(value); };
  return with_settings(embedded::kValidateSource,
                       "namespace settings {\n"
                       "constexpr const char* kProblem = \"" +
                           std::string(problem_name(setup.problem)) +
                           "\";\n"
                           "constexpr std::size_t kMaxN = " +
                           size(limits.max_n) + ", kMaxM = " + size(limits.max_m) + ", kMaxD = " + size(limits.max_d) +
                           ", kMaxHeads = " + size(limits.max_heads) + ", kMaxBatch = " + size(limits.max_batch) +
                           ";\n"
                           "constexpr std::size_t kMaxDecimals = " +
                           size(static_cast<std::size_t>(limits.max_decimals)) +
                           ";\n"
                           "constexpr const char* kMaxAbsQK = \"" +
                           limits.max_abs_qk +
                           "\";\n"
                           "constexpr const char* kMaxAbsV = \"" +
                           limits.max_abs_v +
                           "\";\n"
                           "constexpr bool kKattis = " +
                           (kattis ? "true" : "false") + ";\n}  // namespace settings\n");
}

// Reads and strictly validates a user's test; the error names the file.
Result<PackageTest, Error> user_test(const fs::path& path, const ProblemSetup& setup) {
  auto text = read_input(path.string());
  if (!text) return text.error();
  auto instance = read_instance(*text, setup.problem, setup.limits, Strictness::strict);
  if (!instance) return Error{path.string() + ": not strict-valid: " + instance.error().to_string()};
  return PackageTest{path.stem().string(), false, std::move(text).value(), std::move(instance).value()};
}

// The samples, the generated tests and the user's tests, in package order.
Result<std::vector<PackageTest>, Error> collect_tests(const PackageFlags& flags, const ProblemSetup& setup) {
  std::vector<PackageTest> tests;
  // --tests 0 packages the user's tests alone; otherwise the lesson's samples come first.
  if (flags.tests > 0) {
    for (const embedded::Sample& sample : embedded::kSamples) {
      if (sample.problem != problem_name(setup.problem)) continue;
      auto instance = read_instance(sample.input, setup.problem, setup.limits, Strictness::strict);
      if (!instance) {
        std::fprintf(stderr, "package: sample %s left out: outside the limits (%s)\n", std::string(sample.name).c_str(),
                     instance.error().to_string().c_str());
        continue;
      }
      tests.push_back({std::string(sample.name), true, std::string(sample.input), std::move(instance).value()});
    }
  }
  constexpr verify::Profile kProfiles[] = {verify::Profile::random, verify::Profile::edge, verify::Profile::max};
  for (int k = 0; k < flags.tests; ++k) {
    const verify::Profile profile = kProfiles[k % 3];
    verify::GenOptions options = verify::gen_options(setup.problem, profile);
    options.limits = setup.limits;
    const std::uint64_t seed = flags.seed + static_cast<std::uint64_t>(k);
    const std::string input = write_instance(verify::sample_instance(options, seed));
    // Re-read strictly: what the package's validator sees is what is certified.
    auto instance = read_instance(input, setup.problem, setup.limits, Strictness::strict);
    if (!instance) throw ContractError("a generated test is not strict-valid: " + instance.error().to_string());
    char name[64];
    std::snprintf(name, sizeof name, "%03d-%s-%llu", k + 1, std::string(verify::profile_name(profile)).c_str(),
                  static_cast<unsigned long long>(seed));
    tests.push_back({name, false, input, std::move(instance).value()});
  }
  if (!flags.add_tests.empty()) {
    std::error_code error;
    std::vector<fs::path> inputs;
    for (const auto& entry : fs::directory_iterator(flags.add_tests, error)) {
      if (entry.path().extension() == ".in") inputs.push_back(entry.path());
    }
    if (error) return Error{"--add-tests: cannot list '" + flags.add_tests + "': " + error.message()};
    if (inputs.empty()) return Error{"--add-tests: no .in files in '" + flags.add_tests + "'"};
    std::sort(inputs.begin(), inputs.end());
    for (const fs::path& path : inputs) {
      auto test = user_test(path, setup);
      if (!test) return test.error();
      tests.push_back(std::move(test).value());
    }
  }
  if (tests.empty()) return Error{"nothing to package: --tests 0 needs --add-tests DIR"};
  return tests;
}

// An empty or new --out, or an earlier package there (its marker file), whose parts are removed.
Result<Ok, Error> prepare_out(const fs::path& out) {
  std::error_code error;
  if (!fs::exists(out, error)) return make_directories(out.string());
  if (!fs::is_directory(out, error)) return Error{"--out '" + out.string() + "' is not a directory"};
  if (fs::is_empty(out, error)) return Ok{};
  if (!fs::exists(out / kMarkerName, error)) {
    return Error{"--out '" + out.string() + "' is not empty and holds no earlier package (" + kMarkerName +
                 "); give a new or empty folder"};
  }
  for (const char* part : {"data", "input_validators", "output_validators", "tests", "problem.yaml", "check.cpp",
                           "validator.cpp", kMarkerName}) {
    fs::remove_all(out / part, error);
    if (error) return Error{"cannot remove '" + (out / part).string() + "': " + error.message()};
  }
  return Ok{};
}

// Writes each file (path relative to the package, text), creating folders as needed.
Result<Ok, Error> write_all(const fs::path& out, const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [relative, text] : files) {
    const fs::path path = out / relative;
    if (auto made = make_directories(path.parent_path().string()); !made) return made.error();
    if (auto written = write_file(path.string(), text); !written) return written.error();
  }
  return Ok{};
}

std::string marker_text(const PackageFlags& flags, Problem problem, bool icpc) {
  std::string text = "Written by `attncheck package --problem " + std::string(problem_name(problem)) + " --format " +
                     flags.format + " --tests " + std::to_string(flags.tests) + " --seed " +
                     std::to_string(flags.seed) + (flags.add_tests.empty() ? "" : " --add-tests " + flags.add_tests) +
                     "`.\n\n";
  text +=
      "Each answer file holds the canonical answer, then a certificate section (attncheck's README,\n"
      "\"Judge packages\") listing the accepted range of every ambiguous cell; the checker reads it.\n"
      "The checker and the validator are single C++17 files using only the standard library:\n";
  text += icpc ? "  g++ -std=c++17 -O2 output_validators/check.cpp -o check\n"
                 "  check INPUT ANSWER FEEDBACK_DIR < OUTPUT      exit 42 accepted, 43 rejected\n"
                 "  g++ -std=c++17 -O2 input_validators/validate.cpp -o validate\n"
                 "  validate < INPUT                              exit 42 valid, 43 invalid\n"
               : "  g++ -std=c++17 -O2 check.cpp -o check\n"
                 "  check INPUT OUTPUT ANSWER                     exit 0 OK, 1 WA, 2 PE, 3 FAIL (testlib)\n"
                 "  g++ -std=c++17 -O2 validator.cpp -o validator\n"
                 "  validator < INPUT                             exit 0 valid, 1 invalid\n";
  text += "`attncheck certify --problem " + std::string(problem_name(problem)) +
          " DIR` re-certifies every test of this package.\n"
          "If this folder is given to `attncheck package --out` again, it is replaced.\n";
  return text;
}

int run_package(const PackageFlags& flags) {
  const auto setup = resolve_problem(flags.problem);
  if (!setup) return fail(setup.error(), 1);
  const bool icpc = flags.format == "icpc";
  auto tests = collect_tests(flags, *setup);
  if (!tests) return fail(tests.error(), 1);
  const fs::path out(flags.out);
  if (auto prepared = prepare_out(out); !prepared) return fail(prepared.error(), 1);

  const std::string problem(problem_name(setup->problem));
  std::vector<std::pair<std::string, std::string>> files;
  files.emplace_back(kMarkerName, marker_text(flags, setup->problem, icpc));
  if (icpc) {
    files.emplace_back("problem.yaml", "# Written by attncheck package; see " + std::string(kMarkerName) +
                                           ".\nname: " + problem + "\nvalidation: custom\n");
    files.emplace_back("input_validators/validate.cpp", validator_source(*setup, true));
    files.emplace_back("output_validators/check.cpp", checker_source(setup->problem));
  } else {
    files.emplace_back("validator.cpp", validator_source(*setup, false));
    files.emplace_back("check.cpp", checker_source(setup->problem));
  }
  std::size_t samples = 0, ambiguous_tests = 0, index = 0;
  for (const PackageTest& test : *tests) {
    const verify::Certificate certificate = verify::certify(test.instance, {}, verify::Weights::skip);
    std::size_t ambiguous = 0;
    for (const auto& cell : certificate.cells) ambiguous += cell.ambiguous ? 1 : 0;
    ambiguous_tests += ambiguous > 0 ? 1 : 0;
    samples += test.sample ? 1 : 0;
    const std::string answer = verify::answer_text(certificate, problem);
    if (icpc) {
      const std::string stem = std::string(test.sample ? "data/sample/" : "data/secret/") + test.name;
      files.emplace_back(stem + ".in", test.input);
      files.emplace_back(stem + ".ans", answer);
    } else {
      char stem[32];
      std::snprintf(stem, sizeof stem, "tests/%02zu", ++index);
      files.emplace_back(stem, test.input);
      files.emplace_back(std::string(stem) + ".a", answer);
    }
  }
  if (auto written = write_all(out, files); !written) return fail(written.error(), 1);
  std::printf("package: %s package for %s in %s: %zu test%s (%zu samples), %zu with ambiguous cells\n",
              flags.format.c_str(), problem.c_str(), flags.out.c_str(), tests->size(), tests->size() == 1 ? "" : "s",
              samples, ambiguous_tests);
  return 0;
}

}  // namespace

void register_package(CLI::App& app, Commands& commands) {
  auto flags = std::make_shared<PackageFlags>();
  auto* command = app.add_subcommand(
      "package", "Write a self-contained judge package: tests, certified answers, checker, validator");
  add_problem_options(*command, flags->problem);
  command->add_option("--out,-o", flags->out, "the package folder (new, empty, or an earlier package)")->required();
  command->add_option("--format", flags->format, "icpc (Kattis/DOMjudge problem package) | polygon (testlib)")
      ->check(CLI::IsMember({"icpc", "polygon"}))
      ->capture_default_str();
  command->add_option("--tests,-n", flags->tests, "generated tests, cycling random, edge, max (0: --add-tests only)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  command->add_option("--seed,-s", flags->seed, "test k uses seed + k")->capture_default_str();
  command->add_option("--add-tests", flags->add_tests, "also package every X.in of this folder (strict-valid)");
  command->footer(
      "icpc:    problem.yaml (validation: custom), data/sample/ (the lesson's examples), data/secret/,\n"
      "         input_validators/validate.cpp (exit 42/43), output_validators/check.cpp (42/43)\n"
      "polygon: tests/NN with answers tests/NN.a, validator.cpp (exit 0/1), check.cpp (testlib's\n"
      "         `check INPUT OUTPUT ANSWER`, exit 0 OK, 1 WA, 2 PE, 3 FAIL)\n"
      "Every answer is certified by the oracle and carries a certificate section (README, \"Judge\n"
      "packages\"). The checker and validator are single C++17 files with no dependency; they give\n"
      "the verdicts of `attncheck check` and `attncheck validate` at the package's limits.\n"
      "--tests 0 --add-tests DIR packages only your own tests. An --out that is not empty must hold\n"
      "an earlier package (attncheck-package.txt); its tests and programs are replaced.\n");
  commands.push_back({command, [flags] { return run_package(*flags); }});
}

}  // namespace attn::cli
