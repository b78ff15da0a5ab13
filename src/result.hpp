// The error policy (README, "Error policy"): input and files give a Result<T, E> with a positioned,
// human message; kernels return a status enum; a broken internal contract throws ContractError.
// std::expected is C++23; Result is the small subset we use.
#pragma once

#include <cstddef>
#include <stdexcept>
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

/// An error that is a whole message: a bad flag value, a file that cannot be read or written (the
/// message names the flag or the path and the reason).
struct Error {
  std::string message;
  [[nodiscard]] const std::string& to_string() const { return message; }
};

/// The value of a Result that carries nothing but success.
struct Ok {
  friend bool operator==(Ok, Ok) = default;
};

/// A value of type T, or the error E that prevented it.
template <typename T, typename E = ParseError> class Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(E error) : state_(std::move(error)) {}  // NOLINT: implicit by design

  [[nodiscard]] bool ok() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] T& value() & { return std::get<0>(state_); }
  [[nodiscard]] const T& value() const& { return std::get<0>(state_); }
  [[nodiscard]] T&& value() && { return std::get<0>(std::move(state_)); }
  [[nodiscard]] T& operator*() & { return value(); }
  [[nodiscard]] const T& operator*() const& { return value(); }
  [[nodiscard]] const T* operator->() const { return &value(); }
  [[nodiscard]] const E& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, E> state_;
};

/// A broken internal contract: a caller passed what a function's documentation rules out (a
/// generator's invalid output, a non-finite value to the formatter). Never the user's input,
/// which gets a Result. Each function that throws it says when.
class ContractError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace attn
