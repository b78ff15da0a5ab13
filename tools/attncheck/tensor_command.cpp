// attncheck tensor check: certifies an attention output saved with numpy.save, as
// `python3 -m attncheck check` does, with the same options, the same report (its text on stdout,
// its JSON with --json) and the same exit codes: 0 passed, 1 failed, 2 usage error, 3 bad input.
// The shape rules are check_attention's (python/attncheck/_inputs.py): query [L, E], [B, L, E] or
// [B, Hq, L, E]; key and value of the query's rank; a mask broadcast right-aligned.
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "tensor/npy.hpp"
#include "tensor/tensor_band.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor/tensor_views.hpp"

namespace attn::cli {

namespace {

using verify::NpyArray;

// argparse's _positive: a positive integer, or a usage error saying so.
const CLI::Validator kPositive(
    [](std::string& text) -> std::string {
      std::size_t used = 0;
      long long value = 0;
      try {
        value = std::stoll(text, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      return used == text.size() && value >= 1 ? "" : "expected a positive integer, got '" + text + "'";
    },
    "POSITIVE");
using verify::TensorReport;

constexpr int kPassed = 0, kFailed = 1, kUsage = 2, kBadInput = 3;

struct TensorCheckOptions {
  std::string query, key, value, out, attn_mask, sinks, lse, json;
  bool is_causal = false, enable_gqa = false, single_pass = false, ordered = false, query_in_storage = false;
  std::string causal_alignment = "top-left";
  std::vector<std::int64_t> window_size{-1, -1};
  double softcap = 0;
  std::optional<double> scale;
  std::string key_lengths;
  std::optional<std::string> precision, accumulator;
  std::optional<std::size_t> rows, key_tile, sum_chunk, splits;
  std::int64_t seed = 0;
  std::string tier = "certified";
  double alpha = 1e-9;
  std::string lse_base = "e", masked_lse = "-inf";
};

// A bad input: its message is printed as "attncheck: <message>" and the command exits 3.
struct BadInput : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A usage error found after parsing (a malformed --key-lengths): exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- the report's text and JSON, as python/attncheck/_report.py writes them ----

// The model the statistical tier states (Report.MODEL).
constexpr const char* kModel =
    "Model S: the kernel's roundings are independent with mean zero (Higham and Mary 2019); operations that may "
    "repeat on identical operands are grouped; exps, the scale, rescales, splits and the output rounding are kept "
    "at their worst case";

// Python's repr of a float: the shortest text that reads back as x, with ".0" when it looks integral.
std::string python_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char text[48];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, x);
    if (std::strtod(text, nullptr) == x) break;
  }
  std::string out = text;
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string number(double x) {  // Python's f"{x:.9g}"
  char text[48];
  std::snprintf(text, sizeof text, "%.9g", x);
  return text;
}

// An index tuple as Python prints it: "(1, 2)", "(3,)".
std::string tuple_text(const std::vector<std::size_t>& index) {
  std::string text = "(";
  for (std::size_t d = 0; d < index.size(); ++d) text += (d ? ", " : "") + std::to_string(index[d]);
  return text + (index.size() == 1 ? ",)" : ")");
}

// One failure as the Python report holds it (Report._from_native).
struct Failure {
  std::vector<std::size_t> index;  // in the tensor's own rank
  double got = 0, exact = 0, band = 0, ulps = 0;
  std::string reason;
  double certified_band = 0, statistical_band = 0;

  [[nodiscard]] std::string describe() const {  // Failure.describe
    const std::string at = "index " + tuple_text(index) + ": " + reason + ", got " + number(got);
    if (reason == "NaN" || reason == "Inf") return at;
    if (!std::isfinite(got)) return at + ", exact " + number(exact);
    if (exact == 0) return at + ", exact 0, |error| " + number(std::fabs(got)) + " against the band " + number(band);
    return at + ", exact " + number(exact) + ", band " + number(band) + ", " + number(ulps) + " ulps";
  }
};

bool decided_without_oracle(const std::string& reason) {  // _report.py's _WITHOUT_ORACLE, and NaN / Inf
  if (reason == "NaN" || reason == "Inf") return true;
  for (const char* prefix : {"NaN (", "Inf (", "not NaN", "not +inf", "not -inf"})
    if (reason.rfind(prefix, 0) == 0) return true;
  return false;
}

// What the report of one tensor (out or the LSE) says beside the C++ TensorReport.
struct ReportContext {
  std::size_t rank = 4;            // of the tensor (out: the query's rank; the LSE: one less)
  bool lse = false;                // index (b, h, i) without the column
  std::size_t elements_total = 0;
  std::string precision;
  std::int64_t seed = 0;
  std::string tier;
  double alpha = 0;
  nlohmann::ordered_json structure = nlohmann::ordered_json::object();
  std::vector<std::string> notes;
};

std::vector<Failure> failures_of(const TensorReport& report, const ReportContext& context) {
  std::vector<Failure> failures;
  for (const verify::TensorFailure& f : report.failures) {
    Failure out;
    // (b, h, i, c) in the tensor's own rank: rank 3 has no head axis, rank 2 no batch either; the
    // LSE's index has no column.
    out.index = {f.index[0], f.index[1], f.index[2], f.index[3]};
    if (context.lse) out.index.pop_back();
    if (context.rank == 3) out.index.erase(out.index.begin() + 1);
    if (context.rank == 2) out.index.erase(out.index.begin(), out.index.begin() + 2);
    out.got = f.got;
    out.exact = std::isfinite(f.exact.lo) && std::isfinite(f.exact.hi) ? f.exact.lo + (f.exact.hi - f.exact.lo) / 2
                                                                       : f.exact.lo;
    out.band = f.band, out.ulps = f.ulps, out.reason = f.reason;
    out.certified_band = f.certified_band, out.statistical_band = f.statistical_band;
    if (decided_without_oracle(f.reason)) out.exact = out.band = out.certified_band = out.statistical_band = NAN;
    failures.push_back(std::move(out));
  }
  return failures;
}

nlohmann::ordered_json json_number(double x) {  // strict JSON: NaN and infinities as strings, as _encode
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return x;
}

nlohmann::ordered_json verdict_json(const verify::TierVerdict& v) {
  return {v.passed, v.failure_count, json_number(v.max_band_usage), json_number(v.mean_band_usage)};
}

// Report.heatmap as _to_dict writes it: cells [Hq][R][C], the cells' first query and column indices.
nlohmann::ordered_json heatmap_json(const verify::UsageHeatmap& grid) {
  if (grid.cells.empty()) return nullptr;
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (std::size_t h = 0; h < grid.heads; ++h) {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t r = 0; r < grid.cell_rows; ++r) {
      nlohmann::ordered_json row = nlohmann::ordered_json::array();
      for (std::size_t c = 0; c < grid.cell_columns; ++c) row.push_back(json_number(grid.at(h, r, c)));
      rows.push_back(std::move(row));
    }
    cells.push_back(std::move(rows));
  }
  std::vector<std::size_t> query_edges, column_edges;
  for (std::size_t k = 0; k <= grid.cell_rows; ++k) query_edges.push_back(grid.first_query(k));
  for (std::size_t k = 0; k <= grid.cell_columns; ++k) column_edges.push_back(grid.first_column(k));
  return {{"cells", cells}, {"query_edges", query_edges}, {"column_edges", column_edges}};
}

// Report._to_dict, field for field.
nlohmann::ordered_json report_json(const TensorReport& report, const ReportContext& context, bool passed,
                                   const nlohmann::ordered_json& lse) {
  nlohmann::ordered_json failures = nlohmann::ordered_json::array();
  for (const Failure& f : failures_of(report, context)) {
    failures.push_back({{"index", f.index},
                        {"got", json_number(f.got)},
                        {"exact", json_number(f.exact)},
                        {"band", json_number(f.band)},
                        {"ulps", json_number(f.ulps)},
                        {"reason", f.reason},
                        {"certified_band", json_number(f.certified_band)},
                        {"statistical_band", json_number(f.statistical_band)}});
  }
  nlohmann::ordered_json j;
  j["passed"] = passed;
  j["failures"] = failures;
  j["failure_count"] = report.failure_count;
  j["max_band_usage"] = json_number(report.max_band_usage);
  j["mean_band_usage"] = json_number(report.mean_band_usage);
  j["usage_histogram"] = report.usage_histogram;
  j["rows_checked"] = report.rows_checked;
  j["rows_total"] = report.rows_total;
  j["elements_certified"] = report.elements_certified;
  j["elements_total"] = context.elements_total;
  j["capped_rows"] = report.capped_rows;
  j["max_plain_ratio"] = json_number(report.max_plain_ratio);
  j["mean_plain_ratio"] = json_number(report.mean_plain_ratio);
  j["precision"] = context.precision;
  j["seed"] = context.seed;
  j["tier"] = context.tier;
  j["alpha"] = json_number(context.alpha);
  j["statistical_lambda"] = json_number(report.lambda);
  j["certified"] = verdict_json(report.certified);
  j["statistical"] = verdict_json(report.statistical);
  j["structure"] = context.structure;
  j["model"] = kModel;
  j["notes"] = context.notes;
  j["consistent_with"] = report.diagnosed ? nlohmann::ordered_json(report.consistent_with) : nlohmann::ordered_json();
  j["unbounded_elements"] = report.unbounded_elements;
  j["ieee_elements"] = report.ieee_elements;
  j["unmodelled_rows"] = report.unmodelled_rows;
  j["lse"] = lse;
  j["heatmap"] = heatmap_json(report.heatmap);
  return j;
}

// The profiles' descriptions (Report.diagnosis's _PROFILE_TEXT).
std::string profile_text(const std::string& name) {
  if (name == "fp64") return "fp64 compute";
  if (name == "fp32") return "fp32 compute";
  if (name == "fp16") return "fp32 compute, P and the output rounded to fp16";
  if (name == "bf16") return "fp32 compute, P and the output rounded to bf16";
  if (name == "fp16-math") return "intermediates rounded to fp16: the scaled Q, the scores, P and the output";
  if (name == "bf16-math") return "intermediates rounded to bf16: the scaled Q, the scores, P and the output";
  return name;
}

// Report.__str__: the verdict, the usage and coverage, both tiers, notes, diagnosis, the LSE's line.
std::string report_text(const TensorReport& out, const ReportContext& context, bool passed,
                        const std::optional<TensorReport>& lse, const ReportContext& lse_context, bool lse_passed) {
  const std::vector<Failure> failures = failures_of(out, context);
  std::string text;
  if (passed) {
    text = "attncheck: passed (" + context.precision + ")";
  } else if (out.failure_count == 0) {
    text = "attncheck: FAILED (" + context.precision + "): out passed, the LSE failed";
  } else {
    text = "attncheck: FAILED (" + context.precision + "): " + std::to_string(out.failure_count) + " of " +
           std::to_string(context.elements_total) + " elements; worst at " + failures.front().describe();
  }
  text += "\nband usage max " + number(out.max_band_usage) + ", mean " + number(out.mean_band_usage) + "; " +
          std::to_string(out.rows_checked) + " of " + std::to_string(out.rows_total) + " rows certified (seed " +
          std::to_string(context.seed) + ", " + std::to_string(out.elements_certified) +
          " elements); every element checked finite and masked rows zero";
  if (out.capped_rows) text += "; " + std::to_string(out.capped_rows) + " row(s) at the precision cap";
  if (out.unbounded_elements) {
    text += "; " + std::to_string(out.unbounded_elements) +
            " element(s) with no finite band (the declared arithmetic has no finite worst case at this length: "
            "passed vacuously)";
  }
  if (out.ieee_elements) {
    text += "; " + std::to_string(out.ieee_elements) +
            " element(s) NaN or infinite by IEEE semantics (NaN or inf inputs reach them)";
  }
  if (out.unmodelled_rows) {
    text += "; " + std::to_string(out.unmodelled_rows) +
            " row(s) checked finite only (an infinite score drops some of their keys, or softcap caps one: not "
            "certified)";
  }
  const auto tier_text = [](const std::string& name, const verify::TierVerdict& v) {
    const std::string state = v.passed ? "passed" : "FAILED (" + std::to_string(v.failure_count) + ")";
    return name + " " + state + ", band usage max " + number(v.max_band_usage);
  };
  std::string declared;
  for (const auto& [name, value] : context.structure.items()) {
    declared += (declared.empty() ? "" : ", ") + name + "=" + (value.is_boolean() ? "True" : value.dump());
  }
  char alpha[32];
  std::snprintf(alpha, sizeof alpha, "%g", context.alpha);
  text += "\n" + tier_text("certified", out.certified) + "; " +
          tier_text("statistical (alpha " + std::string(alpha) + ")", out.statistical) + "; decided by " +
          context.tier + "; kernel structure " + (declared.empty() ? "any (undeclared)" : declared);
  for (const std::string& note : context.notes) text += "\nnote: " + note;
  if (out.diagnosed) {
    std::string diagnosis;
    if (!passed) {
      diagnosis = "outside " + context.precision + " (" + profile_text(context.precision) + ")";
      if (out.consistent_with.empty()) {
        diagnosis += "; inside no other standard profile of the inputs' dtype";
      } else {
        for (const std::string& name : out.consistent_with) diagnosis += "; inside " + name + ": " + profile_text(name);
      }
    }
    text += "\ndiagnosis: " + diagnosis;
  }
  if (lse) {
    const std::vector<Failure> lse_failures = failures_of(*lse, lse_context);
    const std::string state = lse_passed ? "passed"
                                         : "FAILED: " + std::to_string(lse->failure_count) + " of " +
                                               std::to_string(lse_context.elements_total) + " rows; worst at " +
                                               lse_failures.front().describe();
    text += "\nlse: " + state + "; band usage max " + number(lse->max_band_usage) + ", " +
            std::to_string(lse->rows_checked) + " of " + std::to_string(lse->rows_total) + " rows certified";
    for (const std::string& note : lse_context.notes) text += "\nlse note: " + note;
  }
  return text + "\n";
}

// ---- the inputs, checked as check_attention checks them ----

NpyArray load(const std::string& path) {
  auto array = verify::read_npy(path);
  if (!array) throw BadInput(array.error().message);
  return std::move(array).value();
}

int fineness(NpyArray::Type t) { return t == NpyArray::Type::f64 ? 53 : t == NpyArray::Type::f32 ? 24 : 11; }
std::string precision_of(NpyArray::Type t) {
  return t == NpyArray::Type::f64 ? "fp64" : t == NpyArray::Type::f32 ? "fp32" : "fp16";
}

std::string integer_mask_hint(const NpyArray& a, bool mask) {
  if (!mask || (a.dtype.rfind("int", 0) != 0 && a.dtype.rfind("uint", 0) != 0)) return "";
  return "; an integer mask is ambiguous: pass mask.astype(bool) (True = the key takes part) or a float additive "
         "mask (0 and -inf)";
}

// A float tensor (float64, float32, float16); a bool one too when `allow_bool`.
void require_float(const NpyArray& a, const std::string& name, bool allow_bool = false) {
  if (a.type == NpyArray::Type::f64 || a.type == NpyArray::Type::f32 || a.type == NpyArray::Type::f16) return;
  if (allow_bool && a.type == NpyArray::Type::boolean) return;
  throw BadInput(name + ": dtype " + a.dtype + " is not supported (float64, float32, float16; numpy has no bfloat16)" +
                 integer_mask_hint(a, allow_bool));
}

std::string shape_list(const std::vector<std::size_t>& shape) { return verify::shape_text(shape); }

// to_rank4: [L, E] -> [1, 1, L, E]; [B, L, E] -> [B, 1, L, E]; the own axis behind each of the four.
std::pair<std::vector<std::size_t>, std::vector<int>> rank4(const std::vector<std::size_t>& shape, const std::string& name) {
  if (shape.size() == 4) return {shape, {0, 1, 2, 3}};
  if (shape.size() == 3) return {{shape[0], 1, shape[1], shape[2]}, {0, -1, 1, 2}};
  if (shape.size() == 2) return {{1, 1, shape[0], shape[1]}, {-1, -1, 0, 1}};
  throw BadInput(name + ": rank must be 2, 3 or 4 ([L, E], [B, L, E] or [B, H, L, E]), got shape " + shape_list(shape));
}

// check_shapes with allow_empty (the forward admits empty batch and sequence axes).
void check_shapes(const NpyArray& out, const NpyArray& query, const NpyArray& key, const NpyArray& value, bool gqa) {
  const auto &q = query.shape, &k = key.shape, &v = value.shape, &o = out.shape;
  if (!(q.size() == k.size() && k.size() == v.size())) {
    throw BadInput("key/value: rank must match the query's (" + std::to_string(q.size()) + "), got key " +
                   shape_list(k) + " and value " + shape_list(v));
  }
  if (k.back() != q.back()) {
    throw BadInput("key: last dimension (E) is " + std::to_string(k.back()) + ", the query's is " + std::to_string(q.back()));
  }
  if (!std::equal(k.begin(), k.end() - 1, v.begin())) {
    throw BadInput("value: shape " + shape_list(v) + " must match key " + shape_list(k) + " except in the last dimension");
  }
  if (q.size() >= 3 && k[0] != q[0]) {
    throw BadInput("key: batch size " + std::to_string(k[0]) + " differs from the query's " + std::to_string(q[0]));
  }
  if (q.size() == 4 && k[1] != q[1]) {
    if (!gqa) {
      throw BadInput("key: " + std::to_string(k[1]) + " heads differ from the query's " + std::to_string(q[1]) +
                     " (pass --enable-gqa for GQA)");
    }
    if (k[1] == 0 || q[1] % k[1] != 0) {
      throw BadInput("key: its " + std::to_string(k[1]) + " heads do not divide the query's " + std::to_string(q[1]) +
                     " heads");
    }
  }
  std::vector<std::size_t> expected(q.begin(), q.end() - 1);
  expected.push_back(v.back());
  if (o != expected) {
    throw BadInput("out: shape " + shape_list(o) + " should be " + shape_list(expected) +
                   " (query's shape with value's last dimension)");
  }
  for (const auto& [name, shape] : {std::pair{"query", q}, std::pair{"key", k}, std::pair{"value", v}}) {
    const bool empty = shape.back() == 0 || (shape.size() == 4 && shape[1] == 0);
    if (empty) {
      throw BadInput(std::string(name) + ": its heads and last dimension must be positive, got " + shape_list(shape));
    }
  }
}

// require_finite of an additive mask: NaN and +inf refused, by the element's index in its own shape.
void require_mask_values(const std::vector<double>& values, const std::vector<std::size_t>& shape) {
  for (std::size_t k = 0; k < values.size(); ++k) {
    const double x = values[k];
    if (std::isnan(x) || x == HUGE_VAL) {
      std::vector<std::size_t> index(shape.size());
      std::size_t rest = k;
      for (std::size_t d = shape.size(); d-- > 0;) index[d] = rest % shape[d], rest /= shape[d];
      throw BadInput("attn_mask: element " + tuple_text(index) + " of shape " + shape_list(shape) + " is " +
                     (std::isnan(x) ? "NaN" : "+inf") + " (inputs must be finite; -inf only)");
    }
  }
}

// A writable report path (checked before any verdict is printed), as _writable.
void require_writable(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) throw BadInput(path + ": is a directory");
  std::error_code error;
  const std::string directory = std::filesystem::absolute(path, error).lexically_normal().parent_path().string();
  if (error || stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw BadInput(path + ": its directory " + directory + " does not exist");
  }
  const bool exists = access(path.c_str(), F_OK) == 0;
  if (access(exists ? path.c_str() : directory.c_str(), W_OK) != 0) throw BadInput(path + ": not writable");
}

std::vector<std::size_t> parse_key_lengths(const std::string& text) {
  std::vector<std::size_t> lengths;
  std::size_t at = 0;
  const auto bad = [&] {
    return UsageError("--key-lengths: expected integers separated by commas, got '" + text + "'");
  };
  while (true) {
    std::size_t end = text.find(',', at);
    const std::string item = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      throw bad();
    }
    if (used != item.size() || item.empty()) throw bad();
    if (n < 0) throw BadInput("key_lengths: must be at least 0, got " + std::to_string(n));
    lengths.push_back(static_cast<std::size_t>(n));
    if (end == std::string::npos) return lengths;
    at = end + 1;
  }
}

int run_check(const TensorCheckOptions& o) {
  if (!o.json.empty()) require_writable(o.json);
  if (o.seed < 0) throw BadInput("seed: must be at least 0, got " + std::to_string(o.seed));
  const NpyArray query = load(o.query), key = load(o.key), value = load(o.value), out = load(o.out);
  for (const auto& [array, name] : {std::pair{&out, "out"}, std::pair{&query, "query"}, std::pair{&key, "key"},
                                    std::pair{&value, "value"}})
    require_float(*array, name);
  if (value.type != key.type) {
    throw BadInput("value: dtype " + value.dtype + " differs from the key's " + key.dtype + " (key and value share one storage format; the query's may differ)");
  }
  const auto [q4, q_axes] = rank4(query.shape, "query");
  check_shapes(out, query, key, value, o.enable_gqa);
  const auto [k4, k_axes] = rank4(key.shape, "key");
  const auto [v4, v_axes] = rank4(value.shape, "value");
  const auto [o4, o_axes] = rank4(out.shape, "out");
  // The mask: bool (True = takes part) or additive; padded to the query's rank, then as the query.
  std::string mask_kind = "none";
  std::vector<std::size_t> mask_shape;
  std::vector<double> mask;
  if (!o.attn_mask.empty()) {
    const NpyArray m = load(o.attn_mask);
    require_float(m, "attn_mask", true);
    mask_kind = m.type == NpyArray::Type::boolean ? "boolean" : "additive";
    mask = m.values();
    require_mask_values(mask, m.shape);
    if (m.shape.size() > query.shape.size()) {
      throw BadInput("attn_mask: rank " + std::to_string(m.shape.size()) + " exceeds the query's rank " +
                     std::to_string(query.shape.size()));
    }
    std::vector<std::size_t> padded(query.shape.size() - m.shape.size(), 1);
    padded.insert(padded.end(), m.shape.begin(), m.shape.end());
    mask_shape = rank4(padded, "attn_mask").first;
  }
  if (o.window_size.size() != 2) throw UsageError("--window-size: expected LEFT RIGHT");
  for (std::size_t side = 0; side < 2; ++side) {
    if (o.window_size[side] < -1) {
      throw BadInput("window_size[" + std::to_string(side) + "]: must be at least -1, got " +
                     std::to_string(o.window_size[side]));
    }
  }
  const std::vector<std::size_t> lengths = o.key_lengths.empty() ? std::vector<std::size_t>{} : parse_key_lengths(o.key_lengths);
  // Notes on dtypes (_dtype_notes, _kv_notes) and the precision inferred from the query's dtype.
  std::vector<std::string> notes;
  const bool widened = !o.precision && fineness(out.type) > fineness(query.type);
  if (!o.precision && out.type != query.type) {
    const std::string name = precision_of(query.type), &input = query.dtype, &stored = out.dtype;
    notes.push_back(widened ? "out is " + stored + ", finer than the inputs' " + input + ": taken as a " + name +
                                  " kernel whose output was widened, certified as " + name +
                                  " without the rounding of the output to " + input
                            : "out is " + stored + ", coarser than the inputs' " + input + ": certified as " + name +
                                  ", so the rounding to " + stored +
                                  " counts against the band (pass precision= to judge it otherwise)");
  }
  if (key.type != query.type) {
    const std::string &k = key.dtype, &q = query.dtype;
    std::string note = "key and value are " + k + ", the query " + q +
                       ": each is certified exact in its own format (P rounded to " + k +
                       " when weights_in_storage, the query to " + k + " when query_in_storage)";
    if (fineness(key.type) > fineness(query.type))
      note += "; key and value finer than the query is unusual (a cache is kept coarser, not finer)";
    notes.push_back(note);
  }
  const std::string precision = o.precision.value_or(precision_of(query.type));
  if (!(std::isfinite(o.softcap) && o.softcap >= 0) || static_cast<double>(static_cast<float>(o.softcap)) != o.softcap) {
    throw BadInput("softcap: expected 0 (off) or a positive finite float32 value, got " + python_repr(o.softcap));
  }
  if (!(o.alpha > 0 && o.alpha < 1)) throw BadInput("alpha: expected a probability in (0, 1), got " + python_repr(o.alpha));
  // The LSE: out's shape without its last axis.
  std::optional<NpyArray> lse;
  std::vector<double> lse_values;
  if (!o.lse.empty()) {
    lse = load(o.lse);
    require_float(*lse, "lse");
    const std::vector<std::size_t> expected(out.shape.begin(), out.shape.end() - 1);
    if (lse->shape != expected) {
      throw BadInput("lse: expected shape " + tuple_text(expected) + " (out's without its last axis), got " +
                     tuple_text(lse->shape));
    }
    lse_values = lse->values();
  }
  std::vector<double> sinks;
  if (!o.sinks.empty()) {
    const NpyArray s = load(o.sinks);
    require_float(s, "sinks");
    if (s.shape != std::vector<std::size_t>{q4[1]}) {
      throw BadInput("sinks: expected shape (" + std::to_string(q4[1]) + ",) (one logit per query head), got " +
                     tuple_text(s.shape));
    }
    sinks = s.values();
    for (const double z : sinks)
      if (!std::isfinite(z) || static_cast<double>(static_cast<float>(z)) != z)
        throw BadInput("sinks: expected finite float32 values");
    if (o.key_tile || o.splits || o.single_pass || o.ordered || o.sum_chunk) {
      throw BadInput("sinks: declare no kernel structure (where a kernel adds the sink in its tiling is not modelled)");
    }
  }
  // The structure as the report shows it, in check_attention's order.
  nlohmann::ordered_json structure = nlohmann::ordered_json::object();
  if (o.key_tile) structure["key_tile"] = *o.key_tile;
  if (o.sum_chunk) structure["sum_chunk"] = *o.sum_chunk;
  if (o.single_pass) structure["single_pass"] = true;
  if (o.splits) structure["splits"] = *o.splits;
  if (o.ordered) structure["ordered"] = true;

  verify::CertifyOptions options;
  std::pair<TensorReport, std::optional<TensorReport>> reports;
  try {
    options = verify::options_of(precision, std::nullopt, std::nullopt,
                                 o.query_in_storage ? std::optional<bool>(true) : std::nullopt, o.rows,
                                 static_cast<std::uint64_t>(o.seed), o.tier, o.alpha, 100);
    options.arithmetic.output_rounded = !widened;
    if (o.accumulator) options.arithmetic.accumulator = verify::format_named(*o.accumulator, "accumulator");
    options.arithmetic.structure = verify::structure_of(o.key_tile, o.sum_chunk, o.single_pass, o.splits, o.ordered);
    const std::optional<verify::DType> kv_dtype =
        key.type == query.type ? std::nullopt : std::optional(verify::format_named(precision_of(key.type), "key"));
    const verify::TensorProblem problem = verify::problem_without_values(
        q4, k4, v4, mask_kind, mask_shape, std::move(mask), o.is_causal ? o.causal_alignment : "none",
        {o.window_size[0], o.window_size[1]}, {}, o.softcap, sinks, o.scale, lengths, options.arithmetic.storage,
        kv_dtype);
    const verify::LseFormat lse_format = verify::lse_format_of(lse ? std::optional(precision_of(lse->type)) : std::nullopt,
                                                               o.lse_base == "2", o.masked_lse == "+inf");
    reports = verify::certify_views(problem, out.view(o4, o_axes), query.view(q4, q_axes), key.view(k4, k_axes),
                                    value.view(v4, v_axes), options,
                                    lse ? std::optional<std::span<const double>>(lse_values) : std::nullopt, lse_format);
  } catch (const std::invalid_argument& error) {
    throw BadInput(error.what());
  }
  const TensorReport& report = reports.first;
  ReportContext context;
  context.rank = query.shape.size();
  context.elements_total = out.size();
  context.precision = precision;
  context.seed = o.seed;
  context.tier = o.tier;
  context.alpha = o.alpha;
  context.structure = structure;
  context.notes = notes;
  ReportContext lse_context = context;
  lse_context.lse = true;
  lse_context.notes.clear();
  bool lse_passed = true;
  nlohmann::ordered_json lse_json;  // null without an LSE
  if (reports.second) {
    lse_context.elements_total = lse->size();
    lse_context.notes.push_back(std::string("log-sum-exp in base ") + (o.lse_base == "2" ? "2" : "e") + ", stored as " +
                                precision_of(lse->type) + "; rows without keys must hold " +
                                (sinks.empty() ? o.masked_lse : "their sink z (log e^z)") +
                                "; one band decides both tiers");
    lse_passed = reports.second->passed;
    lse_json = report_json(*reports.second, lse_context, lse_passed, nullptr);
  }
  const bool passed = report.passed && lse_passed;
  if (!o.json.empty()) {  // written before the verdict is printed: a failed write prints no verdict
    const auto written = write_file(o.json, report_json(report, context, passed, lse_json).dump(1) + "\n");
    if (!written) throw BadInput(written.error().message);
  }
  const auto printed = write_stdout(report_text(report, context, passed, reports.second, lse_context, lse_passed));
  if (!printed) return fail(printed.error(), kBadInput);
  if (passed) return kPassed;
  if (report.failure_count) {
    std::fprintf(stderr, "attncheck: FAILED, %zu element(s); worst at %s\n", report.failure_count,
                 failures_of(report, context).front().describe().c_str());
  }
  if (reports.second && !lse_passed) {
    std::fprintf(stderr, "attncheck: LSE FAILED, %zu row(s); worst at %s\n", reports.second->failure_count,
                 failures_of(*reports.second, lse_context).front().describe().c_str());
  }
  return kFailed;
}

}  // namespace

void register_tensor(CLI::App& app, Commands& commands) {
  auto* tensor = app.add_subcommand("tensor", "Certify attention tensors saved as .npy files (kernel outputs)");
  tensor->require_subcommand(1);
  auto* check = tensor->add_subcommand(
      "check", "Certify OUT = SDPA(QUERY, KEY, VALUE, ...) from .npy files against the exact oracle");
  auto o = std::make_shared<TensorCheckOptions>();
  for (auto [flag, target] : {std::pair{"--query", &o->query}, std::pair{"--key", &o->key},
                              std::pair{"--value", &o->value}, std::pair{"--out", &o->out}}) {
    check->add_option(flag, *target, "FILE.npy")->required();
  }
  check->add_option("--attn-mask", o->attn_mask, "boolean (True = takes part) or additive mask (FILE.npy)");
  check->add_flag("--is-causal", o->is_causal, "causal: key j takes part in query i iff j <= i (see --causal-alignment)");
  check->add_option("--causal-alignment", o->causal_alignment, "top-left (PyTorch) or bottom-right (FlashAttention >= 2.1)")
      ->check(CLI::IsMember({"top-left", "bottom-right"}))
      ->default_str("top-left");
  check->add_option("--window-size", o->window_size,
                    "LEFT RIGHT: sliding window (FlashAttention's window_size, bottom-right aligned): query i sees keys "
                    "i+S-L-LEFT .. i+S-L+RIGHT; -1 an unbounded side (default -1 -1)")
      ->expected(2)
      ->default_str("-1 -1");
  check->add_option("--softcap", o->softcap,
                    "FlashAttention's logit softcap c: scores become c·tanh(s/c) before the mask (default 0: off)");
  check->add_option("--sinks", o->sinks, "attention sinks: [Hq] float32 logits in every denominator (FILE.npy)");
  check->add_option("--scale", o->scale, "multiplier of Q·Kᵀ (default 1/√E)");
  check->add_flag("--enable-gqa", o->enable_gqa, "Hq = G·Hkv: query head h reads kv head h // G");
  check->add_option("--key-lengths", o->key_lengths, "N,N,...: per batch item, keys j >= N are masked");
  check->add_option("--precision", o->precision, "default: from the query's dtype")
      ->check(CLI::IsMember({"fp64", "fp32", "fp16", "bf16", "fp16-math", "bf16-math"}));
  check->add_option("--rows", o->rows, "certify a seeded sample of this many rows (default all)")
      ->check(kPositive);
  check->add_option("--seed", o->seed, "of the sample (default 0)");
  check->add_option("--tier", o->tier, "the tier that decides the verdict (both are reported; default certified)")
      ->check(CLI::IsMember({"certified", "statistical"}));
  check->add_option("--alpha", o->alpha,
                    "the statistical tier's false-alarm probability for the whole report (default 1e-9)");
  check->add_option("--key-tile", o->key_tile, "declared: online softmax over tiles of this many keys")
      ->check(kPositive);
  check->add_option("--sum-chunk", o->sum_chunk,
                    "declared: terms summed apart in chunks of this many keys (needs --key-tile or --single-pass)")
      ->check(kPositive);
  check->add_flag("--single-pass", o->single_pass, "declared: no online rescale");
  check->add_option("--splits", o->splits, "declared: at most this many LSE-merged key partitions")
      ->check(kPositive);
  check->add_flag("--ordered", o->ordered, "declared: terms added one at a time in key order (needs --splits 1)");
  check->add_option("--accumulator", o->accumulator,
                    "P·V accumulated in this format, coarser than compute (ggml's decode path: fp16)")
      ->check(CLI::IsMember({"fp64", "fp32", "fp16", "bf16"}));
  check->add_flag("--query-in-storage", o->query_in_storage,
                  "the query rounded to the key's dtype before Q·Kᵀ (ggml with an fp16 KV cache)");
  check->add_option("--lse", o->lse, "the kernel's log-sum-exp, out's shape without its last axis, certified too (FILE.npy)");
  check->add_option("--lse-base", o->lse_base, "the LSE's log base (default e)")->check(CLI::IsMember({"e", "2"}));
  check->add_option("--masked-lse", o->masked_lse, "what a row without keys holds in the LSE (+inf: FlashAttention 2)")
      ->check(CLI::IsMember({"-inf", "+inf"}));
  check->add_option("--json", o->json, "write the report as JSON (checked writable before anything is certified)");
  check->footer(
      "The same command as `python3 -m attncheck check`: the same options, report and JSON (no --html:\n"
      "attncheck.Report.from_json(open(FILE).read()).to_html(PAGE) draws the page from --json FILE).\n"
      "query [L, E], [B, L, E] or [B, Hq, L, E] (float64, float32, float16), key [.., Hkv, S, E], value [.., S, Ev],\n"
      "out [.., L, Ev]; a NaN or inf input follows IEEE semantics (README, \"NaN and infinity in the inputs\").\n"
      "Exit status: 0 passed, 1 failed (the worst element named on stderr), 2 usage error, 3 bad input\n"
      "(unreadable file, wrong shape or dtype); every error is one line on stderr.\n");
  commands.push_back({check, [o]() -> int {
                        try {
                          return run_check(*o);
                        } catch (const UsageError& error) {
                          std::fprintf(stderr, "attncheck: usage: %s\n", error.what());
                          return kUsage;
                        } catch (const BadInput& error) {
                          std::fprintf(stderr, "attncheck: %s\n", error.what());
                          return kBadInput;
                        } catch (const ContractError& error) {
                          std::fprintf(stderr, "attncheck: %s\n", error.what());
                          return kBadInput;
                        }
                      }});
}

}  // namespace attn::cli
