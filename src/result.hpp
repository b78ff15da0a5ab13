// Result<T>: a value or a positioned error. std::expected is C++23; this is the small subset we use.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <variant>

namespace attn {

/// Where input went wrong and what was expected there. line and column are 1-based byte positions.
struct ParseError {
  std::size_t line = 0;
  std::size_t column = 0;
  std::string message;

  /// "line L, column C: message" — the one line every command prints on stderr.
  [[nodiscard]] std::string to_string() const {
    return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message;
  }
};

/// A value of type T, or the ParseError that prevented it.
template <typename T>
class Result {
 public:
  Result(T value) : state_(std::move(value)) {}             // NOLINT: implicit by design
  Result(ParseError error) : state_(std::move(error)) {}    // NOLINT: implicit by design

  [[nodiscard]] bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] T& value() & { return std::get<0>(state_); }
  [[nodiscard]] const T& value() const& { return std::get<0>(state_); }
  [[nodiscard]] T&& value() && { return std::get<0>(std::move(state_)); }
  [[nodiscard]] const ParseError& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, ParseError> state_;
};

}  // namespace attn
