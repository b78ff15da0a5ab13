// property_replay PROPERTY PROBLEM FILE: one property of the suite on one fixed instance (the
// input behind a finding), against the production kernel, for 200 cases of the property's own
// random choices (a scaling power, a permutation, ...). Exit 0 when it holds, 1 when it fails
// (RapidCheck's report on stderr), 2 on a usage error or an unreadable or invalid instance.
// The regression tests of tests/regressions/property.<Name>/ run it (tests/CMakeLists.txt).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "campaign/implementation.hpp"
#include "campaign/properties.hpp"
#include "campaign/rapidcheck_runner.hpp"
#include "instance_io.hpp"
#include "result.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: property_replay PROPERTY ai006|ai031|general INSTANCE_FILE\n");
    return 2;
  }
  const std::string name = argv[1];
  const auto problem = attn::problem_from_name(argv[2]);
  if (!problem) {
    std::fprintf(stderr, "property_replay: unknown problem '%s'\n", argv[2]);
    return 2;
  }
  std::ifstream file(argv[3], std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  if (!file) {
    std::fprintf(stderr, "property_replay: cannot read %s\n", argv[3]);
    return 2;
  }
  const auto instance = attn::read_instance(text.str(), *problem, attn::default_limits(*problem));
  if (!instance) {
    std::fprintf(stderr, "property_replay: %s: %s\n", argv[3], instance.error().to_string().c_str());
    return 2;
  }
  const attn::verify::Property* property = nullptr;
  try {
    property = &attn::verify::property(name);
  } catch (const attn::ContractError&) {
    std::fprintf(stderr, "property_replay: no property '%s' (see verify/campaign/properties.cpp)\n", name.c_str());
    return 2;
  }
  attn::verify::RunSettings settings;
  settings.seed = 1;
  settings.cases = 200;
  const attn::verify::ProductionKernel kernel;
  const attn::verify::RunOutcome run =
      attn::verify::run_property([&] { property->check(kernel, instance.value()); }, settings);
  if (run.verdict == attn::verify::RunVerdict::passed) {
    std::printf("%s holds on %s (%d cases)\n", name.c_str(), argv[3], run.cases);
    return 0;
  }
  const bool gave_up = run.verdict == attn::verify::RunVerdict::gave_up;
  std::fprintf(stderr, "%s %s on %s:\n%s\n", name.c_str(),
               gave_up ? "gave up (its precondition rejects this instance)" : "FAILED", argv[3], run.message.c_str());
  return 1;
}
