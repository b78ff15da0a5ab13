// The property suite against the production kernel: one GoogleTest per registered property
// (properties()) and problem, named Property.Problem (AllMaskedRowIsZero.Ai031), so a property
// gets its tests by being in the registry. A failure prints RapidCheck's seed and reproduce string:
// rerun with RC_PARAMS="seed=N" (or RC_PARAMS="reproduce=...") and --gtest_filter=Name.Problem.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <string>

#include "campaign/generators.hpp"
#include "campaign/properties.hpp"
#include "campaign/rapidcheck_runner.hpp"
#include "instance_io.hpp"

namespace attn::verify {
namespace {

// "Ai006" for ai006: the GoogleTest name of a problem's test.
std::string test_name(Problem problem) {
  std::string name(problem_name(problem));
  name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  return name;
}

// One property on one problem's instances against the production kernel.
class PropertyTest : public testing::Test {
 public:
  PropertyTest(const Property& property, Problem problem) : property_(property), problem_(problem) {}

  void TestBody() override {
    static const ProductionKernel kernel;
    const GenOptions options = property_gen_options(problem_);
    RunSettings settings;  // everything else from RC_PARAMS, as RC_GTEST_PROP runs
    // "Suite/Name" is the id RC_GTEST_PROP gives a property, so reproduce strings keep working.
    settings.id = std::string(property_.name) + "/" + test_name(problem_);
    const RunOutcome run = run_property([&] { property_.check(kernel, *gen_instance(options)); }, settings);
    if (run.verdict != RunVerdict::passed) FAIL() << run.message;
    if (!run.message.empty()) std::cout << run.message << std::endl;
  }

 private:
  const Property& property_;
  Problem problem_;
};

// Registered during static initialization, as TEST() registers, so that --gtest_list_tests (and
// with it gtest_discover_tests) lists them, and ahead of the tests below, which keeps the order.
[[maybe_unused]] const bool kPropertyTestsRegistered = [] {
  for (const Property& property : properties()) {
    for (Problem problem : CheckOptions{}.problems) {
      testing::RegisterTest(
          property.name, test_name(problem).c_str(), nullptr, nullptr, __FILE__, __LINE__,
          [entry = &property, problem]() -> testing::Test* { return new PropertyTest(*entry, problem); });
    }
  }
  return true;
}();

// Each property has exactly one test per problem under a suite of its own name, and that name is
// an identifier: '.' or '/' in it would break --gtest_filter=Name.Problem and reproduce ids.
TEST(PropertyList, EveryPropertyHasASuiteHere) {
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  for (const Property& property : properties()) {
    const std::string name = property.name;
    const auto alphanumeric = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    EXPECT_TRUE(!name.empty() && std::all_of(name.begin(), name.end(), alphanumeric))
        << "property name '" << name << "'";
    for (Problem problem : CheckOptions{}.problems) {
      int registered = 0;
      for (int s = 0; s < unit.total_test_suite_count(); ++s) {
        const testing::TestSuite& suite = *unit.GetTestSuite(s);
        if (suite.name() != name) continue;
        for (int t = 0; t < suite.total_test_count(); ++t) {
          registered += suite.GetTestInfo(t)->name() == test_name(problem) ? 1 : 0;
        }
      }
      EXPECT_EQ(registered, 1) << name << "." << test_name(problem);
    }
  }
}

// serialize(instance) -> parse -> the same instance, and the text is strict-valid.
RC_GTEST_PROP(ReaderRoundTrip, AllProblems, ()) {
  const Problem problem = *rc::gen::element(Problem::ai006, Problem::ai031, Problem::general);
  const Instance instance = *gen_instance(property_gen_options(problem));
  const std::string text = write_instance(instance);
  const auto again = read_instance(text, problem, property_gen_options(problem).limits, Strictness::strict);
  RC_ASSERT(again.ok());
  RC_ASSERT(again.value() == instance);
}

// Generated instances respect the problem's own default limits, for every profile.
RC_GTEST_PROP(Generators, StayWithinTheProblemLimits, ()) {
  const Problem problem = *rc::gen::element(Problem::ai006, Problem::ai031);
  const Profile profile = *rc::gen::element(Profile::random, Profile::edge, Profile::max);
  const Instance instance = *gen_instance(gen_options(problem, profile));
  RC_ASSERT(read_instance(write_instance(instance), problem, default_limits(problem), Strictness::strict).ok());
  if (profile == Profile::max) RC_ASSERT(instance.n == default_limits(problem).max_n);
}

TEST(Generators, SameSeedSameInstance) {
  const GenOptions options = gen_options(Problem::ai031, Profile::edge);
  EXPECT_EQ(write_instance(sample_instance(options, 42)), write_instance(sample_instance(options, 42)));
  bool differs = false;
  for (std::uint64_t seed = 1; seed < 10 && !differs; ++seed) {
    differs = write_instance(sample_instance(options, seed)) != write_instance(sample_instance(options, 42));
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace attn::verify
