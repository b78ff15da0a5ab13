// Certification of judge answers: the oracle's canonical strings with their ambiguity bands, and
// the verdict on a contestant's output text (correct, acceptable, wrong answer, presentation error).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "judge/oracle.hpp"
#include "problem.hpp"

namespace attn::verify {

/// One output value, certified.
struct CellCertificate {
  std::string canonical;    ///< exact value correctly rounded, ties to even, never "-0.00"
  std::string alternative;  ///< the other acceptable neighbour when ambiguous, else empty
  std::string lowest;       ///< smallest acceptable string (= canonical unless ambiguous)
  std::string highest;      ///< largest acceptable string (= canonical unless ambiguous)
  bool ambiguous = false;   ///< the exact value is within `band` of a rounding boundary
  bool exact_tie = false;   ///< the exact value is exactly halfway between two roundings
  bool unresolved = false;  ///< the oracle's cap was reached: a tie or closer than 2^-max_bits
  Interval value;           ///< outward-rounded enclosure of the exact value
  double band = 0;          ///< δ: how far a correct double implementation may land from it
};

/// One attention weight, certified.
struct WeightCertificate {
  Interval value;   ///< outward-rounded enclosure of the exact weight; [0, 0] where masked
  double band = 0;  ///< δ for the weight
};

/// Every output value and weight of an instance.
struct Certificate {
  std::size_t rows = 0;  ///< B·n
  std::size_t cols = 0;  ///< d_v
  int decimals = 0;
  std::vector<CellCertificate> cells;      ///< rows x cols
  std::vector<WeightCertificate> weights;  ///< B x h x n x m
};

/// Whether certify also fills Certificate::weights. The commands print only the cells, and on a
/// max AI006 instance the weights' certificates are two thirds of the certificate's memory.
enum class Weights { certify, skip };

/// Runs the oracle and the bands on every block of the instance.
[[nodiscard]] Certificate certify(const Instance& instance, const OracleOptions& options = {},
                                  Weights weights = Weights::certify);

/// The canonical answer text: rows of canonical strings, single spaces, '\n' after each row.
[[nodiscard]] std::string canonical_text(const Certificate& certificate);

/// The answer file's certificate section, version 1 (README, "Judge packages"): the line
/// "# attncheck-certificate v1 problem=P rows=R cols=C decimals=K ambiguous=A", one line
/// "ROW COL LOWEST HIGHEST tie|band" per ambiguous cell (1-based, row-major order), then "# end".
/// It follows the canonical rows in the answer files of `attncheck package`; the portable checker
/// (tools/portable/check.cpp) reads it instead of running the oracle.
[[nodiscard]] std::string certificate_section(const Certificate& certificate, std::string_view problem);

/// canonical_text followed by certificate_section: a judge package's answer file.
[[nodiscard]] std::string answer_text(const Certificate& certificate, std::string_view problem);

/// An answer file split where its certificate section starts (a line beginning
/// "# attncheck-certificate"); `section` is empty when there is none.
struct AnswerParts {
  std::string_view values;
  std::string_view section;
};
[[nodiscard]] AnswerParts split_answer(std::string_view answer);

/// The output without a trailing copy of the answer's certificate section (starting a line): judge
/// systems run the checker on the answer file itself (problemtools does), and the section is not
/// output. Any other output is returned unchanged.
[[nodiscard]] std::string_view without_section_echo(std::string_view output, std::string_view section);

/// Checker outcomes. ok: every value canonical; acceptable: some ambiguous value is the other
/// neighbour; wrong_answer: a well-formed value outside the acceptable strings; presentation_error:
/// wrong shape, digit count, "-0.00", exponent, or anything that is not a fixed decimal.
enum class VerdictKind { ok, acceptable, wrong_answer, presentation_error };

/// "ok", "acceptable", "wrong answer", "presentation error".
[[nodiscard]] std::string_view verdict_name(VerdictKind kind);

/// A verdict with a one-line reason and the first offending cell (1-based, 0 when none).
struct Verdict {
  VerdictKind kind = VerdictKind::ok;
  std::string message;
  std::size_t row = 0;
  std::size_t column = 0;
};

/// Checks an output text against a certificate. Format is strict: exactly `rows` lines of `cols`
/// tokens separated by single spaces (trailing spaces, tabs, CR and blank lines at the end
/// tolerated), each -?(0|[1-9]D*).D{decimals}, no "-0.00". Any bytes are safe.
[[nodiscard]] Verdict check_output(const Certificate& certificate, std::string_view output);

}  // namespace attn::verify
