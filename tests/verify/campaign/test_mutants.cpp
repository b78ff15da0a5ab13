// The meta-test: the property suite fails on every mutant (naming the property that caught it)
// and passes on the production kernel and on an independent online-softmax implementation.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "campaign/properties.hpp"
#include "mutants.hpp"

namespace attn::verify {
namespace {

// A fixed seed keeps the meta-test deterministic; RC_PARAMS="seed=N" overrides it.
CheckOptions meta_options() {
  CheckOptions options;
  options.cases = 100;
  options.seed = std::getenv("RC_PARAMS") ? 0 : 20261129;
  options.stop_at_first_failure = true;
  options.shrink = false;
  return options;
}

TEST(MutantZoo, EveryMutantIsCaught) {
  std::printf("%-36s %-32s %-8s %s\n", "mutant", "caught by", "problem", "cases");
  for (Bug bug : all_bugs()) {
    const Mutant mutant(bug);
    const CheckReport report = check_implementation(mutant, meta_options());
    const PropertyOutcome* failure = report.first_failure();
    ASSERT_NE(failure, nullptr) << "the property suite missed the mutant '" << mutant.name() << "' (seed "
                                << report.seed << ")";
    std::printf("%-36s %-32s %-8s %d\n", mutant.name().c_str(), failure->property.c_str(),
                std::string(problem_name(failure->problem)).c_str(), failure->cases);
  }
}

TEST(MutantZoo, CorrectImplementationsPassEverything) {
  CheckOptions options = meta_options();
  options.stop_at_first_failure = false;
  options.shrink = true;
  const ProductionKernel production;
  const OnlineSoftmaxKernel online;
  const FlashKernel flash;
  for (const Implementation* implementation :
       {static_cast<const Implementation*>(&production), static_cast<const Implementation*>(&online),
        static_cast<const Implementation*>(&flash)}) {
    const CheckReport report = check_implementation(*implementation, options);
    for (const PropertyOutcome& outcome : report.outcomes) {
      EXPECT_TRUE(outcome.passed) << implementation->name() << " fails " << outcome.property << " on "
                                  << problem_name(outcome.problem) << " (seed " << report.seed << "):\n"
                                  << outcome.failure;
    }
  }
}

}  // namespace
}  // namespace attn::verify
