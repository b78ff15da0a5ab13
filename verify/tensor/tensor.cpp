#include "tensor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <tuple>
#include <utility>

// The rules below are written from PyTorch's documentation of scaled_dot_product_attention:
// attn_mask is "a boolean mask where a value of True indicates that the element should take part
// in attention" or "a float mask of the same type as query, key, value that is added to the
// attention score" (after the scale: `attn_weight = q @ k.T * scale_factor; attn_weight +=
// attn_bias`); it "must be broadcastable to the shape of attention weights" [B, Hq, L, S], with
// NumPy's right-aligned broadcasting. is_causal is the top-left lower triangle
// (torch.ones(L, S).tril(diagonal=0)); bottom-right is FlashAttention 2.1's alignment
// (`torch.nn.attention.bias.causal_lower_right`: key j is kept iff j <= i + S - L). The sliding
// window is FlashAttention's window_size = (left, right) (flash_attn_func's docstring): query i
// attends to keys [i + S - L - left, i + S - L + right], -1 for an unbounded side. ALiBi is its
// alibi_slopes: "a bias of (-alibi_slope * |i + seqlen_k - seqlen_q - j|) is added to the attention
// score of query i and key j".

namespace attn::verify {
namespace {

std::size_t product(std::span<const std::size_t> dims) {
  std::size_t out = 1;
  for (std::size_t d : dims) out *= d;
  return out;
}

}  // namespace

std::string shape_text(std::span<const std::size_t> dims) {
  std::string out = "[";
  for (std::size_t k = 0; k < dims.size(); ++k) out += (k ? ", " : "") + std::to_string(dims[k]);
  return out + "]";
}

std::string element_name(std::span<const std::size_t> dims, std::size_t k) {
  std::vector<std::size_t> index(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) index[d] = k % dims[d], k /= dims[d];
  std::string text = "(";
  for (std::size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + ") of " + shape_text(dims);
}

const char* nonfinite_name(double x) { return std::isnan(x) ? "NaN" : x > 0 ? "+inf" : "-inf"; }

std::vector<std::size_t> stored_dims(const TensorProblem& p, std::size_t heads, std::size_t rows, std::size_t width) {
  if (p.layout == AxisOrder::batch_seq_head) return {p.batch, rows, heads, width};
  return {p.batch, heads, rows, width};
}

namespace {

// allow_minus_inf: -inf may appear (an additive mask); allow_nonfinite: NaN and ±inf may (IEEE inputs).
Result<Ok, Error> check_values(std::string_view name, const std::vector<double>& values,
                               std::span<const std::size_t> dims, DType dtype, bool allow_minus_inf,
                               bool allow_nonfinite = false) {
  const std::size_t expected = product(dims);
  if (values.size() != expected) {
    return Error{std::string(name) + ": shape " + shape_text(dims) + " needs " + std::to_string(expected) +
                 " values, got " + std::to_string(values.size())};
  }
  for (std::size_t k = 0; k < values.size(); ++k) {
    const double x = values[k];
    const bool minus_inf = (allow_minus_inf && x == -std::numeric_limits<double>::infinity()) ||
                           (allow_nonfinite && !std::isfinite(x));
    if (!minus_inf && !std::isfinite(x)) {
      return Error{std::string(name) + ": element " + element_name(dims, k) + " is " + nonfinite_name(x) +
                   " (inputs must be finite" + (allow_minus_inf ? "; -inf only" : "") + ")"};
    }
    if (!minus_inf && round_to(dtype, x) != x) {
      return Error{std::string(name) + ": element " + element_name(dims, k) + " is not representable in " +
                   std::string(dtype_name(dtype))};
    }
  }
  return Ok{};
}

Result<Ok, Error> check_mask(const TensorProblem& p) {
  if (p.mask_kind == TensorMask::none) {
    if (!p.mask.empty() || !p.mask_shape.empty()) return Error{"attn_mask: values given but the mask kind is none"};
    return Ok{};
  }
  const std::size_t rank = p.mask_shape.size();
  if (rank < 2 || rank > 4) return Error{"attn_mask: rank must be 2, 3 or 4, got " + std::to_string(rank)};
  const std::size_t full[4] = {p.batch, p.q_heads, p.L, p.S};
  for (std::size_t k = 0; k < rank; ++k) {
    const std::size_t target = full[4 - rank + k];
    if (p.mask_shape[k] != 1 && p.mask_shape[k] != target) {
      return Error{"attn_mask: shape " + shape_text(p.mask_shape) + " does not broadcast to " + shape_text(full) +
                   " (dimension " + std::to_string(k) + ")"};
    }
  }
  // A boolean mask holds 0/1 (checked below); an additive one is in the tensors' dtype, -inf allowed.
  const DType dtype = p.mask_kind == TensorMask::boolean ? DType::fp64 : p.dtype;
  if (auto ok = check_values("attn_mask", p.mask, p.mask_shape, dtype, p.mask_kind == TensorMask::additive); !ok) {
    return ok;
  }
  if (p.mask_kind == TensorMask::boolean) {
    for (std::size_t k = 0; k < p.mask.size(); ++k) {
      if (p.mask[k] != 0 && p.mask[k] != 1) {
        return Error{"attn_mask: boolean element " + std::to_string(k) + " is neither 0 nor 1"};
      }
    }
  }
  return Ok{};
}

}  // namespace

DType kv_format(const TensorProblem& p) { return p.kv_dtype.value_or(p.dtype); }

std::size_t mask_offset(const TensorProblem& p, std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
  const std::size_t index[4] = {b, h, i, j};
  const std::size_t rank = p.mask_shape.size();
  std::size_t offset = 0;
  for (std::size_t k = 0; k < rank; ++k) {
    const std::size_t dim = p.mask_shape[k];
    offset = offset * dim + (dim == 1 ? 0 : index[4 - rank + k]);
  }
  return offset;
}

bool has_nonfinite_inputs(const TensorProblem& p) {
  const auto finite = [](const std::vector<double>& values) {
    return std::all_of(values.begin(), values.end(), [](double x) { return std::isfinite(x); });
  };
  return !finite(p.query) || !finite(p.key) || !finite(p.value);
}

bool is_empty(const TensorProblem& p) { return p.batch == 0 || p.L == 0 || p.S == 0; }

namespace {

// validate, admitting what `admit` admits, with or without the values of query, key and value.
Result<Ok, Error> validate_problem(const TensorProblem& p, Admit admit, bool values) {
  const bool ieee = admit == Admit::ieee;
  if ((!ieee && (p.batch == 0 || p.L == 0)) || p.q_heads == 0 || p.E == 0) {
    return Error{std::string("query: ") + (ieee ? "Hq and E" : "every dimension of [B, Hq, L, E]") +
                 " must be positive, got " + shape_text(std::vector<std::size_t>{p.batch, p.q_heads, p.L, p.E})};
  }
  if (p.kv_heads == 0 || (!ieee && p.S == 0)) return Error{ieee ? "key: Hkv must be positive" : "key: Hkv and S must be positive"};
  if (p.Ev == 0) return Error{"value: Ev must be positive"};
  if (p.q_heads % p.kv_heads != 0) {
    return Error{"key: its " + std::to_string(p.kv_heads) + " heads do not divide the query's " +
                 std::to_string(p.q_heads) + " heads"};
  }
  for (const auto& [name, data, heads, rows, width, format] :
       {std::tuple{"query", &p.query, p.q_heads, p.L, p.E, p.dtype},
        std::tuple{"key", &p.key, p.kv_heads, p.S, p.E, kv_format(p)},
        std::tuple{"value", &p.value, p.kv_heads, p.S, p.Ev, kv_format(p)}}) {
    if (!values) break;
    if (auto ok = check_values(name, *data, stored_dims(p, heads, rows, width), format, false, ieee); !ok) return ok;
  }
  if (p.scale && !std::isfinite(*p.scale)) return Error{"scale: must be finite"};
  for (const auto& [side, value] : {std::pair{"left", p.window_left}, std::pair{"right", p.window_right}}) {
    if (value < -1) {
      return Error{std::string("window_size: the ") + side + " side must be -1 (unbounded) or at least 0, got " +
                   std::to_string(value)};
    }
  }
  if (auto ok = check_mask(p); !ok) return ok;
  if (!p.sinks.empty()) {
    if (p.sinks.size() != p.q_heads) {
      return Error{"sinks: expected one logit per query head (" + std::to_string(p.q_heads) + "), got " +
                   std::to_string(p.sinks.size())};
    }
    for (std::size_t k = 0; k < p.sinks.size(); ++k) {
      if (!std::isfinite(p.sinks[k]) || round_to(DType::fp32, p.sinks[k]) != p.sinks[k]) {
        return Error{"sinks: element " + std::to_string(k) + " is not a finite fp32 value"};
      }
    }
  }
  if (!(std::isfinite(p.softcap) && p.softcap >= 0) || round_to(DType::fp32, p.softcap) != p.softcap) {
    return Error{"softcap: must be 0 (off) or a positive finite fp32 value, got " + std::to_string(p.softcap)};
  }
  if (!p.alibi_slopes.empty()) {
    const std::size_t n = p.alibi_slopes.size();
    if (n != p.q_heads && n != p.batch * p.q_heads) {
      return Error{"alibi_slopes: expected " + std::to_string(p.q_heads) + " slopes ([Hq]) or " +
                   std::to_string(p.batch * p.q_heads) + " ([B, Hq]), got " + std::to_string(n)};
    }
    for (std::size_t k = 0; k < n; ++k) {
      const double x = p.alibi_slopes[k];
      if (!std::isfinite(x) || round_to(DType::fp32, x) != x) {
        return Error{"alibi_slopes: element " + std::to_string(k) + " is not a finite fp32 value"};
      }
      if (x != 0 && std::fabs(x) < 0x1p-126) {  // a kernel built with flush-to-zero would drop it
        return Error{"alibi_slopes: element " + std::to_string(k) + " is subnormal in fp32"};
      }
    }
    if (p.mask_kind == TensorMask::additive) {
      return Error{"alibi_slopes: not together with a float attn_mask (fold the ALiBi bias into the mask, or use a "
                   "boolean mask)"};
    }
    if (std::max(p.L, p.S) >= (std::size_t{1} << 29)) {
      return Error{"alibi_slopes: L and S must stay below 2^29 (so that every bias is exact in double)"};
    }
  }
  if (!p.key_lengths.empty()) {
    if (p.key_lengths.size() != p.batch) {
      return Error{"key_lengths: needs one entry per batch item (" + std::to_string(p.batch) + "), got " +
                   std::to_string(p.key_lengths.size())};
    }
    for (std::size_t b = 0; b < p.batch; ++b) {
      if (p.key_lengths[b] > p.S) {
        return Error{"key_lengths: entry " + std::to_string(b) + " is " + std::to_string(p.key_lengths[b]) +
                     ", more than S = " + std::to_string(p.S)};
      }
    }
  }
  return Ok{};
}

}  // namespace

Result<Ok, Error> validate(const TensorProblem& p) { return validate_problem(p, Admit::strict, true); }

Result<Ok, Error> validate(const TensorProblem& p, Admit admit) { return validate_problem(p, admit, true); }

Result<Ok, Error> validate_without_values(const TensorProblem& p, Admit admit) { return validate_problem(p, admit, false); }

std::size_t tensor_index(const TensorProblem& p, std::size_t heads, std::size_t rows, std::size_t width, std::size_t b,
                         std::size_t h, std::size_t row, std::size_t c) {
  if (p.layout == AxisOrder::batch_head_seq) return ((b * heads + h) * rows + row) * width + c;
  return ((b * rows + row) * heads + h) * width + c;
}

std::size_t kv_head_of(const TensorProblem& p, std::size_t h) { return h / (p.q_heads / p.kv_heads); }

bool has_window(const TensorProblem& p) { return p.window_left >= 0 || p.window_right >= 0; }
bool has_sinks(const TensorProblem& p) { return !p.sinks.empty(); }
double sink_of(const TensorProblem& p, std::size_t h) { return p.sinks[h]; }

bool takes_part(const TensorProblem& p, std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
  if (!p.key_lengths.empty() && j >= p.key_lengths[b]) return false;
  if (has_window(p)) {  // d = j - (i + S - L), in signed arithmetic (sizes fit in memory, so far below 2^62)
    const std::int64_t d = static_cast<std::int64_t>(j) + static_cast<std::int64_t>(p.L) -
                           static_cast<std::int64_t>(i) - static_cast<std::int64_t>(p.S);
    if (p.window_left >= 0 && d < -p.window_left) return false;
    if (p.window_right >= 0 && d > p.window_right) return false;
  }
  if (p.causal == Causal::top_left && j > i) return false;
  if (p.causal == Causal::bottom_right && j + p.L > i + p.S) return false;  // j <= i + S - L, unsigned-safe
  if (p.mask_kind == TensorMask::boolean) return p.mask[mask_offset(p, b, h, i, j)] != 0;
  if (p.mask_kind == TensorMask::additive) {
    return p.mask[mask_offset(p, b, h, i, j)] != -std::numeric_limits<double>::infinity();
  }
  return true;
}

double additive_bias(const TensorProblem& p, std::size_t b, std::size_t h, std::size_t i, std::size_t j) {
  if (!p.alibi_slopes.empty()) {
    // |i + S - L - j| < 2^29 and a 24-bit slope: the product is exact.
    const double slope = p.alibi_slopes[p.alibi_slopes.size() == p.q_heads ? h : b * p.q_heads + h];
    const std::size_t centre = i + p.S, position = j + p.L;  // |(i + S) - (j + L)|, unsigned-safe
    return -slope * static_cast<double>(centre > position ? centre - position : position - centre);
  }
  return p.mask_kind == TensorMask::additive ? p.mask[mask_offset(p, b, h, i, j)] : 0.0;
}

RowIndex row_index(const TensorProblem& p, std::size_t row) {
  return {row / (p.L * p.q_heads), (row / p.L) % p.q_heads, row % p.L};
}

bool row_has_keys(const TensorProblem& p, std::size_t row) {
  const RowIndex r = row_index(p, row);
  for (std::size_t j = 0; j < p.S; ++j) {
    if (takes_part(p, r.b, r.h, r.i, j)) return true;
  }
  return false;
}

std::size_t output_index(const TensorProblem& p, std::size_t row, std::size_t c) {
  const RowIndex r = row_index(p, row);
  return tensor_index(p, p.q_heads, p.L, p.Ev, r.b, r.h, r.i, c);
}

}  // namespace attn::verify
