// The problem statement of a judge package, written from the problem's definition and the
// package's limits: LaTeX for the legacy Kattis format (problem_statement/problem.en.tex), Markdown
// for 2023-07 (statement/problem.en.md). Judge systems add the samples from data/sample/.
#pragma once

#include <string>

#include "problem.hpp"

namespace attn::cli {

enum class StatementMarkup { latex, markdown };

/// The problem's display name ("Causal Attention", ...).
[[nodiscard]] std::string display_name(Problem problem);

/// The whole statement: the task, the input and output formats with the limits, the rounding rule.
[[nodiscard]] std::string statement_text(Problem problem, const Limits& limits, StatementMarkup markup);

}  // namespace attn::cli
