#include "scanner.hpp"

#include <cstdio>

namespace attn {

void Scanner::advance() {
  if (input_[pos_] == '\n') {
    ++line_;
    line_start_ = pos_ + 1;
  }
  ++pos_;
}

ParseError Scanner::error_here(std::string message) const {
  return ParseError{line_, pos_ - line_start_ + 1, std::move(message)};
}

Result<std::optional<Token>> Scanner::next() {
  if (!strict_) {
    while (pos_ < input_.size() && is_space(input_[pos_])) advance();
  } else if (pos_ < input_.size() && is_space(input_[pos_])) {
    const char c = input_[pos_];
    return error_here(c == '\n' ? "expected a token, found a blank line"
                                : "expected a token, found " + quote_token(std::string_view(&input_[pos_], 1)));
  }
  if (pos_ == input_.size()) return std::optional<Token>{};
  Token token{{}, line_, pos_ - line_start_ + 1};
  const std::size_t start = pos_;
  while (pos_ < input_.size() && !is_space(input_[pos_])) ++pos_;
  token.text = input_.substr(start, pos_ - start);
  return std::optional<Token>{token};
}

std::optional<ParseError> Scanner::separator(bool end_of_line) {
  if (!strict_) return std::nullopt;
  const char wanted = end_of_line ? '\n' : ' ';
  const char* name = end_of_line ? "expected a line end '\\n'" : "expected a single space";
  if (pos_ == input_.size()) return error_here(std::string(name) + ", found end of input");
  if (input_[pos_] != wanted) {
    return error_here(std::string(name) + ", found " + quote_token(std::string_view(&input_[pos_], 1)));
  }
  advance();
  return std::nullopt;
}

std::optional<ParseError> Scanner::finish() {
  if (!strict_) {
    while (pos_ < input_.size() && is_space(input_[pos_])) advance();
  }
  if (pos_ == input_.size()) return std::nullopt;
  std::size_t end = pos_;
  while (end < input_.size() && !is_space(input_[end])) ++end;
  std::string_view rest = input_.substr(pos_, end == pos_ ? 1 : end - pos_);
  return error_here("expected end of input, found " + quote_token(rest));
}

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
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
      out += buffer;
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

}  // namespace attn
