#include "problem.hpp"

#include <charconv>
#include <cmath>

namespace attn {

std::optional<Problem> problem_from_name(std::string_view name) {
  if (name == "ai006") return Problem::ai006;
  if (name == "ai031") return Problem::ai031;
  if (name == "general") return Problem::general;
  return std::nullopt;
}

std::string_view problem_name(Problem problem) {
  switch (problem) {
    case Problem::ai006:
      return "ai006";
    case Problem::ai031:
      return "ai031";
    case Problem::general:
      return "general";
  }
  return "?";
}

Limits default_limits(Problem problem) {
  switch (problem) {
    // AI006 statement: 1 <= n <= 80, 1 <= d <= 16, |x| <= 1000 (scaled scores reach 4e6).
    case Problem::ai006:
      return {80, 80, 16, 1, 1, 4, "1000", "1000", 10};
    // AI031 statement: 1 <= n <= 40, 1 <= d <= 16, h | d, |Q|,|K| <= 8, |V| <= 1000.
    case Problem::ai031:
      return {40, 40, 16, 16, 1, 2, "8", "1000", 10};
    // general: judge-sized by default; every bound is a flag (fraction digits: decimals + 2, the
    // boundary values' digits).
    case Problem::general:
      return {256, 256, 64, 64, 16, 12, "1000", "1000", 14};
  }
  return {};
}

double Instance::scale_divisor() const {
  switch (scale) {
    case ScaleKind::none:
      return 1.0;
    case ScaleKind::sqrt_head_dim:
      return std::sqrt(static_cast<double>(d_k / heads));
    case ScaleKind::explicit_value: {
      double value = 1.0;
      std::from_chars(scale_text.data(), scale_text.data() + scale_text.size(), value);
      return value;
    }
  }
  return 1.0;
}

}  // namespace attn
