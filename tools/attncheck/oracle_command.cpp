// attncheck oracle / check / certify: the certified oracle's answer, the checker (testlib and
// Kattis/DOMjudge conventions), and certification of a directory of judge answers.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "common.hpp"
#include "instance_io.hpp"
#include "judge/checker.hpp"
#include "judge/oracle.hpp"
#include "package_files.hpp"

namespace attn::cli {
namespace {

using verify::Certificate;
using verify::Verdict;
using verify::VerdictKind;

// The exact value of one cell to `significant` digits (Ziv on the block that holds it).
std::string exact_value_text(const verify::ExactInstance& exact, std::size_t row, std::size_t col, int significant) {
  const Instance& instance = *exact.instance;
  const std::size_t head_v = instance.d_v / instance.heads;
  const verify::ExactBlock block = verify::exact_block(exact, row / instance.n, row % instance.n, col / head_v);
  const verify::SignificantDigits digits = verify::exact_digits(exact, block, col % head_v, significant);
  return digits.text + (digits.resolved ? "" : " (unresolved)");
}

// Every significant-digit value, rows of single-space-separated values.
std::string digits_text(const Instance& instance, int significant) {
  const verify::ExactInstance exact = verify::make_exact(instance);
  const std::size_t head_v = instance.d_v / instance.heads;
  std::string out;
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t i = 0; i < instance.n; ++i) {
      for (std::size_t g = 0; g < instance.heads; ++g) {
        const verify::ExactBlock block = verify::exact_block(exact, b, i, g);
        for (std::size_t c = 0; c < head_v; ++c) {
          out += verify::exact_digits(exact, block, c, significant).text;
          out += g + 1 == instance.heads && c + 1 == head_v ? '\n' : ' ';
        }
      }
    }
  }
  return out;
}

// One line per ambiguous cell: where, the exact value to 25 digits, δ, what is accepted.
std::string ambiguous_report(const Instance& instance, const Certificate& certificate) {
  const verify::ExactInstance exact = verify::make_exact(instance);
  std::string report;
  for (std::size_t index = 0; index < certificate.cells.size(); ++index) {
    const verify::CellCertificate& cell = certificate.cells[index];
    if (!cell.ambiguous) continue;
    const std::size_t row = index / certificate.cols, col = index % certificate.cols;
    // Usually exactly two strings; with a band wider than half a unit, the whole range.
    const bool two = (cell.lowest == cell.canonical && cell.highest == cell.alternative) ||
                     (cell.lowest == cell.alternative && cell.highest == cell.canonical);
    const std::string accepted = two ? cell.canonical + " or " + cell.alternative : cell.lowest + " .. " + cell.highest;
    const std::string kind = cell.unresolved
                                 ? " (tie or closer than 2^-" + std::to_string(verify::OracleOptions{}.max_bits) + ")"
                             : cell.exact_tie ? " (exact tie)"
                                              : "";
    char band[32];
    std::snprintf(band, sizeof band, "%.3g", cell.band);
    report += "ambiguous: row " + std::to_string(row + 1) + ", column " + std::to_string(col + 1) + ": exact " +
              exact_value_text(exact, row, col, 25) + ", band " + band + kind + ": accepts " + accepted + "\n";
  }
  return report;
}

// Reads and parses an input file; the error names the file and the position in it.
Result<Instance, Error> load_instance(const std::string& path, const ProblemSetup& setup, Strictness strictness) {
  const auto text = read_input(path);
  if (!text) return text.error();
  auto instance = read_instance(*text, setup.problem, setup.limits, strictness);
  if (!instance) return Error{path + ": " + instance.error().to_string()};
  return std::move(instance).value();
}

// "; the answer file differs: ..." when an answer file is given and is not accepted, or when its
// certificate section is not the oracle's.
std::string answer_file_note(const Certificate& certificate, const std::optional<std::string>& answer,
                             std::string_view problem) {
  if (!answer) return "";
  const verify::AnswerParts parts = verify::split_answer(*answer);
  if (!parts.section.empty() && parts.section != verify::certificate_section(certificate, problem)) {
    return " [note: the answer file's certificate section differs from the oracle's]";
  }
  const Verdict verdict = verify::check_output(certificate, parts.values);
  if (verdict.kind == VerdictKind::ok || verdict.kind == VerdictKind::acceptable) return "";
  return " [note: the answer file is not accepted either: " + verdict.message + "]";
}

int run_check(const ProblemOptions& options, const std::vector<std::string>& files, bool kattis) {
  // testlib: 0 OK, 1 WA, 2 PE, 3 FAIL. Kattis/DOMjudge: 42 accepted, 43 wrong; anything else is a
  // judge error, so FAIL keeps 3 there too.
  constexpr int kFail = 3;
  const auto setup = resolve_problem(options);
  if (!setup) return fail(setup.error(), kFail);
  if (kattis ? files.size() != 3 : (files.size() < 2 || files.size() > 3)) {
    return fail(Error{"check needs IN OUT [ANS], or --kattis IN ANS FEEDBACK_DIR < OUT"}, kFail);
  }
  const auto instance = load_instance(files[0], *setup, Strictness::lenient);
  if (!instance) return fail(instance.error(), kFail);
  const auto output = read_input(kattis ? "-" : files[1]);
  if (!output) return fail(output.error(), kFail);
  std::optional<std::string> answer;
  const std::string answer_path = kattis ? files[1] : files.size() == 3 ? files[2] : "";
  if (!answer_path.empty()) {
    auto read = read_input(answer_path);
    if (!read) return fail(read.error(), kFail);
    answer = std::move(read).value();
  }
  const Certificate certificate = verify::certify(*instance, {}, verify::Weights::skip);
  // A package's answer file checked as an output carries its own certificate section: not output.
  const std::string_view section = answer ? verify::split_answer(*answer).section : std::string_view{};
  const Verdict verdict = verify::check_output(certificate, verify::without_section_echo(*output, section));
  const std::string line = std::string(verify::verdict_name(verdict.kind)) + ": " + verdict.message +
                           answer_file_note(certificate, answer, problem_name(setup->problem));
  const bool accepted = verdict.kind == VerdictKind::ok || verdict.kind == VerdictKind::acceptable;
  if (!kattis) {
    std::fprintf(stderr, "%s\n", line.c_str());
    return accepted ? 0 : verdict.kind == VerdictKind::wrong_answer ? 1 : 2;
  }
  // A verdict the judge cannot read is a judge error, not a verdict.
  const auto written = write_file((std::filesystem::path(files[2]) / "judgemessage.txt").string(), line + "\n");
  if (!written) return fail(written.error(), kFail);
  return accepted ? 42 : 43;
}

enum class FileOutcome { certified, ambiguous, failed, skipped };

// certify: the outcome of one X.in and the line that says it.
struct FileReport {
  FileOutcome outcome;
  std::string line;
};

namespace fs = std::filesystem;

// One test certify looks at: its input, its answer (empty path when there is none), its name.
struct TestFile {
  fs::path input;
  fs::path answer;
  std::string name;
};

// A directory of judge tests as certify reads it: X.in beside X.ans (or X.out); a judge package
// written by `attncheck package`: icpc (problem.yaml, data/**/X.in with X.ans) or polygon
// (check.cpp, tests/NN with tests/NN.a), whose answers must carry their certificate section.
struct TestDirectory {
  std::vector<TestFile> tests;
  bool package = false;
  /// icpc packages: the samples' certificate sections kept in output_validator(s)/check.cpp (their
  /// answer files are shown to contestants), by the FNV-1a 64 hash of the sample input.
  std::map<std::string, std::string> sample_sections;
};

// The `{"HASH", R"attncheck(SECTION)attncheck"}` entries of a package checker's settings block.
std::map<std::string, std::string> embedded_sections(std::string_view checker) {
  std::map<std::string, std::string> sections;
  const std::string open = "\", " + std::string(kSectionOpen);
  for (std::size_t at = checker.find(open); at != std::string_view::npos; at = checker.find(open, at + 1)) {
    if (at < 18 || checker.substr(at - 18, 2) != "{\"") continue;
    const std::size_t end = checker.find(kSectionClose, at);
    if (end == std::string_view::npos) break;
    const std::size_t begin = at + open.size();
    sections[std::string(checker.substr(at - 16, 16))] = std::string(checker.substr(begin, end - begin));
  }
  return sections;
}

Result<TestDirectory, Error> list_tests(const fs::path& directory) {
  TestDirectory out;
  std::error_code error;
  const bool icpc = fs::exists(directory / "problem.yaml", error) && fs::is_directory(directory / "data", error);
  const bool polygon = fs::exists(directory / "check.cpp", error) && fs::is_directory(directory / "tests", error);
  out.package = icpc || polygon;
  auto answer_of = [](fs::path answer, std::initializer_list<const char*> extensions) {
    for (const char* extension : extensions) {
      answer.replace_extension(extension);
      if (fs::exists(answer)) return answer;
    }
    return fs::path{};
  };
  if (icpc) {
    for (auto it = fs::recursive_directory_iterator(directory / "data", error); !error && it != fs::end(it);
         it.increment(error)) {
      if (it->path().extension() != ".in") continue;
      out.tests.push_back({it->path(), answer_of(it->path(), {".ans"}), fs::relative(it->path(), directory).string()});
    }
  } else {
    const fs::path folder = polygon ? directory / "tests" : directory;
    for (const auto& entry : fs::directory_iterator(folder, error)) {
      const fs::path& path = entry.path();
      if (polygon ? !path.has_extension() : path.extension() == ".in") {
        const fs::path answer = polygon ? answer_of(path.string() + ".a", {".a"}) : answer_of(path, {".ans", ".out"});
        out.tests.push_back(
            {path, answer, polygon ? fs::relative(path, directory).string() : path.filename().string()});
      }
    }
  }
  if (error) return Error{"cannot list '" + directory.string() + "': " + error.message()};
  for (const char* folder : {"output_validators", "output_validator"}) {  // legacy, 2023-07
    if (!icpc || !fs::exists(directory / folder / "check.cpp", error)) continue;
    auto checker = read_input((directory / folder / "check.cpp").string());
    if (!checker) return checker.error();
    out.sample_sections = embedded_sections(*checker);
  }
  std::sort(out.tests.begin(), out.tests.end(), [](const TestFile& a, const TestFile& b) { return a.name < b.name; });
  return out;
}

FileReport certify_file(const TestFile& test, const ProblemSetup& setup, const TestDirectory& directory) {
  const bool package = directory.package;
  if (test.answer.empty()) return {FileOutcome::skipped, test.name + ": skipped (no answer file beside it)"};
  const auto instance = load_instance(test.input.string(), setup, Strictness::strict);
  if (!instance) return {FileOutcome::failed, test.name + ": invalid input: " + instance.error().message};
  const auto answer = read_input(test.answer.string());
  if (!answer) return {FileOutcome::failed, test.name + ": " + answer.error().message};
  const Certificate certificate = verify::certify(*instance, {}, verify::Weights::skip);
  verify::AnswerParts parts = verify::split_answer(*answer);
  const std::string answer_name = (fs::path(test.name).parent_path() / test.answer.filename()).string();
  if (package && parts.section.empty()) {
    // A sample's section is in the checker (its answer file is what contestants see).
    const auto input_text = read_input(test.input.string());
    const auto kept = input_text ? directory.sample_sections.find(content_hash(*input_text))
                                 : directory.sample_sections.end();
    if (kept == directory.sample_sections.end())
      return {FileOutcome::failed, answer_name + ": no certificate section, here or in the checker (the portable "
                                                 "checker needs it)"};
    parts.section = kept->second;
  }
  if (!parts.section.empty() &&
      parts.section != verify::certificate_section(certificate, problem_name(setup.problem))) {
    return {FileOutcome::failed, answer_name + ": wrong: the certificate section differs from the oracle's"};
  }
  const Verdict verdict = verify::check_output(certificate, parts.values);
  if (verdict.kind == VerdictKind::wrong_answer || verdict.kind == VerdictKind::presentation_error) {
    return {FileOutcome::failed, answer_name + ": wrong: " + verdict.message};
  }
  std::string cells;
  for (std::size_t index = 0; index < certificate.cells.size(); ++index) {
    if (!certificate.cells[index].ambiguous) continue;
    cells += cells.empty() ? " " : ", ";
    cells += "r" + std::to_string(index / certificate.cols + 1) + "c" + std::to_string(index % certificate.cols + 1);
  }
  if (cells.empty()) return {FileOutcome::certified, answer_name + ": certified"};
  return {FileOutcome::ambiguous, answer_name + ": certified with ambiguous cells" + cells +
                                      (verdict.kind == VerdictKind::acceptable ? " (" + verdict.message + ")" : "")};
}

}  // namespace

void register_oracle(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<ProblemOptions>();
  auto input = std::make_shared<std::string>("-");
  auto digits = std::make_shared<int>(0);
  auto* command =
      app.add_subcommand("oracle", "The certified exact answer (stdin -> stdout), ambiguous cells on stderr");
  add_problem_options(*command, *options);
  command->add_option("input", *input, "input file (default: stdin)");
  command->add_option("--digits", *digits, "print N significant digits of the exact values instead")
      ->check(CLI::Range(1, 1000));
  command->footer(
      "Prints the exact value of every output correctly rounded to the problem's decimals (ties to\n"
      "even, no '-0'). Each cell that a correct double implementation may round either way is listed\n"
      "on stderr with its exact value to 25 digits, its band and both acceptable strings.\n");
  commands.push_back({command, [options, input, digits]() -> int {
                        const auto setup = resolve_problem(*options);
                        if (!setup) return fail(setup.error(), 1);
                        const auto instance = load_instance(*input, *setup, Strictness::lenient);
                        if (!instance) return fail(instance.error(), 1);
                        std::string answer;
                        if (*digits > 0) {
                          answer = digits_text(*instance, *digits);
                        } else {
                          const Certificate certificate = verify::certify(*instance, {}, verify::Weights::skip);
                          std::fputs(ambiguous_report(*instance, certificate).c_str(), stderr);
                          answer = verify::canonical_text(certificate);
                        }
                        const auto written = write_stdout(answer);
                        return written ? 0 : fail(written.error(), 1);
                      }});
}

void register_check(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<ProblemOptions>();
  auto files = std::make_shared<std::vector<std::string>>();
  auto kattis = std::make_shared<bool>(false);
  auto* command = app.add_subcommand("check", "Judge an output against the oracle (testlib or Kattis conventions)");
  add_problem_options(*command, *options);
  command->add_option("files", *files, "IN OUT [ANS]  (with --kattis: IN ANS FEEDBACK_DIR, output on stdin)")
      ->required();
  command->add_flag("--kattis", *kattis, "Kattis/DOMjudge output validator: exit 42 accepted, 43 wrong");
  command->footer(
      "testlib: exit 0 OK, 1 WA, 2 PE, 3 FAIL (bad input), one line on stderr.\n"
      "Kattis: exit 42 / 43, the reason in FEEDBACK_DIR/judgemessage.txt.\n"
      "The truth comes from IN through the oracle; ANS is only compared to report a wrong answer file\n"
      "(and its certificate section, if any, to the oracle's). A copy of ANS's certificate section at\n"
      "the end of OUT is not output (judge systems check the answer file itself).\n");
  commands.push_back({command, [options, files, kattis]() -> int { return run_check(*options, *files, *kattis); }});
}

void register_certify(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<ProblemOptions>();
  auto directory = std::make_shared<std::string>();
  auto* command = app.add_subcommand("certify", "Certify every X.in / X.ans (or X.out) pair in a directory");
  add_problem_options(*command, *options);
  command->add_option("directory", *directory, "directory of judge tests, or a package from `attncheck package`")
      ->required();
  command->footer(
      "Each input is validated strictly and its answer checked against the oracle. Exit 1 if any\n"
      "input is invalid or any answer wrong. A judge package (icpc: data/**/X.in + X.ans; polygon:\n"
      "tests/NN + NN.a) is walked whole, and each answer's certificate section must be the oracle's.\n");
  commands.push_back({command, [options, directory]() -> int {
                        const auto setup = resolve_problem(*options);
                        if (!setup) return fail(setup.error(), 1);
                        const auto listed = list_tests(*directory);
                        if (!listed) return fail(listed.error(), 1);
                        const std::vector<TestFile>& inputs = listed->tests;
                        std::size_t counts[4] = {0, 0, 0, 0};
                        for (const TestFile& input : inputs) {
                          const FileReport report = certify_file(input, *setup, *listed);
                          std::printf("%s\n", report.line.c_str());
                          ++counts[static_cast<int>(report.outcome)];
                        }
                        const auto [certified, ambiguous, failed, skipped] = counts;
                        std::printf(
                            "%zu inputs: %zu certified (%zu with ambiguous cells), %zu wrong or invalid, "
                            "%zu without an answer\n",
                            inputs.size(), certified + ambiguous, ambiguous, failed, skipped);
                        return failed == 0 ? 0 : 1;
                      }});
}

}  // namespace attn::cli
