// attncheck solve / validate: the production solver and the strict input validator.
#include <cstdio>
#include <memory>

#include "common.hpp"
#include "instance_io.hpp"
#include "solve.hpp"

namespace attn::cli {

void register_solve(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<ProblemOptions>();
  auto input = std::make_shared<std::string>("-");
  auto* command = app.add_subcommand("solve", "Solve a judge input with the production kernel (stdin -> stdout)");
  add_problem_options(*command, *options);
  command->add_option("input", *input, "input file (default: stdin)");
  command->footer(
      "Reads leniently (any whitespace, CR/LF) and prints the answer with the problem's decimals.\n"
      "Bad input: exit 1, nothing on stdout, 'line L, column C: ...' on stderr.\n");
  commands.push_back({command, [options, input]() -> int {
                        const auto setup = resolve_problem(*options);
                        if (!setup) return fail(setup.error(), 1);
                        const auto text = read_input(*input);
                        if (!text) return fail(text.error(), 1);
                        const auto instance = read_instance(*text, setup->problem, setup->limits);
                        if (!instance) {
                          std::fprintf(stderr, "%s\n", instance.error().to_string().c_str());
                          return 1;
                        }
                        const Solution solution = solve(instance.value());
                        const auto written = write_stdout(format_solution(instance.value(), solution));
                        return written ? 0 : fail(written.error(), 1);
                      }});
}

void register_validate(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<ProblemOptions>();
  auto input = std::make_shared<std::string>("-");
  auto kattis = std::make_shared<bool>(false);
  auto* command = app.add_subcommand("validate", "Check that an input file is strictly well-formed (testlib-strict)");
  add_problem_options(*command, *options);
  command->add_option("input", *input, "input file (default: stdin)");
  command->add_flag("--kattis", *kattis, "Kattis/DOMjudge input validator exit codes: 42 valid, 43 invalid");
  command->footer(
      "Strict: single spaces, LF line ends, a final newline, no blank lines or trailing spaces,\n"
      "canonical decimals -?(0|[1-9][0-9]*)(.[0-9]+)? (no '+', exponent or '-0'), integer headers.\n"
      "Exit 0 valid / 1 invalid (42 / 43 with --kattis); the reason goes to stderr.\n");
  commands.push_back({command, [options, input, kattis]() -> int {
                        const int valid = *kattis ? 42 : 0;
                        const int invalid = *kattis ? 43 : 1;
                        const auto setup = resolve_problem(*options);
                        if (!setup) return fail(setup.error(), invalid);
                        const auto text = read_input(*input);
                        if (!text) return fail(text.error(), invalid);
                        const auto instance = read_instance(*text, setup->problem, setup->limits, Strictness::strict);
                        if (!instance) {
                          std::fprintf(stderr, "%s\n", instance.error().to_string().c_str());
                          return invalid;
                        }
                        return valid;
                      }});
}

}  // namespace attn::cli
