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

/// Writes an instance as strict-valid text; read_instance of the result gives it back.
[[nodiscard]] std::string write_instance(const Instance& instance);

}  // namespace attn
