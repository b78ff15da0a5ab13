// _attncheck: the thin C++ side of the Python package. It takes arrays the Python layer has already
// shaped to [B, H, L, E] (every fp64/fp32/fp16/bf16 value is exactly a double), builds a
// TensorProblem, validates it (its error names the argument: ValueError) and certifies the output
// or a backward pass (certify_backward), without the GIL. The forward (certify) reads out, query,
// key and value in place, in their own dtype and strides, one (batch item, kv head) group at a time
// (certify_in_groups); the rest takes float64 arrays. Everything else (torch tensors, dtypes, keyword
// arguments, the report object) is Python (python/attncheck/).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_band.hpp"
#include "tensor/tensor_backward.hpp"
#include "tensor/tensor_certify.hpp"

namespace py = pybind11;
using attn::verify::Causal;
using attn::verify::TensorMask;
using attn::verify::TensorProblem;

namespace {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

// The four dimensions of a rank-4 array; ValueError naming `name` otherwise.
std::vector<std::size_t> shape4(const Array& array, const char* name) {
  if (array.ndim() != 4) throw py::value_error(std::string(name) + ": expected rank 4 after reshaping");
  return {static_cast<std::size_t>(array.shape(0)), static_cast<std::size_t>(array.shape(1)),
          static_cast<std::size_t>(array.shape(2)), static_cast<std::size_t>(array.shape(3))};
}

std::vector<double> values_of(const Array& array) { return {array.data(), array.data() + array.size()}; }

void require(bool condition, const std::string& message) {
  if (!condition) throw py::value_error(message);
}

// A rank-4 array read in place, any strides: float64, float32, float16, or bfloat16 as its bit
// patterns in an int16/uint16 array (numpy has no bfloat16: torch's tensors come as .view(torch.int16)).
struct View {
  enum class Kind { f64, f32, f16, bf16 };
  const char* data = nullptr;
  Kind kind = Kind::f64;
  std::array<py::ssize_t, 4> strides{};
  std::vector<std::size_t> shape;

  // Row (b, h, i)'s shape[3] values, as the doubles they equal, into `to`.
  void read_row(std::size_t b, std::size_t h, std::size_t i, double* to) const {
    const char* from = data + static_cast<py::ssize_t>(b) * strides[0] + static_cast<py::ssize_t>(h) * strides[1] +
                       static_cast<py::ssize_t>(i) * strides[2];
    const py::ssize_t step = strides[3];
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
  // Is every value of this dtype representable in `format`?
  [[nodiscard]] bool within(attn::verify::DType format) const {
    using attn::verify::DType;
    switch (kind) {
      case Kind::f64: return format == DType::fp64;
      case Kind::f32: return format == DType::fp64 || format == DType::fp32;
      case Kind::f16: return format != DType::bf16;
      case Kind::bf16: return format != DType::fp16;
    }
    return false;
  }

 private:
  static std::uint16_t bits16(const char* p) {
    std::uint16_t bits;
    std::memcpy(&bits, p, 2);
    return bits;
  }
  static double half_value(std::uint16_t bits) {  // IEEE binary16, exactly
    const int exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
    const double magnitude = exponent == 0    ? std::ldexp(fraction, -24)
                             : exponent == 31 ? (fraction ? std::nan("") : HUGE_VAL)
                                              : std::ldexp(fraction + 1024, exponent - 25);
    return bits & 0x8000 ? -magnitude : magnitude;
  }
};

// Every value of the view, row-major in its shape.
std::vector<double> values_of(const View& view) {
  std::vector<double> values(view.shape[0] * view.shape[1] * view.shape[2] * view.shape[3]);
  double* to = values.data();
  for (std::size_t b = 0; b < view.shape[0]; ++b)
    for (std::size_t h = 0; h < view.shape[1]; ++h)
      for (std::size_t i = 0; i < view.shape[2]; ++i, to += view.shape[3]) view.read_row(b, h, i, to);
  return values;
}

// The view of a rank-4 array; ValueError naming `name` for another rank or dtype.
View view_of(const py::array& array, const char* name) {
  if (array.ndim() != 4) throw py::value_error(std::string(name) + ": expected rank 4 after reshaping");
  View v;
  const char kind = array.dtype().kind();
  const py::ssize_t size = array.itemsize();
  if (kind == 'f' && (size == 8 || size == 4 || size == 2)) {
    v.kind = size == 8 ? View::Kind::f64 : size == 4 ? View::Kind::f32 : View::Kind::f16;
  } else if ((kind == 'i' || kind == 'u') && size == 2) {
    v.kind = View::Kind::bf16;
  } else {
    throw py::value_error(std::string(name) + ": expected float64, float32, float16 or bfloat16 bits (int16)");
  }
  v.data = static_cast<const char*>(array.data());
  for (py::ssize_t d = 0; d < 4; ++d) {
    v.strides[static_cast<std::size_t>(d)] = array.strides(d);
    v.shape.push_back(static_cast<std::size_t>(array.shape(d)));
  }
  return v;
}

// validate's check of a tensor's values, streamed over the view: ValueError naming the first element
// (row-major in [B, H, rows, width]) that is not finite or not representable in `format`.
// With `nonfinite`, NaN and ±inf are admitted (IEEE inputs) and *nonfinite set when one is met.
void check_values(const View& v, const char* name, attn::verify::DType format, bool* nonfinite = nullptr) {
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
            throw py::value_error(std::string(name) + ": element " + attn::verify::element_name(v.shape, k) + " is " +
                                  attn::verify::nonfinite_name(x) + " (inputs must be finite)");
          }
          if (!representable && attn::verify::round_to(format, x) != x) {
            throw py::value_error(std::string(name) + ": element " + attn::verify::element_name(v.shape, k) +
                                  " is not representable in " + std::string(attn::verify::dtype_name(format)));
          }
          ++k;
        }
      }
}

// The problem of one call; the Python layer has checked the shapes, this checks them again so
// that no call of this function can read outside an array.
// problem_of without the values of query, key and value (of the shapes q, k, v).
TensorProblem problem_without_values(const std::vector<std::size_t>& q, const std::vector<std::size_t>& k,
                                     const std::vector<std::size_t>& v, const std::optional<Array>& mask,
                                     const std::string& mask_kind, const std::string& causal,
                                     std::pair<std::int64_t, std::int64_t> window,
                                     const std::vector<double>& alibi_slopes, double softcap,
                                     const std::vector<double>& sinks, std::optional<double> scale,
                                     const std::vector<std::size_t>& key_lengths, attn::verify::DType dtype,
                                     std::optional<attn::verify::DType> kv_dtype) {
  require(k[0] == q[0] && k[3] == q[3], "key: shape must be [B, Hkv, S, E] with the query's B and E");
  require(v[0] == q[0] && v[1] == k[1] && v[2] == k[2], "value: shape must be [B, Hkv, S, Ev] with the key's B, Hkv, S");
  TensorProblem p;
  p.batch = q[0], p.q_heads = q[1], p.L = q[2], p.E = q[3];
  p.kv_heads = k[1], p.S = k[2], p.Ev = v[3];
  p.dtype = dtype;
  p.kv_dtype = kv_dtype;
  p.scale = scale;
  if (mask_kind == "boolean" || mask_kind == "additive") {
    require(mask.has_value(), "attn_mask: missing");
    p.mask_kind = mask_kind == "boolean" ? TensorMask::boolean : TensorMask::additive;
    for (py::ssize_t d = 0; d < mask->ndim(); ++d) p.mask_shape.push_back(static_cast<std::size_t>(mask->shape(d)));
    p.mask = values_of(*mask);
  } else {
    require(mask_kind == "none" && !mask.has_value(), "attn_mask: kind must be none, boolean or additive");
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

TensorProblem make_problem(const Array& query, const Array& key, const Array& value, const std::optional<Array>& mask,
                           const std::string& mask_kind, const std::string& causal, std::pair<std::int64_t, std::int64_t> window, const std::vector<double>& alibi_slopes, double softcap, const std::vector<double>& sinks, std::optional<double> scale,
                           const std::vector<std::size_t>& key_lengths, attn::verify::DType dtype,
                           std::optional<attn::verify::DType> kv_dtype) {
  TensorProblem p = problem_without_values(shape4(query, "query"), shape4(key, "key"), shape4(value, "value"), mask,
                                           mask_kind, causal, window, alibi_slopes, softcap, sinks, scale, key_lengths,
                                           dtype, kv_dtype);
  p.query = values_of(query), p.key = values_of(key), p.value = values_of(value);
  return p;
}

// A storage format by its profile name (fp64, fp32, fp16, bf16); ValueError naming `what`.
attn::verify::DType format_named(const std::string& name, const char* what) {
  require(name == "fp64" || name == "fp32" || name == "fp16" || name == "bf16",
          std::string(what) + ": expected fp64, fp32, fp16 or bf16, got " + name);
  return attn::verify::arithmetic_profile(name).value().storage;
}

py::tuple failure_tuple(const attn::verify::TensorFailure& f) {
  return py::make_tuple(py::make_tuple(f.index[0], f.index[1], f.index[2], f.index[3]), f.got, f.exact.lo, f.exact.hi,
                        f.band, f.ulps, f.usage, f.reason, f.certified_band, f.statistical_band);
}

py::dict verdict_dict(const attn::verify::TierVerdict& v) {
  py::dict d;
  d["passed"] = v.passed;
  d["failure_count"] = v.failure_count;
  d["max_band_usage"] = v.max_band_usage;
  d["mean_band_usage"] = v.mean_band_usage;
  return d;
}

// The declared structure from the keyword arguments (ValueError naming the one at fault).
attn::verify::KernelStructure structure_of(std::optional<std::size_t> key_tile, std::optional<std::size_t> sum_chunk,
                                           bool single_pass, std::optional<std::size_t> splits, bool ordered) {
  attn::verify::KernelStructure s;
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
  if (const std::string error = attn::verify::structure_error(s); !error.empty()) throw py::value_error(error);
  return s;
}

// The options every certification shares, from the keyword arguments (ValueError naming the one at fault).
attn::verify::CertifyOptions options_of(const std::string& precision, std::optional<double> exp_ulps,
                                        std::optional<bool> weights_in_storage, std::optional<bool> query_in_storage,
                                        std::optional<std::size_t> rows, std::uint64_t seed, const std::string& tier,
                                        double alpha, std::size_t max_failures) {
  auto arithmetic = attn::verify::arithmetic_profile(precision);
  if (!arithmetic) throw py::value_error("precision: " + arithmetic.error().message);
  attn::verify::CertifyOptions options;
  options.arithmetic = arithmetic.value();
  options.profile = precision;
  if (exp_ulps) {
    require(*exp_ulps >= 0 && *exp_ulps < 1e6, "exp_ulps: must be in [0, 1e6)");
    options.arithmetic.exp_ulps = *exp_ulps;
  }
  if (weights_in_storage) options.arithmetic.weights_in_storage = *weights_in_storage;
  if (query_in_storage) options.arithmetic.query_in_storage = *query_in_storage;
  require(tier == "certified" || tier == "statistical", "tier: must be \"certified\" or \"statistical\"");
  options.tier = tier == "certified" ? attn::verify::Tier::certified : attn::verify::Tier::statistical;
  require(alpha > 0 && alpha < 1, "alpha: must be in (0, 1)");
  options.alpha = alpha;
  options.rows = rows;
  options.seed = seed;
  options.max_failures = max_failures;
  return options;
}

// The LSE's format from the keyword arguments.
attn::verify::LseFormat lse_format_of(std::optional<std::string> lse_precision, bool lse_base2, bool lse_masked_plus_inf) {
  attn::verify::LseFormat format;
  format.storage = format_named(lse_precision.value_or("fp32"), "lse");
  format.base2 = lse_base2;
  format.masked_plus_inf = lse_masked_plus_inf;
  return format;
}

py::dict report_dict(const attn::verify::TensorReport& report);

py::dict certify(const py::array& out, const py::array& query, const py::array& key, const py::array& value,
                 const std::optional<Array>& mask, const std::string& mask_kind, const std::string& causal,
                 std::pair<std::int64_t, std::int64_t> window, const std::vector<double>& alibi_slopes, double softcap,
                 const std::vector<double>& sinks,
                 std::optional<double> scale, const std::vector<std::size_t>& key_lengths,
                 const std::string& precision, std::optional<double> exp_ulps, std::optional<bool> weights_in_storage,
                 std::optional<std::size_t> rows, std::uint64_t seed, const std::string& tier, double alpha,
                 std::optional<std::size_t> key_tile, std::optional<std::size_t> sum_chunk, bool single_pass,
                 std::optional<std::size_t> splits, bool ordered, bool output_rounded,
                 std::optional<std::string> accumulator, std::optional<bool> query_in_storage,
                 std::optional<std::string> kv_precision, std::size_t max_failures, const std::optional<Array>& lse,
                 std::optional<std::string> lse_precision, bool lse_base2, bool lse_masked_plus_inf,
                 std::optional<double> tanh_ulps, bool in_groups) {
  attn::verify::CertifyOptions options =
      options_of(precision, exp_ulps, weights_in_storage, query_in_storage, rows, seed, tier, alpha, max_failures);
  if (tanh_ulps) {
    require(*tanh_ulps >= 0 && *tanh_ulps < 1e6, "tanh_ulps: must be in [0, 1e6)");
    options.arithmetic.tanh_ulps = *tanh_ulps;
  }
  options.arithmetic.output_rounded = output_rounded;
  if (accumulator) options.arithmetic.accumulator = format_named(*accumulator, "accumulator");
  std::optional<attn::verify::DType> kv_dtype;
  if (kv_precision) kv_dtype = format_named(*kv_precision, "key");
  options.arithmetic.structure = structure_of(key_tile, sum_chunk, single_pass, splits, ordered);
  const View q = view_of(query, "query"), k = view_of(key, "key"), v = view_of(value, "value"), o = view_of(out, "out");
  const TensorProblem problem =
      problem_without_values(q.shape, k.shape, v.shape, mask, mask_kind, causal, window, alibi_slopes, softcap, sinks,
                             scale, key_lengths, options.arithmetic.storage, kv_dtype);
  bool nonfinite = false;  // NaN or ±inf in query, key or value: IEEE semantics, on the whole problem
  {
    const py::gil_scoped_release release;  // a pass over every value (validate's, in place)
    check_values(q, "query", problem.dtype, &nonfinite);
    check_values(k, "key", attn::verify::kv_format(problem), &nonfinite);
    check_values(v, "value", attn::verify::kv_format(problem), &nonfinite);
  }
  const bool ieee = nonfinite || attn::verify::is_empty(problem);
  if (auto ok = attn::verify::validate_without_values(problem, ieee ? attn::verify::Admit::ieee : attn::verify::Admit::strict);
      !ok) {
    throw py::value_error(ok.error().message);
  }
  if (lse && ieee)
    throw py::value_error("lse: not certified for inputs with NaN or infinity, or empty ones (the output is: "
                          "leave lse out)");
  require(o.shape[0] == problem.batch && o.shape[1] == problem.q_heads && o.shape[2] == problem.L &&
              o.shape[3] == problem.Ev,
          "out: shape must be [B, Hq, L, Ev] of query and value");
  // Group (b, kv): its G query heads' rows of query and out, its keys and values.
  const std::size_t G = problem.q_heads / problem.kv_heads;
  const auto read = [&](std::size_t b, std::size_t kv, bool inputs, TensorProblem& group, std::vector<double>& output) {
    const auto rows = [](const View& view, std::size_t b, std::size_t h0, std::size_t heads, std::vector<double>& to) {
      const std::size_t n = view.shape[2], width = view.shape[3];
      to.resize(heads * n * width);
      for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t i = 0; i < n; ++i) view.read_row(b, h0 + h, i, to.data() + (h * n + i) * width);
    };
    rows(o, b, kv * G, G, output);
    if (!inputs) return;
    rows(q, b, kv * G, G, group.query);
    rows(k, b, kv, 1, group.key);
    rows(v, b, kv, 1, group.value);
  };
  std::vector<double> lse_values;
  attn::verify::LseFormat lse_format;
  if (lse) {
    require(static_cast<std::size_t>(lse->size()) == problem.batch * problem.q_heads * problem.L,
            "lse: must hold B·Hq·L values ([B, Hq, L] of the query)");
    lse_values = values_of(*lse);
    lse_format = lse_format_of(lse_precision, lse_base2, lse_masked_plus_inf);
  }
  std::pair<attn::verify::TensorReport, std::optional<attn::verify::TensorReport>> reports;
  {
    const py::gil_scoped_release release;
    if (in_groups && !ieee) {
      reports = attn::verify::certify_in_groups(
          problem, read, options, lse ? std::optional<std::span<const double>>(lse_values) : std::nullopt, lse_format);
    } else {  // the whole problem held as doubles (IEEE inputs; the reference the groups are tested against)
      TensorProblem whole = problem;
      whole.query = values_of(q), whole.key = values_of(k), whole.value = values_of(v);
      const std::vector<double> output = values_of(o);
      if (lse) {
        reports = attn::verify::certify_tensor_and_lse(whole, output, lse_values, options, lse_format);
      } else {
        reports.first = attn::verify::certify_tensor(whole, output, options);
      }
    }
  }
  py::dict result = report_dict(reports.first);
  if (reports.second) result["lse"] = report_dict(*reports.second);
  return result;
}

// The report's usage heatmap (None without one): cells [Hq, R, C] (-1: nothing certified there,
// inf: a failure decided without a band) and the cells' edges, the first query of each cell row and
// the first column of each cell column, then L and Ev.
py::object heatmap_dict(const attn::verify::UsageHeatmap& grid) {
  if (grid.cells.empty()) return py::none();
  py::array_t<double> cells(std::vector<py::ssize_t>{static_cast<py::ssize_t>(grid.heads),
                                                      static_cast<py::ssize_t>(grid.cell_rows),
                                                      static_cast<py::ssize_t>(grid.cell_columns)});
  std::copy(grid.cells.begin(), grid.cells.end(), cells.mutable_data());
  std::vector<std::size_t> query_edges, column_edges;
  for (std::size_t k = 0; k <= grid.cell_rows; ++k) query_edges.push_back(grid.first_query(k));
  for (std::size_t k = 0; k <= grid.cell_columns; ++k) column_edges.push_back(grid.first_column(k));
  py::dict result;
  result["cells"] = cells;
  result["query_edges"] = query_edges;
  result["column_edges"] = column_edges;
  return result;
}

py::dict report_dict(const attn::verify::TensorReport& report) {
  py::list failures;
  for (const auto& f : report.failures) failures.append(failure_tuple(f));
  py::dict result;
  result["passed"] = report.passed;
  result["failures"] = failures;
  result["failure_count"] = report.failure_count;
  result["max_band_usage"] = report.max_band_usage;
  result["mean_band_usage"] = report.mean_band_usage;
  result["usage_histogram"] = report.usage_histogram;
  result["rows_checked"] = report.rows_checked;
  result["rows_total"] = report.rows_total;
  result["elements_certified"] = report.elements_certified;
  result["capped_rows"] = report.capped_rows;
  result["unbounded_elements"] = report.unbounded_elements;
  result["ieee_elements"] = report.ieee_elements;
  result["unmodelled_rows"] = report.unmodelled_rows;
  result["max_plain_ratio"] = report.max_plain_ratio;
  result["mean_plain_ratio"] = report.mean_plain_ratio;
  result["summary"] = report.summary();
  result["certified"] = verdict_dict(report.certified);
  result["statistical"] = verdict_dict(report.statistical);
  result["lambda"] = report.lambda;
  result["consistent_with"] = report.consistent_with;
  result["diagnosed"] = report.diagnosed;
  result["heatmap"] = heatmap_dict(report.heatmap);
  return result;
}

// The exact gradients' midpoints, rounded to doubles, shaped as query, key and value.
py::tuple gradients(const Array& dout, const Array& query, const Array& key, const Array& value,
                    const std::optional<Array>& mask, const std::string& mask_kind, const std::string& causal,
                 std::pair<std::int64_t, std::int64_t> window, const std::vector<double>& alibi_slopes, double softcap,
                 const std::vector<double>& sinks,
                    std::optional<double> scale, const std::vector<std::size_t>& key_lengths,
                    const std::string& precision, std::optional<std::string> kv_precision, int bits) {
  std::optional<attn::verify::DType> kv_dtype;
  if (kv_precision) kv_dtype = format_named(*kv_precision, "key");
  const TensorProblem problem = make_problem(query, key, value, mask, mask_kind, causal, window, alibi_slopes, softcap, sinks, scale, key_lengths,
                                             format_named(precision, "precision"), kv_dtype);
  if (auto ok = attn::verify::validate(problem); !ok) throw py::value_error(ok.error().message);
  const auto d = shape4(dout, "dout");
  require(d[0] == problem.batch && d[1] == problem.q_heads && d[2] == problem.L && d[3] == problem.Ev,
          "dout: shape must be [B, Hq, L, Ev] of query and value");
  require(bits >= 64 && bits <= 4096, "bits: must be in [64, 4096]");
  const std::vector<double> upstream = values_of(dout);
  if (auto ok = attn::verify::validate_dout(problem, upstream); !ok) throw py::value_error(ok.error().message);
  attn::verify::GradientEnclosure g;
  {
    const py::gil_scoped_release release;
    g = attn::verify::enclose_gradients(problem, upstream, bits);
  }
  const auto array = [](const std::vector<attn::verify::FineEnclosure>& values, const Array& like) {
    py::array_t<double> out(std::vector<py::ssize_t>(like.shape(), like.shape() + like.ndim()));
    double* data = out.mutable_data();
    for (std::size_t n = 0; n < values.size(); ++n) data[n] = values[n].head + values[n].tail;
    return out;
  };
  if (problem.sinks.empty()) return py::make_tuple(array(g.dq, query), array(g.dk, key), array(g.dv, value));
  py::array_t<double> dsinks(static_cast<py::ssize_t>(g.dsinks.size()));
  for (std::size_t h = 0; h < g.dsinks.size(); ++h) dsinks.mutable_data()[h] = g.dsinks[h].head + g.dsinks[h].tail;
  return py::make_tuple(array(g.dq, query), array(g.dk, key), array(g.dv, value), dsinks);
}


// Certifies dq, dk, dv ([B, H, *, *] as query, key, value) for dout ([B, Hq, L, Ev]); out and lse
// (the kernel's forward, when given) enter the band and are certified too.
py::dict certify_backward(const Array& dq, const Array& dk, const Array& dv, const Array& dout, const Array& query,
                          const Array& key, const Array& value, const std::optional<Array>& mask,
                          const std::string& mask_kind, const std::string& causal, std::pair<std::int64_t, std::int64_t> window, const std::vector<double>& alibi_slopes, double softcap, const std::vector<double>& sinks, std::optional<double> scale,
                          const std::vector<std::size_t>& key_lengths, const std::string& precision,
                          std::optional<double> exp_ulps, std::optional<bool> weights_in_storage,
                          std::optional<bool> query_in_storage, std::optional<std::string> kv_precision,
                          std::optional<std::size_t> rows, std::uint64_t seed, const std::string& tier, double alpha,
                          std::size_t max_failures, const std::optional<Array>& out, const std::optional<Array>& lse,
                          std::optional<std::string> lse_precision, bool lse_base2, bool lse_masked_plus_inf,
                          const std::string& algorithm, const std::optional<Array>& dmask,
                          const std::optional<Array>& dsinks) {
  const attn::verify::CertifyOptions options =
      options_of(precision, exp_ulps, weights_in_storage, query_in_storage, rows, seed, tier, alpha, max_failures);
  std::optional<attn::verify::DType> kv_dtype;
  if (kv_precision) kv_dtype = format_named(*kv_precision, "key");
  const TensorProblem problem =
      make_problem(query, key, value, mask, mask_kind, causal, window, alibi_slopes, softcap, sinks, scale, key_lengths, options.arithmetic.storage, kv_dtype);
  if (auto ok = attn::verify::validate(problem); !ok) throw py::value_error(ok.error().message);
  const auto same = [](const Array& a, const Array& like, const char* name, const char* like_name) {
    require(a.ndim() == 4 && like.ndim() == 4, std::string(name) + ": expected rank 4 after reshaping");
    for (py::ssize_t d = 0; d < 4; ++d)
      require(a.shape(d) == like.shape(d), std::string(name) + ": shape must be " + like_name + "'s");
  };
  same(dq, query, "dq", "query");
  same(dk, key, "dk", "key");
  same(dv, value, "dv", "value");
  const auto d = shape4(dout, "dout");
  require(d[0] == problem.batch && d[1] == problem.q_heads && d[2] == problem.L && d[3] == problem.Ev,
          "dout: shape must be [B, Hq, L, Ev] of query and value");
  const std::vector<double> upstream = values_of(dout), dq_values = values_of(dq), dk_values = values_of(dk),
                            dv_values = values_of(dv);
  std::vector<double> out_values, lse_values;
  attn::verify::BackwardInputs inputs;
  if (out) {
    same(*out, dout, "out", "dout");
    out_values = values_of(*out);
    inputs.out = out_values;
  }
  if (lse) {
    require(static_cast<std::size_t>(lse->size()) == problem.batch * problem.q_heads * problem.L,
            "lse: must hold B·Hq·L values ([B, Hq, L] of the query)");
    lse_values = values_of(*lse);
    inputs.lse = lse_values;
    inputs.lse_format = lse_format_of(lse_precision, lse_base2, lse_masked_plus_inf);
  }
  require(algorithm == "either" || algorithm == "flash" || algorithm == "math",
          "algorithm: must be \"flash\", \"math\" or \"either\"");
  inputs.algorithm = algorithm == "flash" ? attn::verify::GradientAlgorithm::flash
                     : algorithm == "math" ? attn::verify::GradientAlgorithm::math
                                           : attn::verify::GradientAlgorithm::either;
  if (auto ok = attn::verify::validate_backward(problem, upstream, inputs); !ok) throw py::value_error(ok.error().message);
  std::vector<double> dmask_values;
  if (dmask) {
    require(problem.mask_kind == TensorMask::additive, "dmask: given but attn_mask is not a float (additive) mask");
    require(dmask->ndim() == static_cast<py::ssize_t>(problem.mask_shape.size()), "dmask: shape must be attn_mask's");
    for (py::ssize_t k = 0; k < dmask->ndim(); ++k)
      require(static_cast<std::size_t>(dmask->shape(k)) == problem.mask_shape[static_cast<std::size_t>(k)],
              "dmask: shape must be attn_mask's");
    dmask_values = values_of(*dmask);
  }
  std::vector<double> dsinks_values;
  if (dsinks) {
    require(!problem.sinks.empty(), "dsinks: given without sinks");
    require(static_cast<std::size_t>(dsinks->size()) == problem.q_heads, "dsinks: must hold Hq values (sinks' shape)");
    dsinks_values = values_of(*dsinks);
  }
  attn::verify::BackwardReport report;
  {
    const py::gil_scoped_release release;
    report = attn::verify::certify_backward(problem, upstream, dq_values, dk_values, dv_values, options, inputs,
                                            dmask_values, dsinks_values);
  }
  py::dict result;
  result["passed"] = report.passed;
  result["dq"] = report_dict(report.dq);
  result["dk"] = report_dict(report.dk);
  result["dv"] = report_dict(report.dv);
  if (report.dmask) result["dmask"] = report_dict(*report.dmask);
  if (report.dsinks) result["dsinks"] = report_dict(*report.dsinks);
  if (report.out) result["out"] = report_dict(*report.out);
  if (report.lse) result["lse"] = report_dict(*report.lse);
  result["summary"] = report.summary();
  return result;
}

}  // namespace

PYBIND11_MODULE(_attncheck, m) {
  m.doc() = "attncheck's C++ certification (use the attncheck package, not this module)";
  m.def("certify", &certify, py::arg("out"), py::arg("query"), py::arg("key"), py::arg("value"), py::kw_only(),
        py::arg("mask"), py::arg("mask_kind"), py::arg("causal"), py::arg("window") = std::pair<std::int64_t, std::int64_t>{-1, -1}, py::arg("alibi_slopes") = std::vector<double>{}, py::arg("softcap") = 0.0, py::arg("sinks") = std::vector<double>{}, py::arg("scale"), py::arg("key_lengths"),
        py::arg("precision"), py::arg("exp_ulps"), py::arg("weights_in_storage"), py::arg("rows"), py::arg("seed"),
        py::arg("tier") = "certified", py::arg("alpha") = 1e-9, py::arg("key_tile") = py::none(),
        py::arg("sum_chunk") = py::none(), py::arg("single_pass") = false, py::arg("splits") = py::none(),
        py::arg("ordered") = false, py::arg("output_rounded") = true, py::arg("accumulator") = py::none(),
        py::arg("query_in_storage") = py::none(), py::arg("kv_precision") = py::none(), py::arg("max_failures") = 100,
        py::arg("lse") = py::none(), py::arg("lse_precision") = py::none(), py::arg("lse_base2") = false,
        py::arg("lse_masked_plus_inf") = false, py::arg("tanh_ulps") = py::none(), py::arg("in_groups") = true,
        "Certifies out ([B, Hq, L, Ev]) for query/key/value ([B, H, *, *]), float64, float32 or float16 arrays "
        "or bfloat16 bits (int16), any strides, read in place one (batch item, kv head) group at a time (in_groups=False: "
        "the whole problem as doubles at once, the same report), and lse ([B, Hq, L]) when given; returns the report as a dict (the LSE's under \"lse\"). ValueError "
        "names the argument at fault.");
  m.def("certify_backward", &certify_backward, py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("dout"),
        py::arg("query"), py::arg("key"), py::arg("value"), py::kw_only(), py::arg("mask"), py::arg("mask_kind"),
        py::arg("causal"), py::arg("window") = std::pair<std::int64_t, std::int64_t>{-1, -1}, py::arg("alibi_slopes") = std::vector<double>{}, py::arg("softcap") = 0.0, py::arg("sinks") = std::vector<double>{}, py::arg("scale"), py::arg("key_lengths"), py::arg("precision"), py::arg("exp_ulps"),
        py::arg("weights_in_storage"), py::arg("query_in_storage") = py::none(), py::arg("kv_precision") = py::none(),
        py::arg("rows") = py::none(), py::arg("seed") = 0, py::arg("tier") = "certified", py::arg("alpha") = 1e-9,
        py::arg("max_failures") = 100, py::arg("out") = py::none(), py::arg("lse") = py::none(),
        py::arg("lse_precision") = py::none(), py::arg("lse_base2") = false, py::arg("lse_masked_plus_inf") = false,
        py::arg("algorithm") = "either", py::arg("dmask") = py::none(), py::arg("dsinks") = py::none(),
        "Certifies a backward's dq, dk, dv (float64 arrays shaped as query, key, value, [B, H, *, *]) for dout; "
        "returns the reports as a dict (dq, dk, dv; dmask, dsinks, out and lse when given). ValueError names the argument at fault.");
  m.def("gradients", &gradients, py::arg("dout"), py::arg("query"), py::arg("key"), py::arg("value"), py::kw_only(),
        py::arg("mask"), py::arg("mask_kind"), py::arg("causal"), py::arg("window") = std::pair<std::int64_t, std::int64_t>{-1, -1}, py::arg("alibi_slopes") = std::vector<double>{}, py::arg("softcap") = 0.0, py::arg("sinks") = std::vector<double>{}, py::arg("scale"), py::arg("key_lengths"),
        py::arg("precision"), py::arg("kv_precision") = py::none(), py::arg("bits") = 128,
        "The exact gradients (dq, dk, dv, and dsinks with sinks) of sum(dout * SDPA(...)) as float64 arrays shaped as query, key, value "
        "([B, H, *, *] float64 arrays holding exact values). ValueError names the argument at fault.");
}
