// attncheck package: the layout of icpc and polygon packages, certify on a package, the CLI's
// refusals; and the proof of equivalence: the generated checker and validator, compiled with the
// system compiler (g++ -std=c++17 -O2, nothing else), give the verdict, message and exit code of
// `attncheck check` / `attncheck validate` on the rounding traps, stress outputs of a correct
// program and of wrong ones, the checker's fuzz corpus and the malformed-input corpora.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "campaign/generators.hpp"
#include "cli_runner.hpp"
#include "instance_io.hpp"
#include "judge/checker.hpp"
#include "solve.hpp"
#include "tools/test_package_cases.hpp"

extern char** environ;

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing_support::run_attncheck;
using testing_support::slurp;
using testing_support::TempDir;

const std::string kSource = ATTNCHECK_SOURCE_DIR;

struct Exit {
  int status = -1;
  std::string err;  ///< what the program wrote on stderr
};

// Runs argv directly (no shell: thousands of runs), stdin from `input`, stdout discarded.
Exit run(const std::vector<std::string>& argv, const std::string& input, const std::string& scratch) {
  const std::string err_path = scratch + "/stderr";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, input.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return {-1, "cannot run " + argv[0]};
  int raw = 0;
  waitpid(pid, &raw, 0);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(err_path)};
}

std::string write(const std::string& path, std::string_view text) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), file);
  std::fclose(file);
  return path;
}

// A package and its checker and validator, compiled.
struct Portable {
  std::string package, check, validate;
};

// Packages each problem (with its `attncheck package` arguments) into dir/PROBLEM and compiles the
// package's checker or validator with the system g++, all compilers at once.
std::map<std::string, Portable> build_portable(const TempDir& dir, const std::map<std::string, std::string>& problems,
                                               bool checker) {
  std::map<std::string, Portable> out;
  std::string compile;
  for (const auto& [problem, args] : problems) {
    Portable& tools = out[problem];
    tools = {dir.path() + "/" + problem, dir.path() + "/check-" + problem, dir.path() + "/validate-" + problem};
    const auto packaged =
        run_attncheck("package --no-submissions --problem " + problem + " --out " + tools.package + " " + args, "");
    EXPECT_EQ(packaged.status, 0) << packaged.err;
    compile += checker ? "g++ -std=c++17 -O2 " + tools.package + "/output_validators/check.cpp -o " + tools.check
                       : "g++ -std=c++17 -O2 " + tools.package + "/input_validators/validate.cpp -o " + tools.validate;
    compile += " & ";
  }
  // `wait` alone reports nothing: a failed compiler shows as a missing binary below.
  EXPECT_EQ(std::system((compile + "wait").c_str()), 0) << compile;
  for (const auto& [problem, tools] : out) EXPECT_TRUE(fs::exists(checker ? tools.check : tools.validate)) << problem;
  return out;
}

TEST(PackageCommand, IcpcAndPolygonLayoutsCertify) {
  TempDir dir;
  for (const std::string problem : {"ai006", "ai031"}) {
    const std::string icpc = dir.path() + "/" + problem + "-icpc", polygon = dir.path() + "/" + problem + "-polygon";
    const auto made = run_attncheck("package --no-submissions --problem " + problem + " --out " + icpc + " --tests 3 --seed 5", "");
    ASSERT_EQ(made.status, 0) << made.err;
    EXPECT_NE(made.out.find("5 tests (2 samples)"), std::string::npos) << made.out;
    EXPECT_NE(slurp(icpc + "/problem.yaml").find("validation: custom"), std::string::npos);
    for (const char* file : {"data/sample/lesson-sample.in", "data/secret/001-random-5.in",
                             "data/secret/002-edge-6.ans", "data/secret/003-max-7.ans", "input_validators/validate.cpp",
                             "output_validators/check.cpp", "attncheck-package.txt"}) {
      if (problem == "ai006" && std::string(file) == "data/sample/lesson-sample.in")
        file = "data/sample/lesson-sample2.in";
      EXPECT_TRUE(fs::exists(icpc + "/" + file)) << icpc << "/" << file;
    }
    const std::string answer = slurp(icpc + "/data/secret/002-edge-6.ans");
    EXPECT_NE(answer.find("\n# attncheck-certificate v1 problem=" + problem + " rows="), std::string::npos) << answer;
    EXPECT_EQ(answer.substr(answer.size() - 6), "# end\n");

    ASSERT_EQ(
        run_attncheck("package --problem " + problem + " --format polygon --out " + polygon + " --tests 3", "").status,
        0);
    for (const char* file : {"tests/01", "tests/01.a", "tests/05", "tests/05.a", "check.cpp", "validator.cpp"}) {
      EXPECT_TRUE(fs::exists(polygon + "/" + file)) << polygon << "/" << file;
    }
    // Sample answers, shown to contestants, carry no certificate section: the icpc checker keeps
    // theirs. Apart from that table one checker source serves both conventions; the validators
    // differ in their default exit codes.
    const std::string sample_answer = problem == "ai006" ? "/data/sample/lesson-sample2.ans" : "/data/sample/lesson-sample.ans";
    EXPECT_EQ(slurp(icpc + sample_answer).find("attncheck-certificate"), std::string::npos);
    const auto without_table = [](std::string source) {
      constexpr std::string_view kTable = "kSampleCertificates[] = {\n";
      const std::size_t begin = source.find(kTable) + kTable.size();
      source.erase(begin, source.find("    {nullptr, nullptr}};", begin) - begin);
      return source;
    };
    const std::string icpc_checker = slurp(icpc + "/output_validators/check.cpp");
    EXPECT_NE(icpc_checker.find("\", R\"attncheck(# attncheck-certificate v1 problem=" + problem), std::string::npos);
    EXPECT_TRUE(slurp(polygon + "/check.cpp") == without_table(icpc_checker));  // (sources too long to print)
    EXPECT_NE(slurp(polygon + "/tests/01.a").find("attncheck-certificate"), std::string::npos);  // polygon: in .a
    std::string validator = slurp(icpc + "/input_validators/validate.cpp");
    validator.replace(validator.find("kKattis = true"), 14, "kKattis = false");
    EXPECT_EQ(slurp(polygon + "/validator.cpp"), validator);

    for (const std::string& package : {icpc, polygon}) {
      const auto certified = run_attncheck("certify --problem " + problem + " " + package, "");
      EXPECT_EQ(certified.status, 0) << certified.out << certified.err;
      EXPECT_NE(certified.out.find("5 inputs: 5 certified"), std::string::npos) << certified.out;
    }
    // certify refuses an answer whose certificate section is not the oracle's, or is missing.
    const std::string ans = icpc + "/data/secret/001-random-5.ans";
    const std::string original = slurp(ans);
    write(ans, original.substr(0, original.find("# attncheck-certificate")));
    EXPECT_EQ(run_attncheck("certify --problem " + problem + " " + icpc, "").status, 1);
    write(ans, original.substr(0, original.size() - 6) + "1 1 0.0000 0.0001 band\n# end\n");
    const auto tampered = run_attncheck("certify --problem " + problem + " " + icpc, "");
    EXPECT_EQ(tampered.status, 1);
    EXPECT_NE(tampered.out.find("certificate section differs"), std::string::npos) << tampered.out;
  }
}

TEST(PackageCommand, RefusalsAndHelp) {
  TempDir dir;
  const auto help = run_attncheck("package --help", "");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--add-tests"), std::string::npos);
  EXPECT_NE(help.out.find("polygon"), std::string::npos);
  // A folder with other things in it is never overwritten; an earlier package is replaced.
  dir.file("keep.txt", "mine\n");
  const auto refused = run_attncheck("package --problem ai031 --tests 1 --out " + dir.path(), "");
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("not empty"), std::string::npos) << refused.err;
  const std::string again = dir.path() + "/pkg";
  ASSERT_EQ(run_attncheck("package --problem ai031 --tests 4 --no-submissions --out " + again, "").status, 0);
  ASSERT_EQ(run_attncheck("package --problem ai031 --tests 1 --no-submissions --out " + again, "").status, 0);
  EXPECT_FALSE(fs::exists(again + "/data/secret/004-random-4.in"));  // the earlier tests are gone
  // --tests 0 packages the user's tests alone, each strict-valid.
  EXPECT_NE(
      run_attncheck("package --problem ai031 --tests 0 --out " + dir.path() + "/none", "").err.find("--add-tests"),
      std::string::npos);
  const std::string mine = dir.path() + "/mine";
  fs::create_directory(mine);
  write(mine + "/one.in", "1 1 1\n1\n1\n-0.005\n1\n");
  const std::string own = dir.path() + "/own";
  const auto packaged =
      run_attncheck("package --problem ai031 --no-submissions --tests 0 --add-tests " + mine + " --out " + own, "");
  ASSERT_EQ(packaged.status, 0) << packaged.err;
  EXPECT_EQ(slurp(own + "/data/secret/one.ans"),
            "0.00\n# attncheck-certificate v1 problem=ai031 rows=1 cols=1 decimals=2 ambiguous=1\n"
            "1 1 -0.01 0.00 tie\n# end\n");
  EXPECT_FALSE(fs::exists(own + "/data/sample"));
  write(mine + "/two.in", "1 1 1\n1\n1\n+1\n1\n");
  const auto invalid = run_attncheck("package --problem ai031 --tests 0 --add-tests " + mine + " --out " + own, "");
  EXPECT_EQ(invalid.status, 1);
  EXPECT_NE(invalid.err.find("two.in: not strict-valid: line 4, column 1"), std::string::npos) << invalid.err;
}

// Regenerating over a package a problem setter has worked on: every file they added or changed,
// and every problem.yaml key they added, survives byte for byte; attncheck's own unchanged files
// are replaced or removed; --force replaces (and lists) the changed ones; files they added stay.
TEST(PackageCommand, RegenerationKeepsTheSettersWork) {
  TempDir dir;
  const std::string pkg = dir.path() + "/pkg";
  ASSERT_EQ(run_attncheck("package --problem ai006 --out " + pkg + " --tests 4 --seed 1 --no-submissions", "").status, 0);
  const std::map<std::string, std::string> added = {
      {"data/secret/testdata.yaml", "output_validator_flags: float_tolerance 1e-6\n"},
      {"data/sample/zz-mine.in", slurp(pkg + "/data/sample/lesson-sample2.in")},
      {"data/sample/zz-mine.ans", slurp(pkg + "/data/sample/lesson-sample2.ans")},
      {"data/notes.txt", "notes\n"},
      {"output_validators/helper.h", "// helper\n"},
      {"input_validators/extra.ctd", "INT(1, 3)\n"}};
  for (const auto& [path, text] : added) write(pkg + "/" + path, text);
  const std::string changed_answer = pkg + "/data/secret/001-random-1.ans";
  write(changed_answer, slurp(changed_answer) + "% setter's comment\n");
  const std::string edited = slurp(changed_answer);
  write(pkg + "/problem.yaml", slurp(pkg + "/problem.yaml") + "uuid: 0d3f7a9e-1b2c-4d5e-8f90-123456789abc\n"
                                                             "license: cc by-sa\nname: The attention problem\n");
  const auto again = run_attncheck("package --problem ai006 --out " + pkg + " --tests 2 --seed 1 --no-submissions", "");
  ASSERT_EQ(again.status, 0) << again.err;
  for (const auto& [path, text] : added) {
    EXPECT_EQ(slurp(pkg + "/" + path), text) << path;
    EXPECT_NE(again.out.find("kept: " + path + " (added by you)"), std::string::npos) << again.out;
  }
  EXPECT_EQ(slurp(changed_answer), edited);
  EXPECT_NE(again.out.find("kept: data/secret/001-random-1.ans (changed since attncheck wrote it"), std::string::npos)
      << again.out;
  const std::string yaml = slurp(pkg + "/problem.yaml");
  EXPECT_NE(yaml.find("uuid: 0d3f7a9e-1b2c-4d5e-8f90-123456789abc\nlicense: cc by-sa\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("validation: custom\n"), std::string::npos) << yaml;
  EXPECT_NE(again.out.find("kept: problem.yaml key 'name'"), std::string::npos) << again.out;  // two names: theirs
  EXPECT_FALSE(fs::exists(pkg + "/data/secret/004-random-4.in"));  // attncheck's, unchanged: gone with --tests 2
  EXPECT_TRUE(fs::exists(pkg + "/data/secret/002-edge-2.ans"));
  // --force: the changed answer is attncheck's again; the setter's own files stay.
  const auto forced =
      run_attncheck("package --problem ai006 --out " + pkg + " --tests 2 --seed 1 --force --no-submissions", "");
  ASSERT_EQ(forced.status, 0) << forced.err;
  EXPECT_EQ(slurp(changed_answer).find("% setter's comment"), std::string::npos);
  for (const auto& [path, text] : added) EXPECT_EQ(slurp(pkg + "/" + path), text) << path;
  EXPECT_NE(slurp(pkg + "/problem.yaml").find("uuid: 0d3f7a9e"), std::string::npos);
  EXPECT_NE(forced.out.find("replaced (--force): data/secret/001-random-1.ans"), std::string::npos) << forced.out;
  // The package still certifies.
  EXPECT_EQ(run_attncheck("certify --problem ai006 " + pkg, "").status, 0);

  // Never through a symbolic link (a file or a folder of the package pointing elsewhere), never over
  // a file the setter put at a path of attncheck's, not even with --force (review of the write).
  const std::string victim = write(dir.path() + "/victim.txt", "PRECIOUS\n");
  fs::remove(pkg + "/data/secret/001-random-1.ans");
  fs::create_symlink(victim, pkg + "/data/secret/001-random-1.ans");
  const std::string elsewhere = dir.path() + "/elsewhere";
  fs::create_directory(elsewhere);
  write(elsewhere + "/001-random-1.in", "MINE\n");
  fs::rename(pkg + "/data/sample", dir.path() + "/old-sample");
  fs::create_directory_symlink(elsewhere, pkg + "/data/sample");
  const std::string own_path = pkg + "/data/secret/003-max-3.in";
  write(own_path, "the setter's\n");
  const auto linked = run_attncheck("package --problem ai006 --out " + pkg + " --tests 3 --seed 1 --force --no-submissions", "");
  ASSERT_EQ(linked.status, 0) << linked.err;
  EXPECT_EQ(slurp(victim), "PRECIOUS\n");
  EXPECT_EQ(slurp(elsewhere + "/001-random-1.in"), "MINE\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(elsewhere), fs::directory_iterator{}), 1);
  EXPECT_EQ(slurp(own_path), "the setter's\n");
  EXPECT_NE(linked.out.find("kept: data/secret/001-random-1.ans (a symbolic link"), std::string::npos) << linked.out;
  EXPECT_NE(linked.out.find("kept: data/secret/003-max-3.in (not written by attncheck"), std::string::npos) << linked.out;
}

// A test name with a space survives the record: regenerating replaces attncheck's own files of that
// name and never takes a setter's file named like its first word for one of them.
TEST(PackageCommand, RegenerationRecordsNamesWithSpaces) {
  TempDir dir;
  const std::string mine = dir.path() + "/mine", pkg = dir.path() + "/pkg";
  fs::create_directory(mine);
  write(mine + "/my test.in", "1 1 1\n1\n1\n-0.005\n1\n");
  const std::string args = "package --problem ai031 --no-submissions --tests 0 --add-tests " + mine + " --out " + pkg;
  ASSERT_EQ(run_attncheck(args, "").status, 0);
  write(pkg + "/data/secret/my", "SETTER\n");
  const auto again = run_attncheck(args + " --force", "");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(slurp(pkg + "/data/secret/my"), "SETTER\n");
  EXPECT_TRUE(fs::exists(pkg + "/data/secret/my test.ans"));
  EXPECT_EQ(again.out.find("my test.in (not written"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("kept: data/secret/my (added by you)"), std::string::npos) << again.out;
}

// submissions/: the reference solutions accepted, each wrong solution of the lesson under the
// verdict a judge gives it on the packaged tests (found by running it), the catching test named.
TEST(PackageCommand, SubmissionsAreFiledByTheVerdictTheyGet) {
  TempDir dir;
  const std::string pkg = dir.path() + "/ai006";
  const auto made = run_attncheck("package --problem ai006 --out " + pkg + " --tests 3 --seed 1", "");
  ASSERT_EQ(made.status, 0) << made.err;
  for (const char* file : {"submissions/accepted/reference.cpp", "submissions/accepted/reference.py",
                           "submissions/wrong_answer/causal_off_by_one.py", "submissions/wrong_answer/double_rounding.py",
                           "submissions/run_time_error/no_max_subtraction.py"}) {
    EXPECT_TRUE(fs::exists(pkg + "/" + file)) << file << "\n" << made.out;
  }
  EXPECT_NE(made.out.find("submissions/wrong_answer/causal_off_by_one.py: caught by sample/lesson-3x2-causal"),
            std::string::npos)
      << made.out;
  // DOMjudge's time limit, from the accepted solution's slowest run (problemtools derives its own).
  EXPECT_EQ(slurp(pkg + "/domjudge-problem.ini").rfind("timelimit = ", 0), 0u);
  // A wrong solution is one program (no import of the reference), runnable as it stands.
  const std::string wrong = slurp(pkg + "/submissions/wrong_answer/double_rounding.py");
  EXPECT_EQ(wrong.find("import ai006_reference"), std::string::npos);
  EXPECT_NE(wrong.find("FORMAT = double_round"), std::string::npos);
  // --no-submissions leaves the folder out.
  const std::string bare = dir.path() + "/bare";
  ASSERT_EQ(run_attncheck("package --problem ai031 --out " + bare + " --tests 1 --no-submissions", "").status, 0);
  EXPECT_FALSE(fs::exists(bare + "/submissions"));
}

// The two icpc formats: legacy (problem_statement/problem.en.tex, output_validators/, validation:
// custom) and 2023-07 (statement/problem.en.md, output_validator/, a uuid that survives
// regeneration, license and credits from the flags); a license other than unknown or public
// domain needs an author, the rights owner.
TEST(PackageCommand, LegacyAnd2023FormatsWithStatementAndLicense) {
  TempDir dir;
  const std::string legacy = dir.path() + "/legacy", modern = dir.path() + "/modern";
  ASSERT_EQ(run_attncheck("package --no-submissions --problem ai031 --out " + legacy +
                              " --tests 2 --license 'cc by-sa' --author 'A. Setter'",
                          "")
                .status,
            0);
  const std::string tex = slurp(legacy + "/problem_statement/problem.en.tex");
  EXPECT_EQ(tex.rfind("\\problemname{Masked Multi-Head Attention}", 0), 0u) << tex;
  EXPECT_NE(tex.find("\\sqrt{d/h}"), std::string::npos);
  EXPECT_NE(tex.find("at most 10 digits after the point"), std::string::npos);
  const std::string yaml = slurp(legacy + "/problem.yaml");
  EXPECT_NE(yaml.find("validation: custom\nlicense: cc by-sa\nauthor: A. Setter\n"), std::string::npos) << yaml;
  EXPECT_TRUE(fs::exists(legacy + "/output_validators/check.cpp"));

  const std::string flags = " --tests 2 --format icpc-2023 --license 'cc by' --author 'A. Setter' --no-submissions";
  ASSERT_EQ(run_attncheck("package --problem ai006 --out " + modern + flags, "").status, 0);
  const std::string first = slurp(modern + "/problem.yaml");
  EXPECT_NE(first.find("problem_format_version: 2023-07\nname: Causal Attention\nuuid: "), std::string::npos) << first;
  EXPECT_EQ(first.find("validation:"), std::string::npos) << first;  // 2023-07 has no such key
  EXPECT_NE(first.find("credits: A. Setter\nrights_owner: A. Setter\n"), std::string::npos) << first;
  EXPECT_TRUE(fs::exists(modern + "/output_validator/check.cpp"));
  EXPECT_FALSE(fs::exists(modern + "/output_validators"));
  EXPECT_NE(slurp(modern + "/statement/problem.en.md").find("## Input"), std::string::npos);
  ASSERT_EQ(run_attncheck("package --problem ai006 --out " + modern + flags, "").status, 0);
  EXPECT_EQ(slurp(modern + "/problem.yaml"), first);  // the same uuid
  EXPECT_EQ(run_attncheck("certify --problem ai006 " + modern, "").status, 0);

  const auto ownerless = run_attncheck("package --problem ai006 --out " + dir.path() + "/x --license cc0", "");
  EXPECT_EQ(ownerless.status, 1);
  EXPECT_NE(ownerless.err.find("--license 'cc0' needs --author"), std::string::npos) << ownerless.err;
}

// Tallies a run of comparisons and prints it.
struct Tally {
  const char* what;
  std::size_t cases = 0, through_cli = 0, kattis = 0, mismatches = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  void print() const {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "%s: %zu cases, identical verdict, message and exit code on all but %zu; %zu also through the "
        "attncheck process (testlib), %zu in the Kattis convention; %.1f s\n",
        what, cases, mismatches, through_cli, kattis, seconds);
  }
};

TEST(PortableEquivalence, CheckerGivesTheVerdictsOfCheck) {
  TempDir dir;
  // general packages the lesson's examples through --add-tests (--tests 0).
  std::map<std::string, Portable> portable =
      build_portable(dir,
                     {{"ai006", "--tests 2"},
                      {"ai031", "--tests 2"},
                      {"general", "--tests 0 --add-tests " + kSource + "/corpus/samples/general"}},
                     true);
  const std::string scratch = dir.path(), feedback = dir.path() + "/feedback";
  fs::create_directory(feedback);
  Tally tally{"checker"};
  std::map<std::string, std::size_t> by_source, by_verdict;

  // One case: the portable checker against the library's check_output (what `attncheck check`
  // runs), and on every 10th case the attncheck process itself in both conventions.
  auto compare = [&](const std::string& problem, const std::string& in, const std::string& ans,
                     const verify::Certificate& certificate, const std::string& output, const std::string& source) {
    const std::string out = write(scratch + "/out", output);
    const std::string answer = slurp(ans);
    const verify::Verdict verdict =
        verify::check_output(certificate, verify::without_section_echo(output, verify::split_answer(answer).section));
    const bool accepted = verdict.kind == verify::VerdictKind::ok || verdict.kind == verify::VerdictKind::acceptable;
    const int status = accepted ? 0 : verdict.kind == verify::VerdictKind::wrong_answer ? 1 : 2;
    const std::string line = std::string(verify::verdict_name(verdict.kind)) + ": " + verdict.message + "\n";
    ++by_verdict[std::string(verify::verdict_name(verdict.kind))];
    const Exit got = run({portable[problem].check, in, out, ans}, "/dev/null", scratch);
    const bool same = got.status == status && got.err == line;
    if (!same && ++tally.mismatches <= 5) {
      ADD_FAILURE() << source << " (" << problem << "): portable " << got.status << " " << got.err << "library "
                    << status << " " << line << "output:\n"
                    << output;
    }
    if (tally.cases % 10 == 0) {
      ++tally.through_cli;
      const Exit cli = run({ATTNCHECK_BINARY, "check", "--problem", problem, in, out, ans}, "/dev/null", scratch);
      EXPECT_EQ(cli.status, got.status) << source;
      EXPECT_EQ(cli.err, got.err) << source;
    }
    if (tally.cases % 10 == 5) {
      ++tally.kattis;
      const Exit kattis = run({portable[problem].check, in, ans, feedback}, out, scratch);
      const std::string message = slurp(feedback + "/judgemessage.txt");
      const Exit cli =
          run({ATTNCHECK_BINARY, "check", "--problem", problem, "--kattis", in, ans, feedback}, out, scratch);
      EXPECT_EQ(kattis.status, accepted ? 42 : 43) << source;
      EXPECT_EQ(cli.status, kattis.status) << source;
      EXPECT_EQ(slurp(feedback + "/judgemessage.txt"), message) << source;
      EXPECT_EQ(message, line) << source;
    }
    ++tally.cases;
    ++by_source[source];
  };
  // An instance's input and certified answer files, and its certificate.
  auto prepare = [&](const std::string& problem, const Instance& instance, const std::string& stem) {
    const verify::Certificate certificate = verify::certify(instance);
    write(scratch + "/" + stem + ".in", write_instance(instance));
    write(scratch + "/" + stem + ".ans", verify::answer_text(certificate, problem));
    return certificate;
  };

  // 1. The rounding traps and the checker fuzz target's instances, each with every mutation.
  std::size_t trap_index = 0;
  for (const testing_support::Trap& trap : testing_support::kTraps) {
    const Problem problem = *problem_from_name(trap.problem);
    const Instance instance = read_instance(trap.input, problem, default_limits(problem)).value();
    const std::string stem = "trap" + std::to_string(trap_index++);
    const verify::Certificate certificate = prepare(trap.problem, instance, stem);
    const std::string correct = format_solution(instance, solve(instance));
    std::mt19937_64 rng(trap_index);
    for (int kind = 0; kind < testing_support::kMutationKinds; ++kind) {
      compare(trap.problem, scratch + "/" + stem + ".in", scratch + "/" + stem + ".ans", certificate,
              testing_support::mutate(correct, certificate, scratch + "/" + stem + ".ans", kind, rng),
              "rounding traps");
    }
  }
  // 2. The checker fuzz corpus: byte 0 picks the instance (fuzz/checker.cpp), the rest is output.
  std::vector<verify::Certificate> fuzz_certificates;
  for (std::size_t k = 0; k < testing_support::kFuzzCases.size(); ++k) {
    const auto& [name, input] = testing_support::kFuzzCases[k];
    const Problem problem = *problem_from_name(name);
    fuzz_certificates.push_back(
        prepare(name, read_instance(input, problem, default_limits(problem)).value(), "fuzz" + std::to_string(k)));
  }
  std::vector<fs::path> corpus;
  for (const auto& entry : fs::directory_iterator(kSource + "/corpus/checker")) corpus.push_back(entry.path());
  std::sort(corpus.begin(), corpus.end());
  for (const fs::path& path : corpus) {
    const std::string bytes = slurp(path.string());
    if (bytes.empty()) continue;
    const std::size_t k = static_cast<unsigned char>(bytes[0]) % testing_support::kFuzzCases.size();
    const std::string stem = scratch + "/fuzz" + std::to_string(k);
    compare(testing_support::kFuzzCases[k].first, stem + ".in", stem + ".ans", fuzz_certificates[k], bytes.substr(1),
            "checker fuzz corpus");
  }
  // 3. Stress: 1000 outputs of the production solver (a correct program) and of wrong programs
  // (its output mutated), on generated instances and the packages' own tests.
  constexpr int kStressOutputs = 1000;
  const std::uint64_t seed = 2024;
  std::mt19937_64 rng(seed);
  std::printf("stress outputs: seed %llu\n", static_cast<unsigned long long>(seed));
  for (int k = 0; by_source["stress"] < kStressOutputs; ++k) {
    const std::string problem = k % 2 == 0 ? "ai006" : "ai031";
    const Problem id = *problem_from_name(problem);
    verify::GenOptions options = verify::gen_options(id, k % 4 < 2 ? verify::Profile::edge : verify::Profile::random);
    options.limits.max_n = 10;  // the oracle under ASan: small instances, many of them
    options.limits.max_m = 10;
    options.limits.max_d = 8;
    const Instance instance = verify::sample_instance(options, seed + k);
    const verify::Certificate certificate = prepare(problem, instance, "stress");
    const std::string correct = format_solution(instance, solve(instance));
    for (int j = 0; j < 20 && by_source["stress"] < kStressOutputs; ++j) {
      const int kind = static_cast<int>(rng() % testing_support::kMutationKinds);
      compare(problem, scratch + "/stress.in", scratch + "/stress.ans", certificate,
              testing_support::mutate(correct, certificate, scratch + "/stress.ans", kind, rng), "stress");
    }
  }
  for (const auto& [problem, tools] : portable) {
    for (const auto& entry : fs::recursive_directory_iterator(tools.package + "/data")) {
      if (entry.path().extension() != ".in") continue;
      fs::path ans = entry.path();
      ans.replace_extension(".ans");
      const Problem id = *problem_from_name(problem);
      const Instance instance = read_instance(slurp(entry.path().string()), id, default_limits(id)).value();
      const verify::Certificate certificate = verify::certify(instance);
      const std::string correct = format_solution(instance, solve(instance));
      compare(problem, entry.path().string(), ans.string(), certificate, correct, "package tests");
      compare(problem, entry.path().string(), ans.string(), certificate, slurp(ans.string()), "package tests");
      // Samples' answers hold no section (the checker keeps it): their wrong outputs are judged too.
      for (int kind = 0; kind < testing_support::kMutationKinds; ++kind) {
        compare(problem, entry.path().string(), ans.string(), certificate,
                testing_support::mutate(correct, certificate, ans.string(), kind, rng), "package tests");
      }
    }
  }
  for (const auto& [source, count] : by_source) std::printf("  %s: %zu\n", source.c_str(), count);
  for (const auto& [verdict, count] : by_verdict) std::printf("  verdict %s: %zu\n", verdict.c_str(), count);
  tally.print();
  EXPECT_EQ(tally.mismatches, 0u);
  EXPECT_EQ(by_source["stress"], static_cast<std::size_t>(kStressOutputs));
}

TEST(PortableEquivalence, ValidatorGivesTheVerdictsOfValidate) {
  TempDir dir;
  std::map<std::string, Portable> portable =
      build_portable(dir, {{"ai006", "--tests 1"}, {"ai031", "--tests 1"}, {"general", "--tests 1"}}, false);
  const std::string scratch = dir.path();
  Tally tally{"validator"};
  std::size_t valid = 0, invalid = 0;
  auto compare = [&](const std::string& problem, const std::string& path) {
    const Problem id = *problem_from_name(problem);
    const auto read = read_instance(slurp(path), id, default_limits(id), Strictness::strict);
    const int status = read ? 0 : 1;
    ++(read ? valid : invalid);
    const std::string err = read ? "" : read.error().to_string() + "\n";
    const Exit got = run({portable[problem].validate, "--testlib"}, path, scratch);
    if ((got.status != status || got.err != err) && ++tally.mismatches <= 5) {
      ADD_FAILURE() << path << " (" << problem << "): portable " << got.status << " " << got.err << "library " << status
                    << " " << err;
    }
    if (tally.cases % 10 == 0) {
      ++tally.through_cli;
      const Exit cli = run({ATTNCHECK_BINARY, "validate", "--problem", problem}, path, scratch);
      EXPECT_EQ(cli.status, got.status) << path;
      EXPECT_EQ(cli.err, got.err) << path;
    }
    if (tally.cases % 10 == 5) {
      ++tally.kattis;
      const Exit kattis = run({portable[problem].validate}, path, scratch);  // icpc: 42 / 43 by default
      const Exit cli = run({ATTNCHECK_BINARY, "validate", "--problem", problem, "--kattis"}, path, scratch);
      EXPECT_EQ(kattis.status, status == 0 ? 42 : 43) << path;
      EXPECT_EQ(cli.status, kattis.status) << path;
      EXPECT_EQ(cli.err, kattis.err) << path;
    }
    ++tally.cases;
  };
  auto files = [](const std::string& folder) {
    std::vector<std::string> paths;
    for (const auto& entry : fs::directory_iterator(folder)) paths.push_back(entry.path().string());
    std::sort(paths.begin(), paths.end());
    return paths;
  };
  for (const std::string& path : files(kSource + "/corpus/strict_validator")) {
    for (const char* problem : {"ai006", "ai031", "general"}) compare(problem, path);
  }
  for (const char* problem : {"ai006", "ai031", "general"}) {
    for (const std::string& path : files(kSource + "/corpus/reader_" + std::string(problem))) compare(problem, path);
    for (const std::string& path : files(kSource + "/corpus/samples/" + std::string(problem))) compare(problem, path);
    // Each sample input broken one way at a time (testing_support::break_input).
    std::size_t variant = 0;
    for (const std::string& path : files(kSource + "/corpus/samples/" + std::string(problem))) {
      if (fs::path(path).extension() != ".in") continue;
      for (const std::string& broken : testing_support::broken_inputs(slurp(path))) {
        compare(problem, write(scratch + "/broken-" + std::to_string(variant++), broken));
      }
    }
  }
  std::printf("  valid %zu, invalid %zu\n", valid, invalid);
  tally.print();
  EXPECT_EQ(tally.mismatches, 0u);
}

}  // namespace
}  // namespace attn
