#include "campaign/transforms.hpp"

#include <charconv>

#include "decimal.hpp"
#include "judge/rules.hpp"
#include "result.hpp"

namespace attn::verify {
namespace {

// Copies columns [from, from + width) of `source` into columns [to, to + width) of `target`.
void copy_block(const Matrix& source, std::size_t from, Matrix& target, std::size_t to, std::size_t width) {
  for (std::size_t r = 0; r < source.rows; ++r) {
    for (std::size_t c = 0; c < width; ++c) {
      target.values[r * target.cols + to + c] = source.values[r * source.cols + from + c];
      target.text[r * target.cols + to + c] = source.text[r * source.cols + from + c];
    }
  }
}

Matrix sized(std::size_t rows, std::size_t cols) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.values.assign(rows * cols, 0.0);
  m.text.assign(rows * cols, "0");
  return m;
}

// Doubles or halves a canonical decimal exactly (digit arithmetic; halving adds one digit at most).
std::string times_two(const std::string& text) {
  const bool negative = !text.empty() && text[0] == '-';
  std::string digits = text.substr(negative ? 1 : 0);
  int carry = 0;
  for (std::size_t i = digits.size(); i-- > 0;) {
    if (digits[i] == '.') continue;
    const int d = (digits[i] - '0') * 2 + carry;
    digits[i] = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  if (carry) digits.insert(0, 1, '1');
  return (negative ? "-" : "") + digits;
}

std::string half_of(const std::string& text) {
  const bool negative = !text.empty() && text[0] == '-';
  std::string digits = text.substr(negative ? 1 : 0);
  if (digits.find('.') == std::string::npos) digits += ".";
  digits += "0";
  std::string out;
  int remainder = 0;
  for (char c : digits) {
    if (c == '.') {
      out += c;
      continue;
    }
    const int d = remainder * 10 + (c - '0');
    out += static_cast<char>('0' + d / 2);
    remainder = d % 2;
  }
  return (negative ? "-" : "") + out;  // re-canonicalized by set_text
}

}  // namespace

void set_text(Matrix& matrix, std::size_t index, const std::string& text) {
  const Decimal decimal = parse_decimal(text);
  if (decimal.status != DecimalStatus::ok) throw ContractError("set_text: not a decimal: " + text);
  double value = 0;
  std::from_chars(decimal.canonical.data(), decimal.canonical.data() + decimal.canonical.size(), value);
  matrix.values[index] = decimal.negative && value == 0 ? -0.0 : value;
  matrix.text[index] = decimal.canonical;
}

Instance as_general(Instance instance) {
  instance.problem = Problem::general;
  return instance;
}

Instance with_explicit_mask(Instance instance) {
  if (instance.mask == MaskKind::explicit_mask) return instance;
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    auto& mask = instance.batch[b].mask;
    mask.assign(instance.n * instance.m, 0);
    for (std::size_t i = 0; i < instance.n; ++i) {
      for (std::size_t j = 0; j < instance.m; ++j) mask[i * instance.m + j] = key_visible(instance, b, i, j) ? 1 : 0;
    }
  }
  instance.mask = MaskKind::explicit_mask;
  if (instance.problem == Problem::ai006) instance.problem = Problem::general;
  return instance;
}

Instance permute_keys(const Instance& instance, const std::vector<std::size_t>& permutation) {
  const Instance source_instance = with_explicit_mask(instance);
  Instance out = source_instance;
  out.self_form = false;
  for (std::size_t b = 0; b < out.batch.size(); ++b) {
    const BatchItem& from = source_instance.batch[b];
    BatchItem& to = out.batch[b];
    for (std::size_t j = 0; j < out.m; ++j) {
      const std::size_t source = permutation[j];
      for (std::size_t c = 0; c < out.d_k; ++c) {
        to.K.values[j * out.d_k + c] = from.K.values[source * out.d_k + c];
        to.K.text[j * out.d_k + c] = from.K.text[source * out.d_k + c];
      }
      for (std::size_t c = 0; c < out.d_v; ++c) {
        to.V.values[j * out.d_v + c] = from.V.values[source * out.d_v + c];
        to.V.text[j * out.d_v + c] = from.V.text[source * out.d_v + c];
      }
      for (std::size_t i = 0; i < out.n; ++i) to.mask[i * out.m + j] = from.mask[i * out.m + source];
    }
  }
  return out;
}

Instance permute_heads(const Instance& instance, const std::vector<std::size_t>& permutation) {
  Instance out = instance;
  const std::size_t head_k = instance.d_k / instance.heads, head_v = instance.d_v / instance.heads;
  for (std::size_t b = 0; b < out.batch.size(); ++b) {
    for (std::size_t g = 0; g < instance.heads; ++g) {
      const std::size_t source = permutation[g];
      copy_block(instance.batch[b].Q, source * head_k, out.batch[b].Q, g * head_k, head_k);
      copy_block(instance.batch[b].K, source * head_k, out.batch[b].K, g * head_k, head_k);
      copy_block(instance.batch[b].V, source * head_v, out.batch[b].V, g * head_v, head_v);
    }
  }
  return out;
}

Instance head_slice(const Instance& instance, std::size_t g) {
  Instance out = as_general(instance);
  const std::size_t head_k = instance.d_k / instance.heads, head_v = instance.d_v / instance.heads;
  out.heads = 1;
  out.d_k = head_k;
  out.d_v = head_v;
  out.self_form = false;
  for (std::size_t b = 0; b < out.batch.size(); ++b) {
    const BatchItem& from = instance.batch[b];
    BatchItem& to = out.batch[b];
    to.Q = sized(instance.n, head_k);
    to.K = sized(instance.m, head_k);
    to.V = sized(instance.m, head_v);
    copy_block(from.Q, g * head_k, to.Q, 0, head_k);
    copy_block(from.K, g * head_k, to.K, 0, head_k);
    copy_block(from.V, g * head_v, to.V, 0, head_v);
  }
  return out;
}

Instance scale_values(const Instance& instance, int power) {
  Instance out = as_general(instance);
  out.self_form = false;
  for (BatchItem& item : out.batch) {
    for (std::size_t k = 0; k < item.V.text.size(); ++k) {
      std::string text = item.V.text[k];
      for (int p = 0; p < power; ++p) text = times_two(text);
      for (int p = 0; p > power; --p) text = half_of(text);
      set_text(item.V, k, text);
    }
  }
  return out;
}

Instance shift_scores(const Instance& instance, const std::vector<std::string>& shift_per_row) {
  if (instance.scale == ScaleKind::sqrt_head_dim) throw ContractError("shift_scores: divisor depends on d_k");
  Instance out = as_general(instance);
  const std::size_t h = instance.heads, head_k = instance.d_k / h;
  out.d_k = instance.d_k + h;
  out.self_form = false;
  for (std::size_t b = 0; b < out.batch.size(); ++b) {
    const BatchItem& from = instance.batch[b];
    BatchItem& to = out.batch[b];
    to.Q = sized(instance.n, out.d_k);
    to.K = sized(instance.m, out.d_k);
    for (std::size_t g = 0; g < h; ++g) {
      copy_block(from.Q, g * head_k, to.Q, g * (head_k + 1), head_k);
      copy_block(from.K, g * head_k, to.K, g * (head_k + 1), head_k);
      for (std::size_t i = 0; i < instance.n; ++i)
        set_text(to.Q, i * out.d_k + g * (head_k + 1) + head_k, shift_per_row[i]);
      for (std::size_t j = 0; j < instance.m; ++j) set_text(to.K, j * out.d_k + g * (head_k + 1) + head_k, "1");
    }
  }
  return out;
}

}  // namespace attn::verify
