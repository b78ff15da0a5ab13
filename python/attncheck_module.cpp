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
#include "tensor/tensor_views.hpp"

namespace py = pybind11;
using attn::verify::Causal;
using attn::verify::TensorMask;
using attn::verify::TensorProblem;
using attn::verify::format_named;
using attn::verify::lse_format_of;
using attn::verify::options_of;
using attn::verify::structure_of;

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

using View = attn::verify::StridedView;

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
    v.strides[static_cast<std::size_t>(d)] = static_cast<std::ptrdiff_t>(array.strides(d));
    v.shape.push_back(static_cast<std::size_t>(array.shape(d)));
  }
  return v;
}

// The problem of one call without the values of query, key and value (of the shapes q, k, v): the
// Python layer has checked the shapes, problem_without_values checks them again so that no call of
// this function can read outside an array.
TensorProblem problem_without_values(const std::vector<std::size_t>& q, const std::vector<std::size_t>& k,
                                     const std::vector<std::size_t>& v, const std::optional<Array>& mask,
                                     const std::string& mask_kind, const std::string& causal,
                                     std::pair<std::int64_t, std::int64_t> window,
                                     const std::vector<double>& alibi_slopes, double softcap,
                                     const std::vector<double>& sinks, std::optional<double> scale,
                                     const std::vector<std::size_t>& key_lengths, attn::verify::DType dtype,
                                     std::optional<attn::verify::DType> kv_dtype) {
  require(mask.has_value() == (mask_kind != "none"), "attn_mask: given without its kind, or a kind without it");
  std::vector<std::size_t> mask_shape;
  if (mask) {
    for (py::ssize_t d = 0; d < mask->ndim(); ++d) mask_shape.push_back(static_cast<std::size_t>(mask->shape(d)));
  }
  return attn::verify::problem_without_values(q, k, v, mask_kind, mask_shape, mask ? values_of(*mask) : std::vector<double>{},
                                              causal, window, alibi_slopes, softcap, sinks, scale, key_lengths, dtype,
                                              kv_dtype);
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
  std::vector<double> lse_values;
  attn::verify::LseFormat lse_format;
  if (lse) {
    lse_values = values_of(*lse);
    lse_format = lse_format_of(lse_precision, lse_base2, lse_masked_plus_inf);
  }
  std::pair<attn::verify::TensorReport, std::optional<attn::verify::TensorReport>> reports;
  {
    const py::gil_scoped_release release;
    reports = attn::verify::certify_views(problem, o, q, k, v, options,
                                          lse ? std::optional<std::span<const double>>(lse_values) : std::nullopt,
                                          lse_format, in_groups);
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
