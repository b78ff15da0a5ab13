// The campaign as JUnit XML, the report format CI systems (GitLab, Jenkins, GitHub test
// reporters) read: one <testsuite> per stage, holding a <testcase> for the stage itself and one
// per run the stage lists (each property run).
#pragma once

#include <string>

#include "campaign/campaign.hpp"

namespace attn::verify {

/// The JUnit XML document for `report`; `seconds` is the whole campaign's wall time.
[[nodiscard]] std::string junit_xml(const CampaignReport& report, double seconds);

/// `text` with the five XML special characters escaped, and every character XML 1.0 forbids
/// (control characters other than tab, newline and carriage return) replaced by '?'.
[[nodiscard]] std::string xml_escape(const std::string& text);

}  // namespace attn::verify
