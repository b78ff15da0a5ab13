// Pieces every subcommand shares: problem and limit flags, reading and writing whole files,
// registration. Helpers return a Result; only command bodies print (README, "Error policy").
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "problem.hpp"
#include "result.hpp"

namespace attn::cli {

/// Each subcommand registers itself with the app and leaves a function that runs it and returns
/// the process exit status.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using Commands = std::vector<Command>;

/// --problem and the limit flags (--max-n, --max-d, --max-abs, ...), unset means "the problem's default".
struct ProblemOptions {
  std::string problem;
  std::optional<std::size_t> max_n, max_m, max_d, max_heads, max_batch;
  std::optional<int> max_decimals;
  std::optional<std::size_t> max_fraction_digits;
  std::optional<std::string> max_abs, max_abs_qk, max_abs_v;
};

/// Adds --problem (required) and the limit flags to a subcommand.
void add_problem_options(CLI::App& command, ProblemOptions& options);

/// A checked problem with its limits.
struct ProblemSetup {
  Problem problem;
  Limits limits;
};

/// Resolves --problem and the limits; the error names the flag and the accepted range.
[[nodiscard]] Result<ProblemSetup, Error> resolve_problem(const ProblemOptions& options);

/// Whole contents of a file ("-" is stdin); the error names the path and the reason.
[[nodiscard]] Result<std::string, Error> read_input(const std::string& path);

/// Writes all of text to stdout and flushes; the error says why it could not.
[[nodiscard]] Result<Ok, Error> write_stdout(std::string_view text);

/// Writes text to a file (created or replaced), checking every step through the close; the error
/// names the path and the reason (a full disk or a read-only folder is an error, never a success).
[[nodiscard]] Result<Ok, Error> write_file(const std::string& path, std::string_view text);

/// Creates a directory and its parents when missing; the error names the path and the reason.
[[nodiscard]] Result<Ok, Error> make_directories(const std::string& path);

/// Command bodies: prints "attncheck: <message>" on stderr and returns `status`.
int fail(const Error& error, int status);

/// The subcommands, each in its own file.
void register_solve(CLI::App& app, Commands& commands);
void register_validate(CLI::App& app, Commands& commands);
void register_verify(CLI::App& app, Commands& commands);
void register_oracle(CLI::App& app, Commands& commands);
void register_check(CLI::App& app, Commands& commands);
void register_certify(CLI::App& app, Commands& commands);
void register_gen(CLI::App& app, Commands& commands);
void register_stress(CLI::App& app, Commands& commands);
void register_package(CLI::App& app, Commands& commands);
void register_tensor(CLI::App& app, Commands& commands);

/// How a package checker's settings hold a sample's certificate section: {"HASH", R"attncheck(...)attncheck"}
/// (package writes it, oracle reads it back).
inline constexpr std::string_view kSectionOpen = "R\"attncheck(", kSectionClose = ")attncheck\"";

}  // namespace attn::cli
