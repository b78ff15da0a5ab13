// attncheck: one binary, one subcommand per job (see --help).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iterator>
#include <string_view>
#include <utility>

#include "common.hpp"

int main(int argc, char** argv) {
  using namespace attn::cli;
#ifdef ATTNCHECK_CORE_ONLY
  CLI::App app{"attncheck-solve: attncheck's solve and validate alone, without the oracle's libraries"};
#else
  CLI::App app{"attncheck: a verification harness for attention (softmax(Q·Kᵀ/scale)·V)"};
#endif
  app.require_subcommand(1);
  app.footer(
      "Problems: ai006 (causal single head, 4 decimals), ai031 (masked multi-head, 2 decimals),\n"
      "general (see README). 'attncheck COMMAND --help' describes each command.\n");
  using Register = void (*)(CLI::App&, Commands&);
#ifdef ATTNCHECK_CORE_ONLY
  // attncheck-solve: the production commands alone, linked against attn_core only.
  constexpr std::pair<std::string_view, Register> kCommands[] = {
      {"solve", register_solve},
      {"validate", register_validate},
  };
#else
  constexpr std::pair<std::string_view, Register> kCommands[] = {
      {"solve", register_solve},     {"validate", register_validate}, {"oracle", register_oracle},
      {"check", register_check},     {"gen", register_gen},           {"stress", register_stress},
      {"certify", register_certify}, {"verify", register_verify},     {"package", register_package},
      {"tensor", register_tensor},
  };
#endif
  // Only the command asked for is built: setting up every command's options took most of a small
  // `solve` (1.5M of 2.2M instructions, callgrind). Anything else (--help, a typo) gets them all.
  const std::string_view asked = argc > 1 ? argv[1] : "";
  const bool known =
      std::any_of(std::begin(kCommands), std::end(kCommands), [&](const auto& c) { return c.first == asked; });
  Commands commands;
  for (const auto& [name, add] : kCommands) {
    if (!known || name == asked) add(app, commands);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const auto parsed = app.get_subcommands();
    const bool tensor = !parsed.empty() && parsed.front()->get_name() == "tensor";
    if (tensor && error.get_exit_code() != 0) {  // as `python3 -m attncheck check`: one line, exit 2
      std::fprintf(stderr, "attncheck: usage: %s\n", error.what());
      return 2;
    }
    const int status = app.exit(error);
    // Usage errors exit 2; a checker's caller reads 3 (FAIL) in testlib's convention.
    if (status == 0) return 0;
    for (const auto* sub : parsed) {
      if (sub->get_name() == "check") return 3;
    }
    return 2;
  }
  try {
    for (const Command& command : commands) {
      if (command.app->parsed()) return command.run();
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "attncheck: internal error: %s\n", error.what());
    return 3;
  }
  return 2;
}
