// attncheck: one binary, one subcommand per job (see --help).
#include <cstdio>
#include <exception>

#include "common.hpp"

int main(int argc, char** argv) {
  using namespace attn::cli;
  CLI::App app{"attncheck: a verification harness for attention (softmax(Q·Kᵀ/scale)·V)"};
  app.require_subcommand(1);
  app.footer("Problems: ai006 (causal single head, 4 decimals), ai031 (masked multi-head, 2 decimals),\n"
             "general (see README). 'attncheck COMMAND --help' describes each command.\n");
  Commands commands;
  register_solve(app, commands);
  register_validate(app, commands);
  register_verify(app, commands);
  register_oracle(app, commands);
  register_check(app, commands);
  register_certify(app, commands);
  register_gen(app, commands);
  register_stress(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int status = app.exit(error);
    // Usage errors exit 2; a checker's caller reads 3 (FAIL) in testlib's convention.
    if (status == 0) return 0;
    for (const auto* sub : app.get_subcommands()) {
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
