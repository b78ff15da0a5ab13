#include "campaign/rapidcheck_runner.hpp"

#include <rapidcheck.h>
#include <rapidcheck/detail/Configuration.h>

#include <sstream>

namespace attn::verify {

std::uint64_t configured_seed() { return rc::detail::configuration().testParams.seed; }

RunOutcome run_property(const std::function<void()>& body, const RunSettings& settings) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  if (settings.seed) params.seed = *settings.seed;
  if (settings.cases) params.maxSuccess = *settings.cases;
  if (settings.shrink) params.disableShrinking = !*settings.shrink;
  rc::detail::TestMetadata metadata;
  metadata.id = settings.id;
  metadata.description = settings.id;
  // This overload reports to RapidCheck's global listener, which prints the reproduce strings of
  // failed runs with an id at exit, as RC_GTEST_PROP does.
  const rc::detail::TestResult result = rc::detail::checkTestable(body, metadata, params);

  RunOutcome outcome;
  std::ostringstream message;
  if (result.is<rc::detail::SuccessResult>()) {
    const auto& success = result.get<rc::detail::SuccessResult>();
    outcome.cases = success.numSuccess;
    // Only worth printing when the property tagged its cases (RC_TAG, RC_CLASSIFY).
    if (!success.distribution.empty()) rc::detail::printResultMessage(result, message);
  } else {
    rc::detail::printResultMessage(result, message);
    if (result.is<rc::detail::FailureResult>()) {
      outcome.verdict = RunVerdict::failed;
      outcome.cases = result.get<rc::detail::FailureResult>().numSuccess + 1;
    } else if (result.is<rc::detail::GaveUpResult>()) {
      outcome.verdict = RunVerdict::gave_up;
      outcome.cases = result.get<rc::detail::GaveUpResult>().numSuccess;
    } else {
      outcome.verdict = RunVerdict::error;
    }
  }
  outcome.message = message.str();
  return outcome;
}

}  // namespace attn::verify
