// Token scanner with line/column tracking, shared by the input reader and the output checker.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "result.hpp"

namespace attn {

/// One whitespace-delimited token and where it starts.
struct Token {
  std::string_view text;
  std::size_t line = 1;
  std::size_t column = 1;
};

/// Splits bytes into tokens. Lenient mode skips any ASCII whitespace; strict mode demands exactly
/// one ' ' between tokens of a line and one '\n' after the last, and nothing else.
class Scanner {
 public:
  Scanner(std::string_view input, bool strict) : input_(input), strict_(strict) {}

  /// The next token, or nullopt at end of input (lenient) / error (strict, on stray whitespace).
  Result<std::optional<Token>> next();
  /// Strict mode: consume the separator after a token (' ' inside a line, '\n' at its end).
  std::optional<ParseError> separator(bool end_of_line);
  /// After the last token: only whitespace (lenient) or nothing (strict) may follow.
  std::optional<ParseError> finish();

  /// An error at the current position.
  [[nodiscard]] ParseError error_here(std::string message) const;
  [[nodiscard]] bool strict() const { return strict_; }

 private:
  void advance();
  /// Lenient mode: moves past any whitespace, counting lines.
  void skip_space();
  std::string_view input_;
  bool strict_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
  std::size_t line_start_ = 0;
};

/// A token for an error message: quoted, with control bytes escaped, cut to 40 characters.
[[nodiscard]] std::string quote_token(std::string_view text);

/// True for the ASCII digits '0'..'9' (never locale-dependent, unlike std::isdigit).
[[nodiscard]] constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// True for the six ASCII whitespace bytes: ' ', '\t', '\n', '\v', '\f', '\r' (9-13 and 32).
[[nodiscard]] constexpr bool is_space(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte == ' ' || (byte >= '\t' && byte <= '\r');
}

}  // namespace attn
