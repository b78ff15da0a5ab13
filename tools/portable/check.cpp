// attncheck portable checker: one C++17 source file, the standard library only (no testlib, GMP,
// MPFR or attncheck), written into judge packages by `attncheck package`. It gives the verdict
// `attncheck check` gives, rule for rule (verify/judge/checker.cpp, check_output): the truth is the
// answer file's canonical rows plus its certificate section (README, "Judge packages"), which
// lists the accepted range of every ambiguous cell. Values are compared as decimal text, never as
// doubles.
//
// Conventions, told apart by the third argument:
//   testlib (Polygon, Codeforces, CMS):  check INPUT OUTPUT ANSWER       exit 0 OK, 1 WA, 2 PE, 3 FAIL
//   Kattis / DOMjudge output validator:  check INPUT ANSWER FEEDBACK_DIR [flags] < OUTPUT
//                                        exit 42 accepted, 43 rejected (anything else: judge error);
//                                        the reason in FEEDBACK_DIR/judgemessage.txt
// Build: g++ -std=c++17 -O2 check.cpp -o check
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// ---- attncheck package settings: begin (rewritten by `attncheck package`) ----
namespace settings {
constexpr const char* kProblem = "ai006";  // ai006 | ai031 | general: how the input's header reads
// The certificate sections of the samples, whose answer files contestants see without one: the
// FNV-1a 64 hash of the sample input's bytes (16 hex digits) and its section; a null entry ends it.
struct SampleCertificate {
  const char* input_hash;
  const char* section;
};
constexpr SampleCertificate kSampleCertificates[] = {{nullptr, nullptr}};
}  // namespace settings
// ---- attncheck package settings: end ----

namespace {

// The answer file's certificate section, version 1 (README, "Judge packages").
constexpr std::string_view kSectionMark = "# attncheck-certificate";
constexpr std::string_view kVersion = "v1";
constexpr std::string_view kSectionEnd = "# end";

enum class VerdictKind { ok, acceptable, wrong_answer, presentation_error };

const char* verdict_name(VerdictKind kind) {
  switch (kind) {
    case VerdictKind::ok:
      return "ok";
    case VerdictKind::acceptable:
      return "acceptable";
    case VerdictKind::wrong_answer:
      return "wrong answer";
    case VerdictKind::presentation_error:
      return "presentation error";
  }
  return "?";
}

struct Verdict {
  VerdictKind kind = VerdictKind::ok;
  std::string message;
};

struct Cell {
  std::string canonical, lowest, highest;
  bool ambiguous = false;
  bool exact_tie = false;
};

struct Certificate {
  std::size_t rows = 0, cols = 0;
  int decimals = 0;
  std::vector<Cell> cells;
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool read_file(const char* path, std::string& out) {
  std::FILE* file = std::string_view(path) == "-" ? stdin : std::fopen(path, "rb");
  if (file == nullptr) return false;
  char buffer[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) out.append(buffer, got);
  const bool failed = std::ferror(file) != 0;
  if (file != stdin) std::fclose(file);
  return !failed;
}

// A token for a message: quoted, control bytes escaped, cut to 40 characters (src/scanner.cpp).
std::string quote_token(std::string_view text) {
  constexpr std::size_t kShown = 40;
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > kShown)
    out += "...' (" + std::to_string(text.size()) + " bytes)";
  else
    out += "'";
  return out;
}

// Why a token is not -?(0|[1-9]D*).D{k} without a negative zero (empty when it is).
std::string format_problem(std::string_view token, int decimals) {
  std::size_t i = 0;
  const bool negative = !token.empty() && token[0] == '-';
  if (negative) ++i;
  const std::size_t integer_start = i;
  while (i < token.size() && is_digit(token[i])) ++i;
  const std::size_t integer_digits = i - integer_start;
  std::size_t fraction_digits = 0;
  bool point = false;
  if (i < token.size() && token[i] == '.') {
    point = true;
    ++i;
    while (i < token.size() && is_digit(token[i])) ++i, ++fraction_digits;
  }
  const std::string expected = "a fixed decimal with exactly " + std::to_string(decimals) + " digits after the point";
  if (i != token.size() || integer_digits == 0) return "expected " + expected + ", found " + quote_token(token);
  if (integer_digits > 1 && token[integer_start] == '0') return "leading zero in " + quote_token(token);
  if (point != (decimals > 0) || fraction_digits != static_cast<std::size_t>(decimals)) {
    return "expected " + expected + ", found " + quote_token(token);
  }
  if (negative && token.find_first_not_of("0.", 1) == std::string_view::npos) {
    return "negative zero " + quote_token(token) + " (write it without the sign)";
  }
  return {};
}

// Order of two well-formed fixed decimals with the same number of decimals, on their text: sign,
// then length (no leading zeros), then digit by digit. -1, 0 or 1.
int compare_fixed(std::string_view a, std::string_view b) {
  const bool a_negative = !a.empty() && a[0] == '-';
  const bool b_negative = !b.empty() && b[0] == '-';
  if (a_negative != b_negative) return a_negative ? -1 : 1;
  if (a_negative) {
    a.remove_prefix(1);
    b.remove_prefix(1);
  }
  const int magnitude = a.size() != b.size() ? (a.size() < b.size() ? -1 : 1) : (a < b ? -1 : (a > b ? 1 : 0));
  return a_negative ? -magnitude : magnitude;
}

Verdict presentation(std::string message) { return {VerdictKind::presentation_error, std::move(message)}; }

// The rules of verify/judge/checker.cpp check_output. Pass 1: shape and format of every token, before any
// value is looked at; pass 2: values, the first difference wins.
Verdict check_output(const Certificate& certificate, std::string_view output) {
  const std::size_t rows = certificate.rows;
  const std::size_t cols = certificate.cols;
  std::vector<std::string_view> tokens;
  tokens.reserve(rows * cols);

  std::size_t at = 0;
  for (std::size_t r = 1; r <= rows; ++r) {
    if (at >= output.size()) {
      return presentation(std::to_string(rows) + " lines of values expected, the output has " + std::to_string(r - 1));
    }
    std::size_t end = output.find('\n', at);
    if (end == std::string_view::npos) end = output.size();
    std::string_view line = output.substr(at, end - at);
    at = end + 1;
    while (!line.empty() && is_blank(line.back())) line.remove_suffix(1);
    std::size_t column = 0;
    for (std::size_t start = 0; start <= line.size();) {
      std::size_t stop = line.find(' ', start);
      if (stop == std::string_view::npos) stop = line.size();
      const std::string_view token = line.substr(start, stop - start);
      ++column;
      if (column > cols) {
        return presentation("line " + std::to_string(r) + " has more than " + std::to_string(cols) + " values");
      }
      if (token.empty()) {
        const char* why = line.empty() ? " is empty" : ": values must be separated by single spaces";
        return presentation("line " + std::to_string(r) + why);
      }
      if (std::string problem = format_problem(token, certificate.decimals); !problem.empty()) {
        return presentation("line " + std::to_string(r) + ", value " + std::to_string(column) + ": " + problem);
      }
      tokens.push_back(token);
      start = stop + 1;
    }
    if (column < cols) {
      return presentation("line " + std::to_string(r) + " has " + std::to_string(column) + " values, expected " +
                          std::to_string(cols));
    }
  }
  for (std::size_t i = at; i < output.size(); ++i) {
    if (!is_blank(output[i]) && output[i] != '\n') {
      return presentation("extra output after the " + std::to_string(rows) + " expected lines");
    }
  }

  Verdict verdict{VerdictKind::ok, ""};
  std::size_t ambiguous = 0, accepted = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const Cell& cell = certificate.cells[i];
    const std::string where = "row " + std::to_string(i / cols + 1) + ", column " + std::to_string(i % cols + 1) + ": ";
    ambiguous += cell.ambiguous ? 1 : 0;
    if (tokens[i] == cell.canonical) continue;
    if (cell.ambiguous && compare_fixed(tokens[i], cell.lowest) >= 0 && compare_fixed(tokens[i], cell.highest) <= 0) {
      if (accepted++ == 0) {
        verdict = {VerdictKind::acceptable, where + std::string(tokens[i]) + " accepted for canonical " +
                                                cell.canonical +
                                                (cell.exact_tie ? " (exact tie)" : " (within the ambiguity band)")};
      }
      continue;
    }
    std::string expected = cell.canonical;
    if (cell.ambiguous) expected += " (or up to " + cell.lowest + " .. " + cell.highest + ")";
    return {VerdictKind::wrong_answer, where + "expected " + expected + ", found " + quote_token(tokens[i])};
  }
  const std::string summary = std::to_string(tokens.size()) + " values, " + std::to_string(ambiguous) + " ambiguous";
  if (verdict.kind == VerdictKind::ok) {
    verdict.message = summary + ", all canonical";
  } else {
    verdict.message = summary + ", " + std::to_string(accepted) + " non-canonical accepted; first " + verdict.message;
  }
  return verdict;
}

// ---- Reading the answer file: canonical rows, then the certificate section ----

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t stop = text.find(separator, start);
    parts.push_back(text.substr(start, stop == std::string_view::npos ? std::string_view::npos : stop - start));
    if (stop == std::string_view::npos) return parts;
    start = stop + 1;
  }
}

bool parse_size(std::string_view text, std::size_t& out) {
  if (text.empty() || text.size() > 9) return false;
  out = 0;
  for (char c : text) {
    if (!is_digit(c)) return false;
    out = out * 10 + static_cast<std::size_t>(c - '0');
  }
  return true;
}

// "key=value" with the given key.
bool parse_field(std::string_view field, std::string_view key, std::string_view& value) {
  if (field.size() <= key.size() || field.substr(0, key.size()) != key || field[key.size()] != '=') return false;
  value = field.substr(key.size() + 1);
  return true;
}

// Where the certificate section starts (a line of its own), or npos.
std::size_t section_offset(std::string_view answer) {
  for (std::size_t at = answer.find(kSectionMark); at != std::string_view::npos;
       at = answer.find(kSectionMark, at + 1)) {
    if (at == 0 || answer[at - 1] == '\n') return at;
  }
  return std::string_view::npos;
}

// FNV-1a 64 of the bytes as 16 hex digits (how `attncheck package` keys the samples' certificates).
std::string fnv1a_hex(std::string_view bytes) {
  unsigned long long hash = 0xcbf29ce484222325ull;
  for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", hash);
  return text;
}

bool refuse(std::string& why, std::string message) {
  why = std::move(message);
  return false;
}

// Parses an answer file; false with `why` when it is not one this checker can trust.
bool read_certificate(std::string_view answer, Certificate& out, std::string& why) {
  const std::size_t offset = section_offset(answer);
  if (offset == std::string_view::npos) {
    why = "the answer file has no '" + std::string(kSectionMark) + "' section (write it with `attncheck package`)";
    return false;
  }
  std::string_view section = answer.substr(offset);
  if (section.empty() || section.back() != '\n') return refuse(why, "the certificate section must end with a newline");
  const std::vector<std::string_view> lines = split(section.substr(0, section.size() - 1), '\n');
  // Header: "# attncheck-certificate v1 problem=P rows=R cols=C decimals=K ambiguous=A".
  const std::vector<std::string_view> header = split(lines[0], ' ');
  if (header.size() < 3 || header[2] != kVersion) {
    return refuse(why, "certificate version " + quote_token(header.size() < 3 ? "" : header[2]) +
                           " (this checker reads " + std::string(kVersion) + ")");
  }
  std::string_view problem, rows, cols, decimals, ambiguous;
  std::size_t decimal_count = 0, ambiguous_count = 0;
  if (header.size() != 8 || !parse_field(header[3], "problem", problem) || !parse_field(header[4], "rows", rows) ||
      !parse_field(header[5], "cols", cols) || !parse_field(header[6], "decimals", decimals) ||
      !parse_field(header[7], "ambiguous", ambiguous) || !parse_size(rows, out.rows) || !parse_size(cols, out.cols) ||
      !parse_size(decimals, decimal_count) || decimal_count > 30 || !parse_size(ambiguous, ambiguous_count) ||
      out.rows == 0 || out.cols == 0 || out.rows > (1u << 20) / out.cols) {
    return refuse(why, "malformed certificate header " + quote_token(lines[0]));
  }
  if (problem != settings::kProblem) {
    return refuse(
        why, "the answer file is for problem " + std::string(problem) + ", this checker for " + settings::kProblem);
  }
  out.decimals = static_cast<int>(decimal_count);
  if (lines.size() != ambiguous_count + 2 || lines.back() != kSectionEnd) {
    return refuse(why, "the certificate section must list " + std::to_string(ambiguous_count) +
                           " cells and end with '" + std::string(kSectionEnd) + "'");
  }
  // The canonical rows: exactly rows lines of cols well-formed values, single spaces.
  std::string_view values = answer.substr(0, offset);
  if (values.empty() || values.back() != '\n') return refuse(why, "the answer's values must end with a newline");
  const std::vector<std::string_view> rows_text = split(values.substr(0, values.size() - 1), '\n');
  if (rows_text.size() != out.rows) return refuse(why, "the answer has " + std::to_string(rows_text.size()) + " rows");
  for (std::string_view row : rows_text) {
    const std::vector<std::string_view> tokens = split(row, ' ');
    if (tokens.size() != out.cols) return refuse(why, "an answer row has " + std::to_string(tokens.size()) + " values");
    for (std::string_view token : tokens) {
      if (!format_problem(token, out.decimals).empty()) return refuse(why, "answer value " + quote_token(token));
      out.cells.push_back({std::string(token), std::string(token), std::string(token), false, false});
    }
  }
  // One line per ambiguous cell: "ROW COL LOWEST HIGHEST tie|band", 1-based, in row-major order.
  std::size_t previous = 0;
  for (std::size_t k = 1; k + 1 < lines.size(); ++k) {
    const std::vector<std::string_view> fields = split(lines[k], ' ');
    std::size_t row = 0, col = 0;
    if (fields.size() != 5 || !parse_size(fields[0], row) || !parse_size(fields[1], col) || row < 1 || row > out.rows ||
        col < 1 || col > out.cols || !format_problem(fields[2], out.decimals).empty() ||
        !format_problem(fields[3], out.decimals).empty() || (fields[4] != "tie" && fields[4] != "band")) {
      return refuse(why, "malformed certificate line " + quote_token(lines[k]));
    }
    const std::size_t index = (row - 1) * out.cols + (col - 1);
    Cell& cell = out.cells[index];
    if ((k > 1 && index <= previous) || compare_fixed(fields[2], cell.canonical) > 0 ||
        compare_fixed(fields[3], cell.canonical) < 0 || compare_fixed(fields[2], fields[3]) >= 0) {
      return refuse(why, "inconsistent certificate line " + quote_token(lines[k]));
    }
    previous = index;
    cell.lowest = std::string(fields[2]);
    cell.highest = std::string(fields[3]);
    cell.ambiguous = true;
    cell.exact_tie = fields[4] == "tie";
  }
  return true;
}

// The output shape the input's header states: rows, columns, decimals. Only the header is read:
// the input was checked by the validator before any submission ran.
bool read_input_shape(std::string_view input, std::size_t& rows, std::size_t& cols, int& decimals) {
  std::vector<std::size_t> numbers;
  const std::size_t wanted = std::string_view(settings::kProblem) == "ai006"   ? 2
                             : std::string_view(settings::kProblem) == "ai031" ? 3
                                                                               : 7;
  std::size_t at = 0;
  while (numbers.size() < wanted) {
    while (at < input.size() && is_space(input[at])) ++at;
    std::size_t end = at;
    while (end < input.size() && !is_space(input[end])) ++end;
    std::size_t value = 0;
    if (!parse_size(input.substr(at, end - at), value)) return false;
    numbers.push_back(value);
    at = end;
  }
  if (wanted == 7) {  // general: B n m d_k d_v h k
    rows = numbers[0] * numbers[1];
    cols = numbers[4];
    decimals = static_cast<int>(numbers[6]);
  } else {
    rows = numbers[0];
    cols = numbers[1];
    decimals = wanted == 2 ? 4 : 2;
  }
  return true;
}

// A copy of the answer file's own certificate section at the end of the output is not part of it:
// judge systems check that the answer file itself is accepted (problemtools does).
std::string_view without_section_echo(std::string_view output, std::string_view answer) {
  const std::string_view section = answer.substr(section_offset(answer));
  if (output.size() < section.size() || output.substr(output.size() - section.size()) != section) return output;
  const std::size_t start = output.size() - section.size();
  if (start != 0 && output[start - 1] != '\n') return output;
  return output.substr(0, start);
}

bool is_directory(const char* path) {
  std::error_code error;
  return std::filesystem::is_directory(path, error);
}

}  // namespace

int main(int argc, char** argv) {
  const bool kattis = argc >= 4 && is_directory(argv[3]);
  const int fail_status = 3;  // testlib FAIL; for Kattis any status but 42/43 is a judge error
  auto fail = [&](const std::string& message) {
    std::fprintf(stderr, "fail: %s\n", message.c_str());
    return fail_status;
  };
  if (argc < 4) {
    return fail(
        "usage: check INPUT OUTPUT ANSWER (testlib: 0 OK, 1 WA, 2 PE, 3 FAIL)\n"
        "   or: check INPUT ANSWER FEEDBACK_DIR < OUTPUT (Kattis/DOMjudge: 42 accepted, 43 rejected)");
  }
  const char* input_path = argv[1];
  const char* output_path = kattis ? "-" : argv[2];
  const char* answer_path = kattis ? argv[2] : argv[3];
  std::string input, output, answer;
  if (!read_file(input_path, input)) return fail(std::string("cannot read the input ") + input_path);
  if (!read_file(answer_path, answer)) return fail(std::string("cannot read the answer ") + answer_path);
  if (!read_file(output_path, output)) return fail(std::string("cannot read the output ") + output_path);

  // A sample's answer file is what contestants see: its certificate section lives here instead.
  if (section_offset(answer) == std::string_view::npos) {
    const std::string hash = fnv1a_hex(input);
    for (const settings::SampleCertificate* sample = settings::kSampleCertificates; sample->input_hash; ++sample) {
      if (hash == sample->input_hash) {
        answer += sample->section;
        break;
      }
    }
  }
  Certificate certificate;
  std::string why;
  if (!read_certificate(answer, certificate, why)) return fail(std::string(answer_path) + ": " + why);
  std::size_t rows = 0, cols = 0;
  int decimals = 0;
  if (!read_input_shape(input, rows, cols, decimals)) return fail(std::string(input_path) + ": unreadable header");
  if (rows != certificate.rows || cols != certificate.cols || decimals != certificate.decimals) {
    return fail(std::string(answer_path) + " does not belong to " + input_path + " (its shape differs)");
  }

  const Verdict verdict = check_output(certificate, without_section_echo(output, answer));
  const std::string line = std::string(verdict_name(verdict.kind)) + ": " + verdict.message;
  const bool accepted = verdict.kind == VerdictKind::ok || verdict.kind == VerdictKind::acceptable;
  if (!kattis) {
    std::fprintf(stderr, "%s\n", line.c_str());
    return accepted ? 0 : verdict.kind == VerdictKind::wrong_answer ? 1 : 2;
  }
  const std::string message_path = (std::filesystem::path(argv[3]) / "judgemessage.txt").string();
  std::FILE* message = std::fopen(message_path.c_str(), "wb");
  if (message == nullptr) return fail("cannot write " + message_path);
  const bool written = std::fputs((line + "\n").c_str(), message) >= 0;
  if (std::fclose(message) != 0 || !written) return fail("cannot write " + message_path);
  return accepted ? 42 : 43;
}
