// Property checks for the fuzz targets: a violated property prints what failed and aborts, which
// libFuzzer reports as a crash (with the reproducer path) and the replay ctest as a failure.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "result.hpp"

namespace attn::fuzz {

/// Prints "property failed: what" (and detail, when given) and aborts.
[[noreturn]] inline void property_failed(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "property failed: %s\n", what);
  if (!detail.empty()) std::fprintf(stderr, "%.*s\n", static_cast<int>(detail.size()), detail.data());
  std::abort();
}

/// Aborts unless condition holds. A function, not a macro: every property has a name.
inline void require(bool condition, const char* what, std::string_view detail = {}) {
  if (!condition) property_failed(what, detail);
}

/// An error is positioned when it points inside the input (or one past the end of a line, where a
/// missing token was expected), and is one nonempty line of text, as the CLI prints it.
inline void require_positioned(const ParseError& error, std::string_view input) {
  // Line starts found with find('\n') (memchr): this runs on every rejected input, and a loop over
  // every byte was a visible share of the readers' fuzzing time.
  std::size_t line = 1;
  std::size_t line_start = 0;
  while (line < error.line) {
    const std::size_t newline = input.find('\n', line_start);
    if (newline == std::string_view::npos) break;
    ++line;
    line_start = newline + 1;
  }
  const std::size_t line_end = std::min(input.find('\n', line_start), input.size());
  // The message is built only on failure: this runs on every rejected input.
  if (error.line < 1 || error.column < 1) property_failed("error position is 1-based", error.to_string());
  if (line != error.line) property_failed("error line exists in the input", error.to_string());
  if (error.column > line_end - line_start + 1) property_failed("error column lies within its line", error.to_string());
  if (error.message.empty()) property_failed("error has a message", error.to_string());
  if (error.message.find('\n') != std::string::npos) property_failed("error message is one line", error.to_string());
}

}  // namespace attn::fuzz
