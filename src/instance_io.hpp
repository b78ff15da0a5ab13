// Reading judge input (lenient, as the reference programs read it, or testlib-strict) and
// writing it back canonically.
#pragma once

#include <string>
#include <string_view>

#include "problem.hpp"
#include "result.hpp"

namespace attn {

/// lenient: any whitespace between tokens, CR/LF, optional final newline (what `solve` reads).
/// strict: single spaces, LF line ends, a final newline, canonical numbers (what `validate` demands).
enum class Strictness { lenient, strict };

/// Parses a whole input. Header sizes are checked against limits before anything is allocated,
/// every value exactly against its bound; the error names the field and its line and column.
[[nodiscard]] Result<Instance> read_instance(std::string_view input, Problem problem, const Limits& limits,
                                             Strictness strictness = Strictness::lenient);

/// What an input's header states: its first line (and, for `general`, its second).
struct Header {
  Problem problem = Problem::ai006;
  std::size_t batch = 1;  ///< general only
  std::size_t n = 0;
  std::size_t m = 0;               ///< general only (ai006/ai031: m = n)
  std::size_t d_k = 0;             ///< d for ai006/ai031
  std::size_t d_v = 0;             ///< general only
  std::size_t heads = 1;           ///< ai031 and general
  int decimals = 4;                ///< general only
  MaskKind mask = MaskKind::none;  ///< general only
  std::string scale = "sqrt";      ///< general only: "none", "sqrt" or a positive decimal divisor
  bool self_form = false;          ///< general only
};

/// The header lines as write_instance writes them ("n d\n", "n d h\n", or the two general lines).
[[nodiscard]] std::string write_header(const Header& header);

/// Writes an instance as strict-valid text; read_instance of the result gives it back.
[[nodiscard]] std::string write_instance(const Instance& instance);

}  // namespace attn
