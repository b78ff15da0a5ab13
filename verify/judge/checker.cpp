#include "judge/checker.hpp"

#include <cmath>

#include "judge/band.hpp"
#include "judge/exact.hpp"
#include "numeric/double_interval.hpp"
#include "numeric/mpfr.hpp"
#include "scanner.hpp"

namespace attn::verify {
namespace {

// The certificate section's first line up to the problem (version 1).
constexpr std::string_view kSectionStart = "# attncheck-certificate v1";

// Enough bits that 10^30 (kMaxDecimals) and a double's 53 bits multiply without loss.
constexpr mpfr_prec_t kRangeBits = 256;

// The integers m whose string m·10^-k a correct double implementation may print: the roundings of
// every point of [lo - δ, hi + δ], i.e. ceil((lo - δ)·10^k - 1/2) <= m <= floor((hi + δ)·10^k + 1/2),
// each end rounded outwards so the range can only grow. 10^k is converted once per certificate.
class RangeFinder {
 public:
  explicit RangeFinder(int decimals) {
    mpfr_set_z(scale_.get(), power_of_ten(decimals).backend().data(), MPFR_RNDN);  // exact at 256 bits
    // 10^k is an exact double for k <= 22 (5^22 < 2^53).
    scale_double_ = decimals <= 22 ? mpfr_get_d(scale_.get(), MPFR_RNDN) : 0;
  }

  void find(const Interval& value, double band, Integer& lowest, Integer& highest) {
    if (find_in_doubles(value, band, lowest, highest)) return;
    const mpfr_ptr x = x_.get();
    mpfr_set_d(x, value.lo, MPFR_RNDD);
    mpfr_sub_d(x, x, band, MPFR_RNDD);
    mpfr_mul(x, x, scale_.get(), MPFR_RNDD);
    mpfr_sub_d(x, x, 0.5, MPFR_RNDD);
    mpfr_get_z(lowest.backend().data(), x, MPFR_RNDU);
    mpfr_set_d(x, value.hi, MPFR_RNDU);
    mpfr_add_d(x, x, band, MPFR_RNDU);
    mpfr_mul(x, x, scale_.get(), MPFR_RNDU);
    mpfr_add_d(x, x, 0.5, MPFR_RNDU);
    mpfr_get_z(highest.backend().data(), x, MPFR_RNDD);
  }

 private:
  // The same in doubles, each step rounded to nearest and moved one double outwards (so it still
  // bounds the exact value) while every quantity stays below 2^50, where floor and ceil are exact
  // and an integer converts to int64 exactly. False when out of that range.
  bool find_in_doubles(const Interval& value, double band, Integer& lowest, Integer& highest) const {
    if (scale_double_ == 0) return false;
    const double low = next_down(next_down(next_down(value.lo - band) * scale_double_) - 0.5);
    const double high = next_up(next_up(next_up(value.hi + band) * scale_double_) + 0.5);
    if (!(std::fabs(low) < 0x1p50 && std::fabs(high) < 0x1p50)) return false;
    lowest = static_cast<long long>(std::ceil(low));
    highest = static_cast<long long>(std::floor(high));
    return true;
  }

  MpfrFloat x_{kRangeBits}, scale_{kRangeBits};
  double scale_double_ = 0;  ///< 10^k when exact as a double, else 0
};

// Is the enclosure's midpoint, times 10^k, at or above `scaled`? Picks the nearer neighbour.
bool at_or_above(const Interval& value, const Integer& scaled, int decimals) {
  MpfrFloat x(kRangeBits), m(kRangeBits);
  mpfr_set_d(x.get(), value.lo, MPFR_RNDN);
  mpfr_add_d(x.get(), x.get(), value.hi, MPFR_RNDN);
  mpfr_mul_z(x.get(), x.get(), power_of_ten(decimals).backend().data(), MPFR_RNDN);
  mpfr_set_z(m.get(), scaled.backend().data(), MPFR_RNDN);
  mpfr_mul_2ui(m.get(), m.get(), 1, MPFR_RNDN);
  return mpfr_cmp(x.get(), m.get()) >= 0;
}

// The integer m of a fixed text m·10^-k.
Integer scaled_of(const std::string& fixed) { return parse_scaled(fixed).mantissa; }

CellCertificate certify_cell(const OracleCell& cell, double band, int decimals, RangeFinder& ranges) {
  CellCertificate out;
  out.canonical = cell.canonical;
  out.exact_tie = cell.exact_tie;
  out.unresolved = cell.unresolved;
  out.value = cell.value;
  out.band = band;
  Integer lowest, highest;
  ranges.find(cell.value, band, lowest, highest);
  const Integer canonical = scaled_of(cell.canonical);
  // The canonical rounding is always inside (the exact value is); guard against a guess past the cap.
  if (lowest > canonical) lowest = canonical;
  if (highest < canonical) highest = canonical;
  out.ambiguous = lowest < highest;
  if (!out.ambiguous) {  // almost every cell: the range is the canonical text alone
    out.lowest = out.highest = cell.canonical;
    return out;
  }
  out.lowest = fixed_text(lowest, decimals);
  out.highest = fixed_text(highest, decimals);
  const bool up = highest > canonical && (lowest == canonical || at_or_above(cell.value, canonical, decimals));
  out.alternative = fixed_text(up ? Integer(canonical + 1) : Integer(canonical - 1), decimals);
  return out;
}

// Why a token is not -?(0|[1-9]D*).D{k} (empty when it is).
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
  // Built only for a bad token: this runs once per output value.
  const auto expected = [&] {
    return "expected a fixed decimal with exactly " + std::to_string(decimals) + " digits after the point, found " +
           quote_token(token);
  };
  if (i != token.size() || integer_digits == 0) return expected();
  if (integer_digits > 1 && token[integer_start] == '0') return "leading zero in " + quote_token(token);
  if (point != (decimals > 0) || fraction_digits != static_cast<std::size_t>(decimals)) return expected();
  if (negative && token.find_first_not_of("0.", 1) == std::string_view::npos) {
    return "negative zero " + quote_token(token) + " (write it without the sign)";
  }
  return {};
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

Verdict presentation(std::string message, std::size_t row, std::size_t column) {
  return {VerdictKind::presentation_error, std::move(message), row, column};
}

}  // namespace

Certificate certify(const Instance& instance, const OracleOptions& options, Weights weights) {
  const ExactInstance exact = make_exact(instance);
  Certificate out;
  out.rows = instance.batch.size() * instance.n;
  out.cols = instance.d_v;
  out.decimals = instance.decimals;
  out.cells.resize(out.rows * out.cols);
  if (weights == Weights::certify) out.weights.resize(instance.batch.size() * instance.heads * instance.n * instance.m);
  RangeFinder ranges(instance.decimals);
  // This thread's block, reused from block to block and from call to call: its integers keep their
  // storage (a fuzz or stress run certifies thousands of small instances, each of a few blocks).
  thread_local ExactBlock block;
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t i = 0; i < instance.n; ++i) {
      for (std::size_t g = 0; g < instance.heads; ++g) {
        exact_block(exact, b, i, g, block);
        const BlockAnswer answer = oracle_block(exact, block, instance.decimals, options);
        const BlockBands bands = block_bands(exact, block, answer);
        for (std::size_t c = 0; c < block.head_v; ++c) {
          out.cells[(b * instance.n + i) * out.cols + g * block.head_v + c] =
              certify_cell(answer.cells[c], bands.cells[c], instance.decimals, ranges);
        }
        for (std::size_t t = 0; weights == Weights::certify && t < block.keys.size(); ++t) {
          out.weights[((b * instance.heads + g) * instance.n + i) * instance.m + block.keys[t]] = {answer.weights[t],
                                                                                                   bands.weights[t]};
        }
      }
    }
  }
  return out;
}

std::string canonical_text(const Certificate& certificate) {
  std::string out;
  for (std::size_t i = 0; i < certificate.cells.size(); ++i) {
    out += certificate.cells[i].canonical;
    out += (i + 1) % certificate.cols == 0 ? '\n' : ' ';
  }
  return out;
}

std::string certificate_section(const Certificate& certificate, std::string_view problem) {
  std::string lines;
  std::size_t ambiguous = 0;
  for (std::size_t i = 0; i < certificate.cells.size(); ++i) {
    const CellCertificate& cell = certificate.cells[i];
    if (!cell.ambiguous) continue;
    ++ambiguous;
    lines += std::to_string(i / certificate.cols + 1) + " " + std::to_string(i % certificate.cols + 1) + " " +
             cell.lowest + " " + cell.highest + (cell.exact_tie ? " tie\n" : " band\n");
  }
  return std::string(kSectionStart) + " problem=" + std::string(problem) + " rows=" + std::to_string(certificate.rows) +
         " cols=" + std::to_string(certificate.cols) + " decimals=" + std::to_string(certificate.decimals) +
         " ambiguous=" + std::to_string(ambiguous) + "\n" + lines + "# end\n";
}

std::string answer_text(const Certificate& certificate, std::string_view problem) {
  return canonical_text(certificate) + certificate_section(certificate, problem);
}

AnswerParts split_answer(std::string_view answer) {
  constexpr std::string_view kMark = "# attncheck-certificate";
  for (std::size_t at = answer.find(kMark); at != std::string_view::npos; at = answer.find(kMark, at + 1)) {
    if (at == 0 || answer[at - 1] == '\n') return {answer.substr(0, at), answer.substr(at)};
  }
  return {answer, {}};
}

std::string_view without_section_echo(std::string_view output, std::string_view section) {
  if (section.empty() || output.size() < section.size()) return output;
  const std::size_t start = output.size() - section.size();
  if (output.substr(start) != section || (start != 0 && output[start - 1] != '\n')) return output;
  return output.substr(0, start);
}

std::string_view verdict_name(VerdictKind kind) {
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

Verdict check_output(const Certificate& certificate, std::string_view output) {
  const std::size_t rows = certificate.rows;
  const std::size_t cols = certificate.cols;
  std::vector<std::string_view> tokens;
  tokens.reserve(rows * cols);

  // Pass 1: shape and format of every token, before any value is looked at.
  std::size_t at = 0;
  for (std::size_t r = 1; r <= rows; ++r) {
    if (at >= output.size()) {
      return presentation(std::to_string(rows) + " lines of values expected, the output has " + std::to_string(r - 1),
                          r, 0);
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
        return presentation("line " + std::to_string(r) + " has more than " + std::to_string(cols) + " values", r,
                            column);
      }
      if (token.empty()) {
        const char* why = line.empty() ? " is empty" : ": values must be separated by single spaces";
        return presentation("line " + std::to_string(r) + why, r, column);
      }
      if (std::string problem = format_problem(token, certificate.decimals); !problem.empty()) {
        return presentation("line " + std::to_string(r) + ", value " + std::to_string(column) + ": " + problem, r,
                            column);
      }
      tokens.push_back(token);
      start = stop + 1;
    }
    if (column < cols) {
      return presentation(
          "line " + std::to_string(r) + " has " + std::to_string(column) + " values, expected " + std::to_string(cols),
          r, column + 1);
    }
  }
  for (std::size_t i = at; i < output.size(); ++i) {
    if (!is_blank(output[i]) && output[i] != '\n') {
      return presentation("extra output after the " + std::to_string(rows) + " expected lines", rows + 1, 0);
    }
  }

  // Pass 2: values, first difference wins.
  Verdict verdict{VerdictKind::ok, "", 0, 0};
  std::size_t ambiguous = 0, accepted = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const CellCertificate& cell = certificate.cells[i];
    const std::size_t row = i / cols + 1, column = i % cols + 1;
    const std::string where = "row " + std::to_string(row) + ", column " + std::to_string(column) + ": ";
    ambiguous += cell.ambiguous ? 1 : 0;
    if (tokens[i] == cell.canonical) continue;
    if (cell.ambiguous && compare_fixed(tokens[i], cell.lowest) >= 0 && compare_fixed(tokens[i], cell.highest) <= 0) {
      if (accepted++ == 0) {
        verdict = {VerdictKind::acceptable,
                   where + std::string(tokens[i]) + " accepted for canonical " + cell.canonical +
                       (cell.exact_tie ? " (exact tie)" : " (within the ambiguity band)"),
                   row, column};
      }
      continue;
    }
    std::string expected = cell.canonical;
    if (cell.ambiguous) expected += " (or up to " + cell.lowest + " .. " + cell.highest + ")";
    return {VerdictKind::wrong_answer, where + "expected " + expected + ", found " + quote_token(tokens[i]), row,
            column};
  }
  const std::string summary = std::to_string(tokens.size()) + " values, " + std::to_string(ambiguous) + " ambiguous";
  if (verdict.kind == VerdictKind::ok) {
    verdict.message = summary + ", all canonical";
  } else {
    verdict.message = summary + ", " + std::to_string(accepted) + " non-canonical accepted; first " + verdict.message;
  }
  return verdict;
}

}  // namespace attn::verify
