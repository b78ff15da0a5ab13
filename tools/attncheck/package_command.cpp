// attncheck package: a complete, self-contained judge package (Kattis/ICPC problem package or
// Polygon) with certified answers and the portable checker and validator (tools/portable/).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "campaign/generators.hpp"
#include "campaign/process.hpp"
#include "common.hpp"
#include "instance_io.hpp"
#include "judge/checker.hpp"
#include "package_files.hpp"
#include "package_statement.hpp"
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
  bool force = false;
  bool submissions = true;
  std::string license, author;
};

// problem.yaml's text for the format (icpc: legacy; icpc-2023: 2023-07), `uuid` kept when known.
std::string problem_yaml(const PackageFlags& flags, Problem problem, const std::string& uuid) {
  std::string text = "# Written by attncheck package; see " + std::string(kMarkerName) + ".\n";
  const bool needs_owner = !flags.license.empty() && flags.license != "unknown" && flags.license != "public domain";
  if (flags.format == "icpc-2023") {
    text += "problem_format_version: 2023-07\nname: " + display_name(problem) + "\nuuid: " + uuid +
            "\ntype: pass-fail\n";
    if (!flags.license.empty()) text += "license: " + flags.license + "\n";
    if (!flags.author.empty()) text += "credits: " + flags.author + "\n";
    if (needs_owner) text += "rights_owner: " + flags.author + "\n";
  } else {
    text += "name: " + display_name(problem) + "\nvalidation: custom\n";
    if (!flags.license.empty()) text += "license: " + flags.license + "\n";
    if (!flags.author.empty()) text += "author: " + flags.author + "\n";
  }
  return text;
}

// A random (version 4) UUID, as 2023-07's problem.yaml needs one.
std::string random_uuid() {
  std::random_device device;
  std::mt19937_64 random((static_cast<std::uint64_t>(device()) << 32) ^ device());
  std::uint64_t high = random(), low = random();
  high = (high & ~0xf000ull) | 0x4000ull;                     // version 4
  low = (low & ~(0xc000ull << 48)) | (0x8000ull << 48);        // variant 10
  char text[40];
  std::snprintf(text, sizeof text, "%08llx-%04llx-%04llx-%04llx-%012llx",
                static_cast<unsigned long long>(high >> 32), static_cast<unsigned long long>((high >> 16) & 0xffff),
                static_cast<unsigned long long>(high & 0xffff), static_cast<unsigned long long>(low >> 48),
                static_cast<unsigned long long>(low & 0xffffffffffffull));
  return text;
}

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

// A sample's certificate section, kept in the checker: (FNV-1a of the input, section).
using SampleCertificates = std::vector<std::pair<std::string, std::string>>;

std::string checker_source(Problem problem, const SampleCertificates& samples) {
  std::string table;
  for (const auto& [hash, section] : samples)
    table += "    {\"" + hash + "\", " + std::string(kSectionOpen) + section + std::string(kSectionClose) + "},\n";
  return with_settings(embedded::kCheckSource,
                       "namespace settings {\nconstexpr const char* kProblem = \"" + std::string(problem_name(problem)) +
                           "\";  // how the input's header reads\n"
                           "// The samples' certificate sections (their answer files are shown to contestants):\n"
                           "// the FNV-1a 64 hash of the sample input's bytes and its section; a null entry ends it.\n"
                           "struct SampleCertificate {\n  const char* input_hash;\n  const char* section;\n};\n"
                           "constexpr SampleCertificate kSampleCertificates[] = {\n" +
                           table + "    {nullptr, nullptr}};\n}  // namespace settings\n");
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
                           "constexpr std::size_t kMaxFractionDigits = " +
                           size(limits.max_fraction_digits) + ";  // digits after a real's point\n"
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

// A wrong solution of tests/solutions as one self-contained program: the reference with its main
// guard cut, then the wrong one's patches of the reference's hooks (`ref.X = ...` becomes `X = ...`).
std::string standalone(std::string_view reference, std::string_view wrong, const std::string& problem) {
  std::string text = "#!/usr/bin/env python3\n" + std::string(reference.substr(0, reference.find("\nif __name__")));
  text += "\n\n";
  const std::string import = "import " + problem + "_reference as ref";
  for (std::size_t at = 0; at < wrong.size();) {
    const std::size_t end = std::min(wrong.find('\n', at), wrong.size());
    std::string line(wrong.substr(at, end - at));
    at = end + 1;
    if (line == import) continue;
    for (std::size_t ref = line.find("ref."); ref != std::string::npos; ref = line.find("ref.", ref))
      line.erase(ref, 4);
    text += line + "\n";
  }
  return text;
}

// How a solution program fares on the package's tests, in the order a judge runs them (samples,
// then secret, by name): the first test it fails and how, or "" when it passes every one.
struct Judged {
  std::string verdict;  ///< "" accepted, else wrong_answer, run_time_error or time_limit_exceeded
  std::string test, detail;
  double slowest = 0;  ///< the longest run (wall clock, seconds)
};

Judged judge_program(const std::string& command, const std::vector<PackageTest>& tests,
                     const std::vector<verify::Certificate>& certificates) {
  std::vector<std::size_t> order(tests.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (tests[a].sample != tests[b].sample) return tests[a].sample;
    return tests[a].name < tests[b].name;
  });
  constexpr double kSeconds = 20;
  double slowest = 0;
  for (const std::size_t k : order) {
    const verify::ProcessResult run = verify::run_process(command, tests[k].input, kSeconds);
    slowest = std::max(slowest, run.seconds);
    const std::string where = std::string(tests[k].sample ? "sample/" : "secret/") + tests[k].name;
    if (run.end == verify::ProcessEnd::timed_out) return {"time_limit_exceeded", where, verify::describe(run, kSeconds)};
    if (run.end != verify::ProcessEnd::exited || run.status != 0)
      return {"run_time_error", where, verify::describe(run, kSeconds)};
    const verify::Verdict verdict = verify::check_output(certificates[k], run.output);
    if (verdict.kind == verify::VerdictKind::wrong_answer || verdict.kind == verify::VerdictKind::presentation_error)
      return {"wrong_answer", where, verdict.message};
  }
  return {"", "", "", slowest};
}

// submissions/: the reference solutions as accepted (C++17 and Python), and each wrong solution of
// the lesson in the folder of the verdict a judge gives it, checked by running it (python3) on
// every packaged test; one that no test catches is left out. What happened is printed. Returns the
// accepted Python solution's slowest run in seconds (0 when it was not run).
double add_submissions(const std::string& problem, const std::vector<PackageTest>& tests,
                     const std::vector<verify::Certificate>& certificates, std::map<std::string, std::string>& files) {
  std::string reference_py;
  for (const embedded::Solution& solution : embedded::kSolutions) {
    if (solution.problem != problem) continue;
    if (solution.name == "reference.py") reference_py = std::string(solution.source);
    if (solution.name == "reference.cpp") files.emplace("submissions/accepted/reference.cpp", solution.source);
  }
  const fs::path scratch = fs::temp_directory_path() / ("attncheck-package-" + std::to_string(::getpid()));
  std::error_code error;
  fs::create_directories(scratch, error);
  const bool python = !error && [] {
    const auto probe = verify::run_process("python3 -c pass", "", 20);
    return probe.end == verify::ProcessEnd::exited && probe.status == 0;
  }();
  if (!python) {
    std::printf("package: submissions: python3 not found, so the Python solutions cannot be checked: only "
                "submissions/accepted/reference.cpp is written\n");
    fs::remove_all(scratch, error);
    return 0;
  }
  const auto judged = [&](const std::string& name, const std::string& source) {
    const fs::path path = scratch / name;
    if (auto written = write_file(path.string(), source); !written) return Judged{"error", "", written.error().message};
    return judge_program("python3 '" + path.string() + "'", tests, certificates);
  };
  const std::string accepted = "#!/usr/bin/env python3\n" + reference_py;
  double slowest = 0;
  if (const Judged j = judged("reference.py", accepted); j.verdict.empty()) {
    files.emplace("submissions/accepted/reference.py", accepted);
    slowest = j.slowest;
  } else {
    std::printf("package: submissions: reference.py left out: %s on %s (%s)\n", j.verdict.c_str(), j.test.c_str(),
                j.detail.c_str());
  }
  for (const embedded::Solution& solution : embedded::kSolutions) {
    if (solution.problem != problem || solution.name.rfind("reference", 0) == 0) continue;
    const std::string name(solution.name);
    const std::string source = standalone(reference_py, solution.source, problem);
    const Judged j = judged(name, source);
    if (j.verdict.empty()) {
      std::printf("package: submissions: %s left out: no packaged test catches it (more --tests may)\n", name.c_str());
    } else if (j.verdict == "error") {
      std::printf("package: submissions: %s left out: %s\n", name.c_str(), j.detail.c_str());
    } else {
      files.emplace("submissions/" + j.verdict + "/" + name, source);
      std::printf("package: submissions/%s/%s: caught by %s (%s)\n", j.verdict.c_str(), name.c_str(), j.test.c_str(),
                  j.detail.substr(0, 100).c_str());
    }
  }
  fs::remove_all(scratch, error);
  return slowest;
}

// An empty or new --out (created), or an earlier package there: the marker's text ("" when new).
Result<std::string, Error> prepare_out(const fs::path& out) {
  std::error_code error;
  if (!fs::exists(out, error)) {
    if (auto made = make_directories(out.string()); !made) return made.error();
    return std::string();
  }
  if (!fs::is_directory(out, error)) return Error{"--out '" + out.string() + "' is not a directory"};
  if (fs::is_empty(out, error)) return std::string();
  if (!fs::exists(out / kMarkerName, error)) {
    return Error{"--out '" + out.string() + "' is not empty and holds no earlier package (" + kMarkerName +
                 "); give a new or empty folder"};
  }
  return read_input((out / kMarkerName).string());
}

std::string marker_text(const PackageFlags& flags, Problem problem, bool icpc) {
  std::string text = "Written by `attncheck package --problem " + std::string(problem_name(problem)) + " --format " +
                     flags.format + " --tests " + std::to_string(flags.tests) + " --seed " +
                     std::to_string(flags.seed) + (flags.add_tests.empty() ? "" : " --add-tests " + flags.add_tests) +
                     "`.\n\n";
  text +=
      "Each answer file holds the canonical answer, then a certificate section (attncheck's README,\n"
      "\"Judge packages\") listing the accepted range of every ambiguous cell; the checker reads it.\n"
      "Sample answers, which contestants see, hold the canonical answer alone: their sections are in\n"
      "the checker's settings block, keyed by a hash of the sample's input.\n"
      "The checker and the validator are single C++17 files using only the standard library:\n";
  text += icpc ? "  g++ -std=c++17 -O2 " + std::string(flags.format == "icpc" ? "output_validators" : "output_validator") +
                     "/check.cpp -o check\n"
                 "  check INPUT ANSWER FEEDBACK_DIR < OUTPUT      exit 42 accepted, 43 rejected\n"
                 "  g++ -std=c++17 -O2 input_validators/validate.cpp -o validate\n"
                 "  validate < INPUT                              exit 42 valid, 43 invalid\n"
               : "  g++ -std=c++17 -O2 check.cpp -o check\n"
                 "  check INPUT OUTPUT ANSWER                     exit 0 OK, 1 WA, 2 PE, 3 FAIL (testlib)\n"
                 "  g++ -std=c++17 -O2 validator.cpp -o validator\n"
                 "  validator < INPUT                             exit 0 valid, 1 invalid\n";
  text += "`attncheck certify --problem " + std::string(problem_name(problem)) +
          " DIR` re-certifies every test of this package.\n"
          "Given to `attncheck package --out` again, this folder keeps your work: a file listed below\n"
          "that you changed, any file you added and the problem.yaml keys you added or changed are\n"
          "left alone (and listed); only attncheck's own unchanged files are replaced. --force\n"
          "replaces changed files too. This file is attncheck's record and is rewritten each time.\n\n";
  return text;
}

int run_package(const PackageFlags& flags) {
  const auto setup = resolve_problem(flags.problem);
  if (!setup) return fail(setup.error(), 1);
  const bool icpc = flags.format != "polygon", legacy = flags.format == "icpc";
  if (!flags.license.empty() && flags.license != "unknown" && flags.license != "public domain" && flags.author.empty())
    return fail(Error{"--license '" + flags.license + "' needs --author (the rights owner)"}, 1);
  auto tests = collect_tests(flags, *setup);
  if (!tests) return fail(tests.error(), 1);
  const fs::path out(flags.out);
  auto earlier = prepare_out(out);
  if (!earlier) return fail(earlier.error(), 1);

  const std::string problem(problem_name(setup->problem));
  std::map<std::string, std::string> files;
  std::set<std::string> merged;
  std::vector<std::string> yaml_kept;
  std::string existing_yaml;
  if (std::error_code error; icpc && fs::is_regular_file(out / "problem.yaml", error)) {
    auto existing = read_input((out / "problem.yaml").string());
    if (!existing) return fail(existing.error(), 1);
    existing_yaml = std::move(existing).value();
  }
  // 2023-07 needs a uuid that stays the problem's: the one it has, else the one written last, else new.
  std::string uuid = yaml_top_level(existing_yaml)["uuid"];
  if (uuid.empty()) uuid = read_yaml_record(*earlier)["uuid"];
  if (uuid.empty()) uuid = random_uuid();
  const std::string yaml = problem_yaml(flags, setup->problem, uuid);
  if (icpc) {
    std::string text = yaml;
    if (!existing_yaml.empty()) {
      text = merge_problem_yaml(existing_yaml, yaml, read_yaml_record(*earlier), flags.force, yaml_kept);
      merged.insert("problem.yaml");
    }
    files.emplace("problem.yaml", text);
    files.emplace("input_validators/validate.cpp", validator_source(*setup, true));
    files.emplace(legacy ? "problem_statement/problem.en.tex" : "statement/problem.en.md",
                  statement_text(setup->problem, setup->limits,
                                 legacy ? StatementMarkup::latex : StatementMarkup::markdown));
  } else {
    files.emplace("validator.cpp", validator_source(*setup, false));
  }
  SampleCertificates sample_certificates;
  std::vector<verify::Certificate> certificates;
  std::size_t samples = 0, ambiguous_tests = 0, index = 0;
  for (const PackageTest& test : *tests) {
    const verify::Certificate& certificate =
        certificates.emplace_back(verify::certify(test.instance, {}, verify::Weights::skip));
    std::size_t ambiguous = 0;
    for (const auto& cell : certificate.cells) ambiguous += cell.ambiguous ? 1 : 0;
    ambiguous_tests += ambiguous > 0 ? 1 : 0;
    samples += test.sample ? 1 : 0;
    const std::string answer = verify::answer_text(certificate, problem);
    if (icpc) {
      const std::string stem = std::string(test.sample ? "data/sample/" : "data/secret/") + test.name;
      files.emplace(stem + ".in", test.input);
      if (test.sample) {  // shown to contestants: the canonical answer; the section goes to the checker
        files.emplace(stem + ".ans", verify::canonical_text(certificate));
        sample_certificates.emplace_back(content_hash(test.input), verify::certificate_section(certificate, problem));
      } else {
        files.emplace(stem + ".ans", answer);
      }
    } else {
      char stem[32];
      std::snprintf(stem, sizeof stem, "tests/%02zu", ++index);
      files.emplace(stem, test.input);
      files.emplace(std::string(stem) + ".a", answer);
    }
  }
  files.emplace(legacy ? "output_validators/check.cpp" : icpc ? "output_validator/check.cpp" : "check.cpp",
                checker_source(setup->problem, sample_certificates));
  if (icpc && flags.submissions && setup->problem != Problem::general) {
    // DOMjudge takes its time limit from domjudge-problem.ini (else 10 s); problemtools derives its
    // own from the accepted submissions. Both the same way: the slowest accepted run times 5
    // (legacy's time_multiplier), rounded up to whole seconds.
    if (const double slowest = add_submissions(problem, *tests, certificates, files); slowest > 0) {
      const int seconds = std::max(1, static_cast<int>(std::ceil(5 * slowest)));
      files.emplace("domjudge-problem.ini", "timelimit = " + std::to_string(seconds) + "\n");
    }
  }
  const WriteReport report =
      write_package(out.string(), files, read_manifest(*earlier), flags.force, kMarkerName, merged);
  // The record is rewritten even when the run stopped halfway, so that it describes the folder.
  const std::string marker = marker_text(flags, setup->problem, icpc) + manifest_text(report.manifest) +
                             (icpc ? "\n" + yaml_record_text(yaml) : "");
  if (!through_symlink(out.string(), kMarkerName)) {
    if (auto written = write_file((out / kMarkerName).string(), marker); !written) return fail(written.error(), 1);
  }
  if (report.error) return fail(*report.error, 1);
  std::printf("package: %s package for %s in %s: %zu test%s (%zu samples), %zu with ambiguous cells\n",
              flags.format.c_str(), problem.c_str(), flags.out.c_str(), tests->size(), tests->size() == 1 ? "" : "s",
              samples, ambiguous_tests);
  if (!report.replaced.empty() || !report.removed.empty())
    std::printf("package: %zu file(s) of the earlier package replaced, %zu removed\n", report.replaced.size(),
                report.removed.size());
  for (const std::string& line : report.forced) std::printf("package: replaced (--force): %s\n", line.c_str());
  for (const std::string& line : yaml_kept) std::printf("package: kept: %s\n", line.c_str());
  for (const std::string& line : report.kept) std::printf("package: kept: %s\n", line.c_str());
  return 0;
}

}  // namespace

void register_package(CLI::App& app, Commands& commands) {
  auto flags = std::make_shared<PackageFlags>();
  auto* command = app.add_subcommand(
      "package", "Write a self-contained judge package: tests, certified answers, checker, validator");
  add_problem_options(*command, flags->problem);
  command->add_option("--out,-o", flags->out, "the package folder (new, empty, or an earlier package)")->required();
  command
      ->add_option("--format", flags->format,
                   "icpc (Kattis/DOMjudge problem package, legacy format) | icpc-2023 (format 2023-07) | polygon "
                   "(testlib)")
      ->check(CLI::IsMember({"icpc", "icpc-2023", "polygon"}))
      ->capture_default_str();
  command->add_option("--tests,-n", flags->tests, "generated tests, cycling random, edge, max (0: --add-tests only)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  command->add_option("--seed,-s", flags->seed, "test k uses seed + k")->capture_default_str();
  command->add_option("--add-tests", flags->add_tests, "also package every X.in of this folder (strict-valid)");
  command->add_option("--license", flags->license, "icpc: problem.yaml's license")
      ->check(CLI::IsMember({"unknown", "public domain", "cc0", "cc by", "cc by-sa", "educational", "permission"}));
  command->add_option("--author", flags->author,
                      "icpc: the author (legacy author:, 2023-07 credits:), also the rights owner a license needs");
  command->add_flag("!--no-submissions", flags->submissions,
                    "icpc: leave out submissions/ (the reference solutions and the lesson's wrong ones)");
  command->add_flag("--force", flags->force,
                    "on an earlier package, also replace files you changed (they are listed); files you added "
                    "stay");
  command->footer(
      "icpc:    problem.yaml (validation: custom), data/sample/ (the lesson's examples), data/secret/,\n"
      "         input_validators/validate.cpp (exit 42/43), output_validators/check.cpp (42/43),\n"
      "         submissions/ (ai006, ai031: accepted/reference.cpp and .py; the lesson's wrong\n"
      "         solutions, each run with python3 on every test and filed under the verdict it gets:\n"
      "         wrong_answer/, run_time_error/; one no test catches is left out)\n"
      "polygon: tests/NN with answers tests/NN.a, validator.cpp (exit 0/1), check.cpp (testlib's\n"
      "         `check INPUT OUTPUT ANSWER`, exit 0 OK, 1 WA, 2 PE, 3 FAIL)\n"
      "Every answer is certified by the oracle and carries a certificate section (README, \"Judge\n"
      "packages\"). The checker and validator are single C++17 files with no dependency; they give\n"
      "the verdicts of `attncheck check` and `attncheck validate` at the package's limits.\n"
      "--tests 0 --add-tests DIR packages only your own tests. An --out that is not empty must hold\n"
      "an earlier package (attncheck-package.txt): only the files attncheck wrote there and nobody\n"
      "changed since are replaced (or removed); files you changed or added, and problem.yaml keys\n"
      "you added or changed, are kept and listed (--force replaces your changes to attncheck's files).\n");
  commands.push_back({command, [flags] { return run_package(*flags); }});
}

}  // namespace attn::cli
