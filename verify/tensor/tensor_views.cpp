#include "tensor/tensor_views.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace attn::verify {

namespace {

std::uint16_t bits16(const char* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  return bits;
}

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

}  // namespace

double half_value(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
  const double magnitude = exponent == 0    ? std::ldexp(fraction, -24)
                           : exponent == 31 ? (fraction ? std::nan("") : HUGE_VAL)
                                            : std::ldexp(fraction + 1024, exponent - 25);
  return bits & 0x8000 ? -magnitude : magnitude;
}

void StridedView::read_row(std::size_t b, std::size_t h, std::size_t i, double* to) const {
  const char* from = data + static_cast<std::ptrdiff_t>(b) * strides[0] + static_cast<std::ptrdiff_t>(h) * strides[1] +
                     static_cast<std::ptrdiff_t>(i) * strides[2];
  const std::ptrdiff_t step = strides[3];
  const std::size_t n = shape[3];
  const auto each = [&](auto load) {
    for (std::size_t c = 0; c < n; ++c, from += step) to[c] = load(from);
  };
  switch (kind) {
    case Kind::f64: return each([](const char* p) { double x; std::memcpy(&x, p, 8); return x; });
    case Kind::f32: return each([](const char* p) { float x; std::memcpy(&x, p, 4); return double{x}; });
    case Kind::f16: return each([](const char* p) { return half_value(bits16(p)); });
    case Kind::bf16:
      return each([](const char* p) {
        const std::uint32_t wide = std::uint32_t{bits16(p)} << 16;  // bfloat16 is float32's upper half
        float x;
        std::memcpy(&x, &wide, 4);
        return double{x};
      });
  }
}

bool StridedView::within(DType format) const {
  switch (kind) {
    case Kind::f64: return format == DType::fp64;
    case Kind::f32: return format == DType::fp64 || format == DType::fp32;
    case Kind::f16: return format != DType::bf16;
    case Kind::bf16: return format != DType::fp16;
  }
  return false;
}

std::vector<double> StridedView::values() const {
  std::vector<double> values(shape[0] * shape[1] * shape[2] * shape[3]);
  double* to = values.data();
  for (std::size_t b = 0; b < shape[0]; ++b)
    for (std::size_t h = 0; h < shape[1]; ++h)
      for (std::size_t i = 0; i < shape[2]; ++i, to += shape[3]) read_row(b, h, i, to);
  return values;
}

void check_values(const StridedView& v, const char* name, DType format, bool* nonfinite) {
  const bool representable = v.within(format);
  std::vector<double> row(v.shape[3]);
  std::size_t k = 0;
  for (std::size_t b = 0; b < v.shape[0]; ++b)
    for (std::size_t h = 0; h < v.shape[1]; ++h)
      for (std::size_t i = 0; i < v.shape[2]; ++i) {
        v.read_row(b, h, i, row.data());
        for (const double x : row) {
          if (!std::isfinite(x) && nonfinite != nullptr) {
            *nonfinite = true;
          } else if (!std::isfinite(x)) {
            throw std::invalid_argument(std::string(name) + ": element " + element_name(v.shape, k) + " is " +
                                        nonfinite_name(x) + " (inputs must be finite)");
          }
          if (!representable && round_to(format, x) != x) {
            throw std::invalid_argument(std::string(name) + ": element " + element_name(v.shape, k) +
                                        " is not representable in " + std::string(dtype_name(format)));
          }
          ++k;
        }
      }
}

// A storage format by its profile name (fp64, fp32, fp16, bf16); std::invalid_argument naming `what`.
DType format_named(const std::string& name, const char* what) {
  require(name == "fp64" || name == "fp32" || name == "fp16" || name == "bf16",
          std::string(what) + ": expected fp64, fp32, fp16 or bf16, got " + name);
  return arithmetic_profile(name).value().storage;
}

// The declared structure from the keyword arguments (std::invalid_argument naming the one at fault).
KernelStructure structure_of(std::optional<std::size_t> key_tile, std::optional<std::size_t> sum_chunk,
                                           bool single_pass, std::optional<std::size_t> splits, bool ordered) {
  KernelStructure s;
  if (key_tile) {
    require(*key_tile >= 1, "key_tile: must be at least 1 (None: any tiling)");
    s.key_tile = *key_tile;
  }
  s.single_pass = single_pass;
  s.ordered = ordered;
  if (sum_chunk) s.sum_chunk = *sum_chunk;
  if (splits) {
    require(*splits >= 1, "splits: must be at least 1 (None: any number)");
    s.splits = *splits;
  }
  if (const std::string error = structure_error(s); !error.empty()) throw std::invalid_argument(error);
  return s;
}

// The options every certification shares, from the keyword arguments (std::invalid_argument naming the one at fault).
CertifyOptions options_of(const std::string& precision, std::optional<double> exp_ulps,
                                        std::optional<bool> weights_in_storage, std::optional<bool> query_in_storage,
                                        std::optional<std::size_t> rows, std::uint64_t seed, const std::string& tier,
                                        double alpha, std::size_t max_failures) {
  auto arithmetic = arithmetic_profile(precision);
  if (!arithmetic) throw std::invalid_argument("precision: " + arithmetic.error().message);
  CertifyOptions options;
  options.arithmetic = arithmetic.value();
  options.profile = precision;
  if (exp_ulps) {
    require(*exp_ulps >= 0 && *exp_ulps < 1e6, "exp_ulps: must be in [0, 1e6)");
    options.arithmetic.exp_ulps = *exp_ulps;
  }
  if (weights_in_storage) options.arithmetic.weights_in_storage = *weights_in_storage;
  if (query_in_storage) options.arithmetic.query_in_storage = *query_in_storage;
  require(tier == "certified" || tier == "statistical", "tier: must be \"certified\" or \"statistical\"");
  options.tier = tier == "certified" ? Tier::certified : Tier::statistical;
  require(alpha > 0 && alpha < 1, "alpha: must be in (0, 1)");
  options.alpha = alpha;
  options.rows = rows;
  options.seed = seed;
  options.max_failures = max_failures;
  return options;
}

// The LSE's format from the keyword arguments.
LseFormat lse_format_of(std::optional<std::string> lse_precision, bool lse_base2, bool lse_masked_plus_inf) {
  LseFormat format;
  format.storage = format_named(lse_precision.value_or("fp32"), "lse");
  format.base2 = lse_base2;
  format.masked_plus_inf = lse_masked_plus_inf;
  return format;
}


TensorProblem problem_without_values(const std::vector<std::size_t>& q, const std::vector<std::size_t>& k,
                                     const std::vector<std::size_t>& v, const std::string& mask_kind,
                                     const std::vector<std::size_t>& mask_shape, std::vector<double> mask,
                                     const std::string& causal, std::pair<std::int64_t, std::int64_t> window,
                                     const std::vector<double>& alibi_slopes, double softcap,
                                     const std::vector<double>& sinks, std::optional<double> scale,
                                     const std::vector<std::size_t>& key_lengths, DType dtype,
                                     std::optional<DType> kv_dtype) {
  require(q.size() == 4 && k.size() == 4 && v.size() == 4, "query, key, value: expected rank 4 after reshaping");
  require(k[0] == q[0] && k[3] == q[3], "key: shape must be [B, Hkv, S, E] with the query's B and E");
  require(v[0] == q[0] && v[1] == k[1] && v[2] == k[2], "value: shape must be [B, Hkv, S, Ev] with the key's B, Hkv, S");
  TensorProblem p;
  p.batch = q[0], p.q_heads = q[1], p.L = q[2], p.E = q[3];
  p.kv_heads = k[1], p.S = k[2], p.Ev = v[3];
  p.dtype = dtype;
  p.kv_dtype = kv_dtype;
  p.scale = scale;
  if (mask_kind == "boolean" || mask_kind == "additive") {
    p.mask_kind = mask_kind == "boolean" ? TensorMask::boolean : TensorMask::additive;
    p.mask_shape = mask_shape;
    p.mask = std::move(mask);
  } else {
    require(mask_kind == "none" && mask.empty(), "attn_mask: kind must be none, boolean or additive");
  }
  if (causal == "top-left") {
    p.causal = Causal::top_left;
  } else if (causal == "bottom-right") {
    p.causal = Causal::bottom_right;
  } else {
    require(causal == "none", "causal_alignment: must be \"top-left\" or \"bottom-right\"");
  }
  p.key_lengths = key_lengths;
  p.window_left = window.first, p.window_right = window.second;
  p.alibi_slopes = alibi_slopes;
  p.softcap = softcap;
  p.sinks = sinks;
  return p;
}

std::pair<TensorReport, std::optional<TensorReport>> certify_views(const TensorProblem& problem,
                                                                   const StridedView& o, const StridedView& q,
                                                                   const StridedView& k, const StridedView& v,
                                                                   const CertifyOptions& options,
                                                                   std::optional<std::span<const double>> lse,
                                                                   const LseFormat& format, bool in_groups) {
  bool nonfinite = false;  // NaN or ±inf in query, key or value: IEEE semantics, on the whole problem
  check_values(q, "query", problem.dtype, &nonfinite);
  check_values(k, "key", kv_format(problem), &nonfinite);
  check_values(v, "value", kv_format(problem), &nonfinite);
  const bool ieee = nonfinite || is_empty(problem);
  if (auto ok = validate_without_values(problem, ieee ? Admit::ieee : Admit::strict); !ok) {
    throw std::invalid_argument(ok.error().message);
  }
  require(!(lse && ieee), "lse: not certified for inputs with NaN or infinity, or empty ones (the output is: "
                          "leave lse out)");
  require(o.shape[0] == problem.batch && o.shape[1] == problem.q_heads && o.shape[2] == problem.L &&
              o.shape[3] == problem.Ev,
          "out: shape must be [B, Hq, L, Ev] of query and value");
  require(!lse || lse->size() == problem.batch * problem.q_heads * problem.L,
          "lse: must hold B·Hq·L values ([B, Hq, L] of the query)");
  if (in_groups && !ieee) {
    // Group (b, kv): its G query heads' rows of query and out, its keys and values.
    const std::size_t G = problem.q_heads / problem.kv_heads;
    const auto read = [&](std::size_t b, std::size_t kv, bool inputs, TensorProblem& group,
                          std::vector<double>& output) {
      const auto rows = [b](const StridedView& view, std::size_t h0, std::size_t heads, std::vector<double>& to) {
        const std::size_t n = view.shape[2], width = view.shape[3];
        to.resize(heads * n * width);
        for (std::size_t h = 0; h < heads; ++h)
          for (std::size_t i = 0; i < n; ++i) view.read_row(b, h0 + h, i, to.data() + (h * n + i) * width);
      };
      rows(o, kv * G, G, output);
      if (!inputs) return;
      rows(q, kv * G, G, group.query);
      rows(k, kv, 1, group.key);
      rows(v, kv, 1, group.value);
    };
    return certify_in_groups(problem, read, options, lse, format);
  }
  // The whole problem held as doubles (IEEE inputs; the reference the groups are tested against).
  TensorProblem whole = problem;
  whole.query = q.values(), whole.key = k.values(), whole.value = v.values();
  const std::vector<double> output = o.values();
  if (lse) return certify_tensor_and_lse(whole, output, *lse, options, format);
  return {certify_tensor(whole, output, options), std::nullopt};
}

}  // namespace attn::verify
