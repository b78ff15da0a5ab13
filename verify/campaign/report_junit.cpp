#include "campaign/report_junit.hpp"

#include <cstddef>
#include <cstdio>

namespace attn::verify {
namespace {

std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", seconds);
  return text;
}

void append_case(std::string& out, const std::string& classname, const std::string& name, bool passed, double seconds,
                 const std::string& message, const std::string& detail) {
  out += "    <testcase classname=\"" + xml_escape(classname) + "\" name=\"" + xml_escape(name) + "\" time=\"" +
         seconds_text(seconds) + "\"";
  if (passed) {
    out += "/>\n";
    return;
  }
  out += ">\n      <failure message=\"" + xml_escape(message) + "\">" + xml_escape(detail) +
         "</failure>\n    </testcase>\n";
}

// Failed testcases of a stage: the stage's own and its runs'.
std::size_t failures_of(const StageResult& stage) {
  std::size_t failures = stage.passed ? 0 : 1;
  for (const StageRun& run : stage.runs) failures += run.passed ? 0 : 1;
  return failures;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r' ? '?' : c;
    }
  }
  return out;
}

std::string junit_xml(const CampaignReport& report, double seconds) {
  std::size_t tests = 0, failures = 0;
  for (const StageResult& stage : report.stages) {
    tests += 1 + stage.runs.size();
    failures += failures_of(stage);
  }
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites name=\"attncheck verify\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
         std::to_string(failures) + "\" errors=\"0\" time=\"" + seconds_text(seconds) + "\">\n";
  for (const StageResult& stage : report.stages) {
    const std::size_t stage_failures = failures_of(stage);
    out += "  <testsuite name=\"" + xml_escape(stage.name) + "\" tests=\"" + std::to_string(1 + stage.runs.size()) +
           "\" failures=\"" + std::to_string(stage_failures) + "\" errors=\"0\" time=\"" + seconds_text(stage.seconds) +
           "\">\n";
    append_case(out, "verify", stage.name, stage.passed, stage.seconds, stage.summary,
                stage.summary + "\n" + stage.details.dump(2));
    for (const StageRun& run : stage.runs) {
      const std::size_t line_end = run.message.find('\n');
      append_case(out, "verify." + stage.name, run.name, run.passed, run.seconds, run.message.substr(0, line_end),
                  run.message);
    }
    out += "  </testsuite>\n";
  }
  out += "</testsuites>\n";
  return out;
}

}  // namespace attn::verify
