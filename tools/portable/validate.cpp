// attncheck portable input validator: one C++17 source file, the standard library only, written
// into judge packages by `attncheck package`. It accepts exactly what `attncheck validate` (the
// strict reader of src/instance_io.cpp at the package's limits) accepts, with the same message,
// for the three problems: single spaces, LF line ends, a final newline, integer headers without
// sign or leading zeros, decimals -?(0|[1-9][0-9]*)(.[0-9]+)? without "-0", every bound checked
// on the exact decimal text.
//
//   validate [--testlib | --kattis] [other flags, ignored] < INPUT
//   testlib (Polygon):          exit 0 valid, 1 invalid
//   Kattis (problemtools):      exit 42 valid, 43 invalid
// The reason goes to stderr as "line L, column C: what was expected".
// Build: g++ -std=c++17 -O2 validate.cpp -o validate
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

// ---- attncheck package settings: begin (rewritten by `attncheck package`) ----
namespace settings {
constexpr const char* kProblem = "ai006";  // ai006 | ai031 | general
constexpr std::size_t kMaxN = 80, kMaxM = 80, kMaxD = 16, kMaxHeads = 1, kMaxBatch = 1;
constexpr std::size_t kMaxDecimals = 4;
constexpr std::size_t kMaxFractionDigits = 10;  // digits after a real's point
constexpr const char* kMaxAbsQK = "1000";  // bound on |Q|, |K| (and X), a canonical decimal
constexpr const char* kMaxAbsV = "1000";   // bound on |V|
constexpr bool kKattis = false;            // default exit codes: Kattis 42/43, else testlib 0/1
}  // namespace settings
// ---- attncheck package settings: end ----

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// A token for a message: quoted, control bytes escaped, cut to 40 characters (src/scanner.cpp).
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
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
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

// ---- Decimals (src/decimal.cpp): grammar, canonical text, exact magnitude comparison ----

enum class DecimalStatus { ok, not_a_number, too_large, too_small };

struct Decimal {
  DecimalStatus status = DecimalStatus::not_a_number;
  bool negative = false;
  std::string canonical;  // -?(0|[1-9]D*)(.D*[1-9])?
};

// Nonzero inputs below 10^-300 are refused (a double would underflow); 10^308 and above too.
constexpr long long kMinNonzeroExponent = -300;
constexpr long long kExponentSaturation = 1'000'000'000;

// -?(0|[1-9]D*)(.D+)? and not a negative zero: what the strict reader demands.
bool is_strict_decimal(std::string_view token) {
  std::size_t i = 0;
  if (i < token.size() && token[i] == '-') ++i;
  const std::size_t integer_start = i;
  bool nonzero = false;
  for (; i < token.size() && is_digit(token[i]); ++i) nonzero = nonzero || token[i] != '0';
  const std::size_t integer_length = i - integer_start;
  if (integer_length == 0) return false;
  if (integer_length > 1 && token[integer_start] == '0') return false;
  if (i < token.size() && token[i] == '.') {
    const std::size_t fraction_start = ++i;
    for (; i < token.size() && is_digit(token[i]); ++i) nonzero = nonzero || token[i] != '0';
    if (i == fraction_start) return false;
  }
  if (i != token.size()) return false;
  return !(token[0] == '-' && !nonzero);
}

// [+-]? (D+ (.D*)? | .D+) ([eE][+-]?D+)?, exactly, into canonical text.
Decimal parse_decimal(std::string_view token) {
  Decimal out;
  std::size_t i = 0;
  if (i < token.size() && (token[i] == '+' || token[i] == '-')) {
    out.negative = token[i] == '-';
    ++i;
  }
  auto digit_run = [&] {
    const std::size_t start = i;
    while (i < token.size() && is_digit(token[i])) ++i;
    return token.substr(start, i - start);
  };
  std::string digits(digit_run());
  const std::size_t integer_digits = digits.size();
  if (i < token.size() && token[i] == '.') {
    ++i;
    digits += digit_run();
  }
  if (digits.empty()) return out;
  long long exponent = 0;
  if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    bool exponent_negative = false;
    if (i < token.size() && (token[i] == '+' || token[i] == '-')) exponent_negative = token[i++] == '-';
    if (i == token.size() || !is_digit(token[i])) return out;
    while (i < token.size() && is_digit(token[i])) {
      exponent = std::min(exponent * 10 + (token[i++] - '0'), kExponentSaturation);
    }
    if (exponent_negative) exponent = -exponent;
  }
  if (i != token.size()) return out;

  // value = 0.DIGITS x 10^point after stripping leading zeros.
  long long point = static_cast<long long>(integer_digits) + exponent;
  std::size_t first = 0;
  while (first < digits.size() && digits[first] == '0') ++first;
  if (first == digits.size()) {
    out.status = DecimalStatus::ok;
    out.canonical = "0";
    return out;
  }
  point -= static_cast<long long>(first);
  std::size_t last = digits.size() - 1;
  while (digits[last] == '0') --last;
  const std::string_view significant(digits.data() + first, last - first + 1);
  if (point > 308) {
    out.status = DecimalStatus::too_large;
    return out;
  }
  if (point - 1 < kMinNonzeroExponent) {
    out.status = DecimalStatus::too_small;
    return out;
  }
  std::string text = out.negative ? "-" : "";
  const auto length = static_cast<long long>(significant.size());
  if (point <= 0) {
    text += "0.";
    text.append(static_cast<std::size_t>(-point), '0');
    text += significant;
  } else if (point >= length) {
    text += significant;
    text.append(static_cast<std::size_t>(point - length), '0');
  } else {
    text += significant.substr(0, static_cast<std::size_t>(point));
    text += '.';
    text += significant.substr(static_cast<std::size_t>(point));
  }
  out.status = DecimalStatus::ok;
  out.canonical = std::move(text);
  return out;
}

// |a| against |b| for canonical texts: -1, 0 or 1.
int compare_magnitude(std::string_view a, std::string_view b) {
  if (!a.empty() && a[0] == '-') a.remove_prefix(1);
  if (!b.empty() && b[0] == '-') b.remove_prefix(1);
  const std::size_t a_point = std::min(a.find('.'), a.size());
  const std::size_t b_point = std::min(b.find('.'), b.size());
  if (a_point != b_point) return a_point < b_point ? -1 : 1;
  const int by_integer = a.substr(0, a_point).compare(b.substr(0, b_point));
  if (by_integer != 0) return by_integer < 0 ? -1 : 1;
  const std::string_view a_fraction = a_point < a.size() ? a.substr(a_point + 1) : std::string_view{};
  const std::string_view b_fraction = b_point < b.size() ? b.substr(b_point + 1) : std::string_view{};
  const int by_fraction = a_fraction.compare(b_fraction);
  return by_fraction < 0 ? -1 : (by_fraction > 0 ? 1 : 0);
}

// ---- The strict reader (src/scanner.cpp, src/instance_io.cpp) ----

// The first error ends the run: thrown out of the reader, caught in main.
struct Invalid {
  std::size_t line, column;
  std::string message;
};

struct Token {
  std::string_view text;
  std::size_t line = 1, column = 1;
};

// What is being read: a header ("n") or a matrix element ("K[2][0]").
struct Field {
  Field(const char* header) : name(header) {}  // NOLINT: implicit, headers are plain names
  Field(const char* matrix, std::size_t item, std::size_t items, std::size_t row, std::size_t col)
      : name(matrix), element(true), item(item), items(items), row(row), col(col) {}
  std::string str() const {
    if (!element) return name;
    std::string text = std::string(name) + "[" + std::to_string(row) + "][" + std::to_string(col) + "]";
    if (items > 1) text += " of batch item " + std::to_string(item);
    return text;
  }
  const char* name;
  bool element = false;
  std::size_t item = 0, items = 1, row = 0, col = 0;
};

class Reader {
 public:
  explicit Reader(std::string_view input) : input_(input) {}

  void read() {
    const std::string_view problem = settings::kProblem;
    std::size_t n = 0, m = 0, d_k = 0, d_v = 0;
    bool explicit_mask = false, self_form = false;
    if (problem == "general") {
      batch_count_ = integer("B", 1, settings::kMaxBatch, false);
      n = integer("n", 1, settings::kMaxN, false);
      m = integer("m", 1, settings::kMaxM, false);
      d_k = integer("d_k", 1, settings::kMaxD, false);
      d_v = integer("d_v", 1, settings::kMaxD, false);
      const std::size_t heads = integer("h", 1, std::min(settings::kMaxHeads, std::min(d_k, d_v)), false);
      check_divides(heads, d_k, "d_k");
      check_divides(heads, d_v, "d_v");
      integer("decimals", 0, settings::kMaxDecimals, true);
      explicit_mask = word("mask", {"none", "causal", "explicit"}, false) == "explicit";
      scale();
      self_form = word("form", {"qkv", "self"}, true) == "self";
      if (self_form && (n != m || d_k != d_v)) {
        error_at(last_, "form self needs n = m and d_k = d_v (X is Q, K and V at once)");
      }
    } else {
      const bool multi_head = problem == "ai031";
      n = m = integer("n", 1, settings::kMaxN, false);
      d_k = d_v = integer("d", 1, settings::kMaxD, !multi_head);
      if (multi_head) {
        const std::size_t heads = integer("h", 1, std::min(settings::kMaxHeads, d_k), true);
        check_divides(heads, d_k, "d");
        explicit_mask = true;
      }
    }
    for (std::size_t b = 0; b < batch_count_; ++b) {
      if (self_form) {
        // X is Q, K and V at once: the tighter of the two bounds applies to it.
        const char* bound =
            compare_magnitude(settings::kMaxAbsQK, settings::kMaxAbsV) <= 0 ? settings::kMaxAbsQK : settings::kMaxAbsV;
        matrix("X", b, n, d_k, bound);
      } else {
        matrix("Q", b, n, d_k, settings::kMaxAbsQK);
        matrix("K", b, m, d_k, settings::kMaxAbsQK);
        matrix("V", b, m, d_v, settings::kMaxAbsV);
      }
      if (explicit_mask) {
        for (std::size_t i = 0; i < n; ++i) {
          for (std::size_t j = 0; j < m; ++j) integer(Field("mask", b, batch_count_, i, j), 0, 1, j + 1 == m);
        }
      }
    }
    finish();
  }

 private:
  [[noreturn]] void error_here(std::string message) const {
    throw Invalid{line_, pos_ - line_start_ + 1, std::move(message)};
  }
  [[noreturn]] static void error_at(const Token& t, std::string message) {
    throw Invalid{t.line, t.column, std::move(message)};
  }

  void advance() {
    if (input_[pos_] == '\n') {
      ++line_;
      line_start_ = pos_ + 1;
    }
    ++pos_;
  }

  // The next token, or false at the end of the input; whitespace here is an error.
  bool next(Token& token) {
    if (pos_ < input_.size() && is_space(input_[pos_])) {
      const char c = input_[pos_];
      error_here(c == '\n' ? "expected a token, found a blank line"
                           : "expected a token, found " + quote_token(std::string_view(&input_[pos_], 1)));
    }
    if (pos_ == input_.size()) return false;
    token = Token{{}, line_, pos_ - line_start_ + 1};
    const std::size_t start = pos_;
    while (pos_ < input_.size() && !is_space(input_[pos_])) ++pos_;
    token.text = input_.substr(start, pos_ - start);
    return true;
  }

  // The separator after a token: ' ' inside a line, '\n' at its end.
  void separator(bool end_of_line) {
    const char wanted = end_of_line ? '\n' : ' ';
    const std::string name = end_of_line ? "expected a line end '\\n'" : "expected a single space";
    if (pos_ == input_.size()) error_here(name + ", found end of input");
    if (input_[pos_] != wanted) error_here(name + ", found " + quote_token(std::string_view(&input_[pos_], 1)));
    advance();
  }

  void finish() {
    if (pos_ == input_.size()) return;
    std::size_t end = pos_;
    while (end < input_.size() && !is_space(input_[end])) ++end;
    const std::string_view rest = input_.substr(pos_, end == pos_ ? 1 : end - pos_);
    error_here("expected end of input, found " + quote_token(rest));
  }

  Token token(const Field& name, const std::string& kind, bool end_of_line) {
    Token t;
    if (!next(t)) error_here("expected " + name.str() + " (" + kind + "), found end of input");
    last_ = t;
    separator(end_of_line);
    return t;
  }

  std::size_t integer(const Field& name, std::size_t low, std::size_t high, bool end_of_line) {
    const Token t = token(name, "an integer", end_of_line);
    const std::string_view digits = t.text;
    const bool all_digits = !digits.empty() && std::all_of(digits.begin(), digits.end(), is_digit);
    const bool canonical = digits.size() == 1 || (!digits.empty() && digits[0] != '0');
    if (!all_digits || !canonical) {
      error_at(t, "expected an integer for " + name.str() + ", found " + quote_token(t.text));
    }
    // Saturate: a 1 MB run of digits is simply "too large", never a wrapped number.
    std::size_t value = 0;
    for (char c : digits) value = std::min<std::size_t>(value * 10 + static_cast<std::size_t>(c - '0'), 1u << 30);
    if (value < low || value > high) {
      error_at(t, name.str() + " = " + std::string(t.text.substr(0, 40)) + " is outside " + std::to_string(low) +
                      " <= " + name.str() + " <= " + std::to_string(high));
    }
    return value;
  }

  // A real within |x| <= bound; returns its canonical text.
  std::string real_value(const Token& t, const Field& name, std::string_view bound) {
    const Decimal decimal = parse_decimal(t.text);
    const std::string shown = std::string(t.text.substr(0, 40)) + (t.text.size() > 40 ? "..." : "");
    const std::string limit = "|x| <= " + std::string(bound);
    switch (decimal.status) {
      case DecimalStatus::not_a_number:
        error_at(t, "expected a real number for " + name.str() + ", found " + quote_token(t.text));
      case DecimalStatus::too_large:
        error_at(t, name.str() + " = " + shown + " exceeds " + limit);
      case DecimalStatus::too_small:
        error_at(t,
                 name.str() + " = " + shown + " is nonzero but below 1e-300 in magnitude (a double would underflow)");
      case DecimalStatus::ok:
        break;
    }
    if (!is_strict_decimal(t.text)) {
      error_at(t, name.str() + " = " + quote_token(t.text) +
                      " is not a canonical decimal (expected -?(0|[1-9][0-9]*)(.[0-9]+)?, no '-0')");
    }
    const std::size_t point = t.text.find('.');
    const std::size_t digits = point == std::string_view::npos ? 0 : t.text.size() - point - 1;
    if (digits > settings::kMaxFractionDigits) {
      error_at(t, name.str() + " = " + shown + " has " + std::to_string(digits) + " digits after the point, at most " +
                      std::to_string(settings::kMaxFractionDigits) + " allowed");
    }
    if (compare_magnitude(decimal.canonical, bound) > 0) error_at(t, name.str() + " = " + shown + " exceeds " + limit);
    return decimal.canonical;
  }

  std::string_view word(const char* name, std::initializer_list<std::string_view> choices, bool end_of_line) {
    std::string list;
    for (std::string_view c : choices) list += (list.empty() ? "" : " | ") + std::string(c);
    const Token t = token(name, list, end_of_line);
    for (std::string_view c : choices) {
      if (t.text == c) return c;
    }
    error_at(t, "expected " + std::string(name) + " " + list + ", found " + quote_token(t.text));
  }

  void matrix(const char* name, std::size_t b, std::size_t rows, std::size_t cols, std::string_view bound) {
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < cols; ++c) {
        const Field field(name, b, batch_count_, r, c);
        real_value(token(field, "a real number", c + 1 == cols), field, bound);
      }
    }
  }

  void check_divides(std::size_t heads, std::size_t d, const char* what) const {
    if (d % heads != 0) {
      error_at(last_, "h = " + std::to_string(heads) + " does not divide " + what + " = " + std::to_string(d));
    }
  }

  // general: none | sqrt | a positive real divisor.
  void scale() {
    const Token t = token("scale", "none | sqrt | a positive real", false);
    if (t.text == "none" || t.text == "sqrt") return;
    std::string canonical;
    try {
      canonical = real_value(t, "scale", settings::kMaxAbsQK);
    } catch (Invalid& invalid) {
      invalid.message = "expected scale none | sqrt | a positive real: " + invalid.message;
      throw;
    }
    // Canonical, not below 1e-300: positive unless zero or negative.
    if (canonical == "0" || canonical[0] == '-') error_at(t, "scale = " + canonical + " must be positive");
  }

  std::string_view input_;
  std::size_t pos_ = 0, line_ = 1, line_start_ = 0;
  Token last_;
  std::size_t batch_count_ = 1;
};

}  // namespace

int main(int argc, char** argv) {
  bool kattis = settings::kKattis;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--kattis") kattis = true;
    if (flag == "--testlib") kattis = false;
  }
  const int valid = kattis ? 42 : 0;
  const int invalid = kattis ? 43 : 1;
  std::string input;
  char buffer[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) input.append(buffer, got);
  if (std::ferror(stdin) != 0) {
    std::fprintf(stderr, "cannot read the input\n");
    return invalid;
  }
  try {
    Reader(input).read();
  } catch (const Invalid& error) {
    std::fprintf(stderr, "line %zu, column %zu: %s\n", error.line, error.column, error.message.c_str());
    return invalid;
  }
  return valid;
}
