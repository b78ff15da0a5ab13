#include "scanner.hpp"

#include <array>
#include <cstdio>

namespace attn {

namespace {

// Byte classes for the scanning loops: one table load per byte instead of a chain of comparisons.
// The loops walk pointers, not indices, so the only integer comparison per byte is the class test
// (coverage-instrumented builds trace every integer comparison, which made these loops the
// readers' fuzz targets' hottest code).
enum ByteClass : unsigned char { kOther = 0, kBlank = 1, kNewline = 2 };

constexpr std::array<unsigned char, 256> byte_classes() {
  std::array<unsigned char, 256> table{};
  for (int c = 0; c < 256; ++c) {
    if (is_space(static_cast<char>(c))) table[static_cast<std::size_t>(c)] = c == '\n' ? kNewline : kBlank;
  }
  return table;
}

constexpr std::array<unsigned char, 256> kByteClass = byte_classes();

unsigned char byte_class(char c) { return kByteClass[static_cast<unsigned char>(c)]; }

}  // namespace

void Scanner::advance() {
  if (input_[pos_] == '\n') {
    ++line_;
    line_start_ = pos_ + 1;
  }
  ++pos_;
}

void Scanner::skip_space() {
  const char* const begin = input_.data();
  const char* const end = begin + input_.size();
  const char* p = begin + pos_;
  for (; p != end; ++p) {
    const unsigned char kind = byte_class(*p);
    if (kind == kOther) break;
    if (kind == kNewline) {
      ++line_;
      line_start_ = static_cast<std::size_t>(p - begin) + 1;
    }
  }
  pos_ = static_cast<std::size_t>(p - begin);
}

ParseError Scanner::error_here(std::string message) const {
  return ParseError{line_, pos_ - line_start_ + 1, std::move(message)};
}

Result<std::optional<Token>> Scanner::next() {
  if (!strict_) {
    skip_space();
  } else if (pos_ < input_.size() && is_space(input_[pos_])) {
    const char c = input_[pos_];
    return error_here(c == '\n' ? "expected a token, found a blank line"
                                : "expected a token, found " + quote_token(std::string_view(&input_[pos_], 1)));
  }
  if (pos_ == input_.size()) return std::optional<Token>{};
  const char* const start = input_.data() + pos_;
  const char* const end = input_.data() + input_.size();
  const char* p = start;
  while (p != end && byte_class(*p) == kOther) ++p;
  Token token{std::string_view(start, static_cast<std::size_t>(p - start)), line_, pos_ - line_start_ + 1};
  pos_ += token.text.size();
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
  if (!strict_) skip_space();
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
