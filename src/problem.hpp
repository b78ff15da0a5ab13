// Problems (ai006, ai031, general), their limits, and the parsed Instance every module shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace attn {

enum class Problem { ai006, ai031, general };
enum class MaskKind { none, causal, explicit_mask };
enum class ScaleKind { none, sqrt_head_dim, explicit_value };

/// "ai006" | "ai031" | "general" -> Problem.
[[nodiscard]] std::optional<Problem> problem_from_name(std::string_view name);
[[nodiscard]] std::string_view problem_name(Problem problem);

/// Which keys each query sees: everything, j <= i (causal), or an n x m row-major 0/1 matrix.
/// The production kernel's rule; verify/ has its own (verify/judge/rules.hpp) and never asks this one.
struct MaskView {
  MaskKind kind = MaskKind::none;
  std::span<const std::uint8_t> bits;
  [[nodiscard]] bool visible(std::size_t i, std::size_t j, std::size_t m) const {
    return kind == MaskKind::none || (kind == MaskKind::causal ? j <= i : bits[i * m + j] != 0);
  }
};

/// Size and value limits. Sizes are checked before anything is allocated; values exactly (decimal).
struct Limits {
  std::size_t max_n = 0;      ///< queries per batch item (and keys, for ai006/ai031)
  std::size_t max_m = 0;      ///< keys per batch item (general)
  std::size_t max_d = 0;      ///< d (d_k and d_v for general)
  std::size_t max_heads = 0;  ///< h
  std::size_t max_batch = 1;  ///< batch items (general)
  int max_decimals = 0;       ///< output decimals (general)
  std::string max_abs_qk;     ///< |Q|, |K| (and X) bound, canonical decimal
  std::string max_abs_v;      ///< |V| bound, canonical decimal
  /// Strict inputs: at most this many digits after a real's point (trailing zeros count: a
  /// padded decimal beyond it is not the input the statement describes).
  std::size_t max_fraction_digits = 10;
};

/// The defaults the problem statements give (README, "Problems").
[[nodiscard]] Limits default_limits(Problem problem);

/// A row-major matrix of input reals: the double (for the kernel) and the exact canonical
/// decimal text (for the oracle), side by side.
struct Matrix {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<double> values;
  std::vector<std::string> text;

  [[nodiscard]] double at(std::size_t r, std::size_t c) const { return values[r * cols + c]; }
  [[nodiscard]] const std::string& text_at(std::size_t r, std::size_t c) const { return text[r * cols + c]; }
  friend bool operator==(const Matrix&, const Matrix&) = default;
};

/// One batch item: Q (n x d_k), K (m x d_k), V (m x d_v) and, for an explicit mask, n x m 0/1.
struct BatchItem {
  Matrix Q, K, V;
  std::vector<std::uint8_t> mask;  ///< row-major n x m; empty unless MaskKind::explicit_mask
  friend bool operator==(const BatchItem&, const BatchItem&) = default;
};

/// A whole judge input. ai006 and ai031 are special cases of the general form.
struct Instance {
  Problem problem = Problem::ai006;
  std::size_t n = 0;    ///< queries
  std::size_t m = 0;    ///< keys and values
  std::size_t d_k = 0;  ///< columns of Q and K
  std::size_t d_v = 0;  ///< columns of V and of the output
  std::size_t heads = 1;
  int decimals = 4;
  MaskKind mask = MaskKind::none;
  ScaleKind scale = ScaleKind::sqrt_head_dim;
  std::string scale_text;  ///< canonical decimal divisor when ScaleKind::explicit_value
  bool self_form = false;  ///< general: X given once, Q = K = V = X
  std::vector<BatchItem> batch;

  friend bool operator==(const Instance&, const Instance&) = default;

  /// The divisor of Q·Kᵀ as a double: 1, √(d_k/h), or the explicit value.
  [[nodiscard]] double scale_divisor() const;
};

}  // namespace attn
