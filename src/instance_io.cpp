#include "instance_io.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "decimal.hpp"
#include "scanner.hpp"

namespace attn {
namespace {

// The name of what is being read: a header ("n") or a matrix element ("K[2][0]"). Only spelled
// out when an error needs it; building names eagerly cost more than parsing the numbers.
struct Field {
  Field(const char* header) : name(header) {}  // NOLINT: implicit, headers are plain names
  Field(std::string_view matrix, std::size_t item, std::size_t items, std::size_t row, std::size_t col)
      : name(matrix), element(true), item(item), items(items), row(row), col(col) {}

  [[nodiscard]] std::string str() const {
    if (!element) return std::string(name);
    std::string text = std::string(name) + "[" + std::to_string(row) + "][" + std::to_string(col) + "]";
    if (items > 1) text += " of batch item " + std::to_string(item);
    return text;
  }

  std::string_view name;
  bool element = false;
  std::size_t item = 0, items = 1, row = 0, col = 0;
};

std::string limit_text(std::string_view bound) { return "|x| <= " + std::string(bound); }

// Propagates the error of a Result-returning step out of the Reader function that called it.
#define ATTN_TRY(variable, expression) \
  auto variable = (expression);        \
  if (!variable) return variable.error()

class Reader {
 public:
  Reader(std::string_view input, const Limits& limits, Strictness strictness)
      : scanner_(input, strictness == Strictness::strict), limits_(limits), input_size_(input.size()) {}

  Result<Instance> read(Problem problem);

 private:
  /// A real as the kernel (double) and the oracle (exact canonical text) read it.
  struct Real {
    double value = 0;
    std::string text;
  };
  // Each step consumes one token and the separator after it.
  Result<Token> token(const Field& name, std::string_view kind, bool end_of_line);
  Result<std::size_t> integer(const Field& name, std::size_t low, std::size_t high, bool end_of_line);
  Result<Real> real(const Field& name, std::string_view bound, bool end_of_line);
  Result<Real> real_value(const Token& t, const Field& name, std::string_view bound);
  Result<std::string_view> word(const Field& name, std::initializer_list<std::string_view> choices, bool end_of_line);
  Result<Ok> matrix(std::string_view name, std::size_t b, std::size_t rows, std::size_t cols, std::string_view bound,
                    Matrix& out);
  Result<Ok> mask(std::size_t b, std::size_t n, std::size_t m, std::vector<std::uint8_t>& out);
  Result<Ok> general_header(Instance& instance);
  Result<Ok> batch_item(const Instance& instance, std::size_t b, BatchItem& item);
  Result<Ok> check_divides(const Token& at, std::size_t heads, std::size_t d, const char* what) const;
  static ParseError error_at(const Token& t, std::string message) { return {t.line, t.column, std::move(message)}; }

  Scanner scanner_;
  const Limits& limits_;
  std::size_t input_size_;
  Token last_;  // the token read last, for messages about it after the fact
  std::size_t batch_count_ = 1;
};

Result<Token> Reader::token(const Field& name, std::string_view kind, bool end_of_line) {
  ATTN_TRY(next, scanner_.next());
  if (!next.value()) {
    return scanner_.error_here("expected " + name.str() + " (" + std::string(kind) + "), found end of input");
  }
  last_ = *next.value();
  if (auto bad = scanner_.separator(end_of_line)) return *bad;
  return last_;
}

Result<std::size_t> Reader::integer(const Field& name, std::size_t low, std::size_t high, bool end_of_line) {
  ATTN_TRY(t, token(name, "an integer", end_of_line));
  std::string_view digits = t->text;
  bool negative = false;
  if (!scanner_.strict() && !digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  const bool all_digits = !digits.empty() && std::all_of(digits.begin(), digits.end(), is_digit);
  const bool canonical = digits.size() == 1 || (!digits.empty() && digits[0] != '0');
  if (!all_digits || (scanner_.strict() && !canonical)) {
    return error_at(*t, "expected an integer for " + name.str() + ", found " + quote_token(t->text));
  }
  // Saturate: a 1 MB run of digits is simply "too large", never parsed into a wrapped number.
  std::size_t value = 0;
  for (char c : digits) value = std::min<std::size_t>(value * 10 + static_cast<std::size_t>(c - '0'), 1u << 30);
  const bool is_zero = value == 0;
  if ((negative && !is_zero) || value < low || value > high) {
    return error_at(*t, name.str() + " = " + std::string(t->text.substr(0, 40)) + " is outside " + std::to_string(low) +
                            " <= " + name.str() + " <= " + std::to_string(high));
  }
  return value;
}

Result<Reader::Real> Reader::real(const Field& name, std::string_view bound, bool end_of_line) {
  ATTN_TRY(t, token(name, "a real number", end_of_line));
  return real_value(*t, name, bound);
}

Result<Reader::Real> Reader::real_value(const Token& t, const Field& name, std::string_view bound) {
  Decimal decimal = parse_decimal(t.text);
  auto shown = [&] { return std::string(t.text.substr(0, 40)) + (t.text.size() > 40 ? "..." : ""); };
  switch (decimal.status) {
    case DecimalStatus::not_a_number:
      return error_at(t, "expected a real number for " + name.str() + ", found " + quote_token(t.text));
    case DecimalStatus::too_large:
      return error_at(t, name.str() + " = " + shown() + " exceeds " + limit_text(bound));
    case DecimalStatus::too_small:
      return error_at(
          t, name.str() + " = " + shown() + " is nonzero but below 1e-300 in magnitude (a double would underflow)");
    case DecimalStatus::ok:
      break;
  }
  // A token equal to its canonical form is strict already (the common case: one string compare).
  if (scanner_.strict() && decimal.canonical != t.text && !is_strict_decimal(t.text)) {
    return error_at(t, name.str() + " = " + quote_token(t.text) +
                           " is not a canonical decimal (expected -?(0|[1-9][0-9]*)(.[0-9]+)?, no '-0')");
  }
  if (scanner_.strict()) {
    const std::size_t point = t.text.find('.');
    const std::size_t digits = point == std::string_view::npos ? 0 : t.text.size() - point - 1;
    if (digits > limits_.max_fraction_digits) {
      return error_at(t, name.str() + " = " + shown() + " has " + std::to_string(digits) +
                             " digits after the point, at most " + std::to_string(limits_.max_fraction_digits) +
                             " allowed");
    }
  }
  if (compare_magnitude(decimal.canonical, bound) > 0) {
    return error_at(t, name.str() + " = " + shown() + " exceeds " + limit_text(bound));
  }
  // Correctly rounded conversion of the exact decimal; the sign of "-0" is kept in the double.
  Real real;
  const std::string& canonical = decimal.canonical;
  std::from_chars(canonical.data(), canonical.data() + canonical.size(), real.value);
  if (decimal.negative && real.value == 0.0) real.value = -0.0;
  real.text = std::move(decimal.canonical);
  return real;
}

Result<std::string_view> Reader::word(const Field& name, std::initializer_list<std::string_view> choices,
                                      bool end_of_line) {
  std::string list;
  for (std::string_view c : choices) list += (list.empty() ? "" : " | ") + std::string(c);
  ATTN_TRY(t, token(name, list, end_of_line));
  for (std::string_view c : choices) {
    if (t->text == c) return c;
  }
  return error_at(*t, "expected " + name.str() + " " + list + ", found " + quote_token(t->text));
}

Result<Ok> Reader::matrix(std::string_view name, std::size_t b, std::size_t rows, std::size_t cols,
                          std::string_view bound, Matrix& out) {
  out.rows = rows;
  out.cols = cols;
  // Reserve no more than the input could hold (each number takes at least two bytes).
  const std::size_t count = rows * cols;
  out.values.reserve(std::min(count, input_size_ / 2 + 1));
  out.text.reserve(std::min(count, input_size_ / 2 + 1));
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      ATTN_TRY(real, this->real(Field(name, b, batch_count_, r, c), bound, c + 1 == cols));
      out.values.push_back(real->value);
      out.text.push_back(std::move(real.value().text));
    }
  }
  return Ok{};
}

Result<Ok> Reader::mask(std::size_t b, std::size_t n, std::size_t m, std::vector<std::uint8_t>& out) {
  out.reserve(std::min(n * m, input_size_ / 2 + 1));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < m; ++j) {
      ATTN_TRY(bit, integer(Field("mask", b, batch_count_, i, j), 0, 1, j + 1 == m));
      out.push_back(static_cast<std::uint8_t>(*bit));
    }
  }
  return Ok{};
}

Result<Ok> Reader::check_divides(const Token& at, std::size_t heads, std::size_t d, const char* what) const {
  if (d % heads == 0) return Ok{};
  return error_at(at, "h = " + std::to_string(heads) + " does not divide " + what + " = " + std::to_string(d));
}

Result<Ok> Reader::general_header(Instance& instance) {
  ATTN_TRY(batch, integer("B", 1, limits_.max_batch, false));
  ATTN_TRY(n, integer("n", 1, limits_.max_n, false));
  ATTN_TRY(m, integer("m", 1, limits_.max_m, false));
  ATTN_TRY(d_k, integer("d_k", 1, limits_.max_d, false));
  ATTN_TRY(d_v, integer("d_v", 1, limits_.max_d, false));
  ATTN_TRY(heads, integer("h", 1, std::min(limits_.max_heads, std::min(*d_k, *d_v)), false));
  ATTN_TRY(k_divides, check_divides(last_, *heads, *d_k, "d_k"));
  ATTN_TRY(v_divides, check_divides(last_, *heads, *d_v, "d_v"));
  ATTN_TRY(decimals, integer("decimals", 0, static_cast<std::size_t>(limits_.max_decimals), true));
  instance.n = *n;
  instance.m = *m;
  instance.d_k = *d_k;
  instance.d_v = *d_v;
  instance.heads = *heads;
  instance.decimals = static_cast<int>(*decimals);
  batch_count_ = *batch;
  instance.batch.resize(*batch);

  ATTN_TRY(mask, word("mask", {"none", "causal", "explicit"}, false));
  instance.mask = *mask == "none" ? MaskKind::none : *mask == "causal" ? MaskKind::causal : MaskKind::explicit_mask;

  ATTN_TRY(scale, token("scale", "none | sqrt | a positive real", false));
  if (scale->text == "none" || scale->text == "sqrt") {
    instance.scale = scale->text == "none" ? ScaleKind::none : ScaleKind::sqrt_head_dim;
  } else {
    auto value = real_value(*scale, "scale", limits_.max_abs_qk);
    if (!value) {
      ParseError error = value.error();
      error.message = "expected scale none | sqrt | a positive real: " + error.message;
      return error;
    }
    instance.scale_text = value->text;
    if (!(value->value > 0)) return error_at(*scale, "scale = " + instance.scale_text + " must be positive");
    instance.scale = ScaleKind::explicit_value;
  }
  ATTN_TRY(form, word("form", {"qkv", "self"}, true));
  instance.self_form = *form == "self";
  if (instance.self_form && (instance.n != instance.m || instance.d_k != instance.d_v)) {
    return error_at(last_, "form self needs n = m and d_k = d_v (X is Q, K and V at once)");
  }
  return Ok{};
}

Result<Ok> Reader::batch_item(const Instance& instance, std::size_t b, BatchItem& item) {
  const Limits& L = limits_;
  if (instance.self_form) {
    // X is Q, K and V at once: the tighter of the two bounds applies to it.
    const std::string& bound = compare_magnitude(L.max_abs_qk, L.max_abs_v) <= 0 ? L.max_abs_qk : L.max_abs_v;
    ATTN_TRY(x, matrix("X", b, instance.n, instance.d_k, bound, item.Q));
    item.K = item.Q;
    item.V = item.Q;
  } else {
    ATTN_TRY(q, matrix("Q", b, instance.n, instance.d_k, L.max_abs_qk, item.Q));
    ATTN_TRY(k, matrix("K", b, instance.m, instance.d_k, L.max_abs_qk, item.K));
    ATTN_TRY(v, matrix("V", b, instance.m, instance.d_v, L.max_abs_v, item.V));
  }
  if (instance.mask == MaskKind::explicit_mask) return mask(b, instance.n, instance.m, item.mask);
  return Ok{};
}

Result<Instance> Reader::read(Problem problem) {
  Instance instance;
  instance.problem = problem;
  if (problem == Problem::general) {
    ATTN_TRY(header, general_header(instance));
  } else {
    const bool multi_head = problem == Problem::ai031;
    ATTN_TRY(n, integer("n", 1, limits_.max_n, false));
    ATTN_TRY(d, integer("d", 1, limits_.max_d, !multi_head));
    instance.n = instance.m = *n;
    instance.d_k = instance.d_v = *d;
    instance.decimals = problem == Problem::ai006 ? 4 : 2;
    instance.mask = multi_head ? MaskKind::explicit_mask : MaskKind::causal;
    instance.batch.resize(1);
    if (multi_head) {
      ATTN_TRY(heads, integer("h", 1, std::min(limits_.max_heads, instance.d_k), true));
      ATTN_TRY(divides, check_divides(last_, *heads, instance.d_k, "d"));
      instance.heads = *heads;
    }
  }
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    ATTN_TRY(item, batch_item(instance, b, instance.batch[b]));
  }
  if (auto trailing = scanner_.finish()) return *trailing;
  return instance;
}

#undef ATTN_TRY

}  // namespace

Result<Instance> read_instance(std::string_view input, Problem problem, const Limits& limits, Strictness strictness) {
  return Reader(input, limits, strictness).read(problem);
}

namespace {

void append_matrix(std::string& out, const Matrix& matrix) {
  for (std::size_t r = 0; r < matrix.rows; ++r) {
    for (std::size_t c = 0; c < matrix.cols; ++c) {
      out += matrix.text_at(r, c);
      out += c + 1 == matrix.cols ? '\n' : ' ';
    }
  }
}

void append_mask(std::string& out, const std::vector<std::uint8_t>& mask, std::size_t n, std::size_t m) {
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < m; ++j) {
      out += mask[i * m + j] ? '1' : '0';
      out += j + 1 == m ? '\n' : ' ';
    }
  }
}

}  // namespace

std::string write_header(const Header& header) {
  std::string out;
  auto number = [&](std::size_t value, char after) {
    out += std::to_string(value);
    out += after;
  };
  switch (header.problem) {
    case Problem::ai006:
      number(header.n, ' ');
      number(header.d_k, '\n');
      break;
    case Problem::ai031:
      number(header.n, ' ');
      number(header.d_k, ' ');
      number(header.heads, '\n');
      break;
    case Problem::general:
      number(header.batch, ' ');
      number(header.n, ' ');
      number(header.m, ' ');
      number(header.d_k, ' ');
      number(header.d_v, ' ');
      number(header.heads, ' ');
      number(static_cast<std::size_t>(header.decimals), '\n');
      out += header.mask == MaskKind::none ? "none " : header.mask == MaskKind::causal ? "causal " : "explicit ";
      out += header.scale;
      out += header.self_form ? " self\n" : " qkv\n";
      break;
  }
  return out;
}

std::string write_instance(const Instance& instance) {
  const std::string scale = instance.scale == ScaleKind::none            ? "none"
                            : instance.scale == ScaleKind::sqrt_head_dim ? "sqrt"
                                                                         : instance.scale_text;
  std::string out =
      write_header({instance.problem, instance.batch.size(), instance.n, instance.m, instance.d_k, instance.d_v,
                    instance.heads, instance.decimals, instance.mask, scale, instance.self_form});
  for (const BatchItem& item : instance.batch) {
    append_matrix(out, item.Q);
    if (!instance.self_form) {
      append_matrix(out, item.K);
      append_matrix(out, item.V);
    }
    if (instance.mask == MaskKind::explicit_mask) append_mask(out, item.mask, instance.n, instance.m);
  }
  return out;
}

}  // namespace attn
