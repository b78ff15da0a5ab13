// The property registry and check_implementation. The properties themselves live in
// properties_exact.cpp (no oracle needed) and properties_banded.cpp (checked against its band).
#include "campaign/properties.hpp"

#include <chrono>

#include "campaign/property_support.hpp"
#include "campaign/rapidcheck_runner.hpp"
#include "result.hpp"

namespace attn::verify {

const std::vector<Property>& properties() {
  // Built on first use rather than at static initialization: test registrations run from static
  // initializers of other translation units and read it then.
  static const std::vector<Property> all = [] {
    std::vector<Property> list = detail::exact_properties();
    const std::vector<Property> banded = detail::banded_properties();
    list.insert(list.end(), banded.begin(), banded.end());
    return list;
  }();
  return all;
}

const Property& property(const std::string& name) {
  for (const Property& p : properties()) {
    if (name == p.name) return p;
  }
  throw ContractError("no property named " + name);
}

GenOptions property_gen_options(Problem problem) {
  GenOptions options = gen_options(problem, Profile::edge);
  // n, m <= 12: the oracle certifies every case, several times for the metamorphic pairs, and the
  // suite runs 100 cases for every property on every problem (10 000 under ctest -L property-long).
  if (problem == Problem::general) options.limits = judge_sized_limits(12);
  options.typical_n = 5;
  options.typical_d = 4;
  return options;
}

bool CheckReport::passed() const { return first_failure() == nullptr; }

const PropertyOutcome* CheckReport::first_failure() const {
  for (const PropertyOutcome& outcome : outcomes) {
    if (!outcome.passed) return &outcome;
  }
  return nullptr;
}

CheckReport check_implementation(const Implementation& implementation, const CheckOptions& options) {
  CheckReport report;
  report.seed = options.seed != 0 ? options.seed : configured_seed();
  RunSettings settings;
  settings.seed = report.seed;
  settings.cases = options.cases;
  settings.shrink = options.shrink;
  for (const Property& p : properties()) {
    for (Problem problem : options.problems) {
      const GenOptions gen = property_gen_options(problem);
      const auto start = std::chrono::steady_clock::now();
      const RunOutcome run = run_property([&] { p.check(implementation, *gen_instance(gen)); }, settings);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // Giving up (too many cases discarded by RC_PRE) passes on the cases it could run.
      const bool passed = run.verdict == RunVerdict::passed || run.verdict == RunVerdict::gave_up;
      report.outcomes.push_back({p.name, problem, passed, run.cases, passed ? "" : run.message, seconds});
      if (options.stop_at_first_failure && !passed) return report;
    }
  }
  return report;
}

}  // namespace attn::verify
