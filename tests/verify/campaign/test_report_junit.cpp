// junit_xml: the campaign as JUnit XML (attncheck verify --junit).
#include <gtest/gtest.h>

#include <string>

#include "campaign/report_junit.hpp"

namespace attn::verify {
namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

CampaignReport two_stage_report() {
  CampaignReport report;
  StageResult samples{"samples", true, 1.5, "4 samples, 0 failed", nlohmann::json::object(), {}};
  StageResult properties{"properties", false, 2.25, "2 property runs, 1 failed", nlohmann::json::object(), {}};
  properties.runs.push_back({"weights sum to 1/ai006", true, 0.5, ""});
  properties.runs.push_back({"output <in> band/ai031", false, 1.75, "Falsifiable after 3 tests\nQ = \"1 & 2\"\x01"});
  report.stages = {samples, properties};
  return report;
}

TEST(JunitXml, OneSuitePerStageAndOneCasePerStageAndRun) {
  const std::string xml = junit_xml(two_stage_report(), 3.75);
  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u);
  EXPECT_NE(xml.find("<testsuites name=\"attncheck verify\" tests=\"4\" failures=\"2\" errors=\"0\" time=\"3.750\">"),
            std::string::npos);
  EXPECT_EQ(count(xml, "<testsuite "), 2u);
  EXPECT_EQ(count(xml, "<testcase "), 4u);
  EXPECT_NE(xml.find("<testsuite name=\"properties\" tests=\"3\" failures=\"2\" errors=\"0\" time=\"2.250\">"),
            std::string::npos);
  EXPECT_NE(xml.find("<testcase classname=\"verify.properties\" name=\"weights sum to 1/ai006\" time=\"0.500\"/>"),
            std::string::npos);
  EXPECT_EQ(count(xml, "</testsuites>\n"), 1u);
}

TEST(JunitXml, FailuresCarryTheFirstLineAsMessageAndEverythingEscaped) {
  const std::string xml = junit_xml(two_stage_report(), 0);
  EXPECT_EQ(count(xml, "<failure "), 2u);
  EXPECT_NE(xml.find("name=\"output &lt;in&gt; band/ai031\""), std::string::npos);
  EXPECT_NE(xml.find("<failure message=\"Falsifiable after 3 tests\">Falsifiable after 3 tests\nQ = &quot;1 &amp; "
                     "2&quot;?</failure>"),
            std::string::npos);
  EXPECT_EQ(xml.find('\x01'), std::string::npos);
}

TEST(JunitXml, EscapesEveryXmlSpecialCharacter) {
  EXPECT_EQ(xml_escape("a<b>&\"c'\t\n\r\x1f"), "a&lt;b&gt;&amp;&quot;c&apos;\t\n\r?");
  EXPECT_EQ(xml_escape("plain ü text"), "plain ü text");
}

}  // namespace
}  // namespace attn::verify
