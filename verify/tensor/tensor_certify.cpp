#include "tensor/tensor_certify.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "numeric/double_interval.hpp"
#include "numeric/mpfr.hpp"
#include "tensor/tensor_ieee.hpp"
#include "tensor/tensor_report.hpp"

// Verdict. The oracle encloses each exact value y in [m - r, m + r]; the kernel's value x fails
// when its distance to that enclosure exceeds δ. The enclosure is refined until 2r <= δ/1000, so
// the verdict |x - y| <= δ is decided up to 0.1% of δ: a value judged inside lies within 1.001·δ
// of y, one judged outside at least δ away. A row still wider at the precision cap is counted in
// `capped_rows` and judged the same way on its last enclosure.
// Refinement. First the oracle's fast double pass (enclose_row_fast, O(S·(E + Ev)) double work);
// MPFI from 64 bits, doubling, only when that pass gives up or is wider than δ/1000. The fraction
// is kept at 1/1000: on fp32 rows the fast pass is ~1e-13 wide relative to Σ w|v| against a δ/1000
// near 1e-6 of it, so a coarser fraction would save nothing there, while fp64 rows (δ a few ulps
// per key) need MPFI at any fraction below ~1/10, and 0.1% keeps "inside" within 1.001·δ.

namespace attn::verify {
using detail::parallel_for;
using detail::report_of;
using detail::RowOutcome;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kDecades = 12;  // histogram bins as in report_svg.cpp: 0, 1e-12 .. 1, > 1


// RowTerms buffers outlive the worker threads that fill them: a long row's take megabytes, and
// certify_tensor starts its workers anew on every call, so each worker borrows one from this pool
// (for its thread's lifetime) instead of allocating and first-touching them for every call.
class TermsPool {
 public:
  static constexpr std::size_t kKeepDoubles = std::size_t{1} << 22;  // 32 MB of values: [4096, 1024], [32768, 128]

  static std::unique_ptr<RowTerms> take() {
    TermsPool& pool = instance();
    const std::lock_guard lock(pool.mutex_);
    if (pool.free_.empty()) return std::make_unique<RowTerms>();
    std::unique_ptr<RowTerms> terms = std::move(pool.free_.back());
    pool.free_.pop_back();
    return terms;
  }
  static void give(std::unique_ptr<RowTerms> terms) {
    // A very long row's buffers (V alone is keys × Ev doubles: 128 MB at 128k keys and Ev = 128) are
    // not kept for the calls after it: the next borrower allocates what it needs.
    if (terms->v.capacity() > kKeepDoubles) terms = std::make_unique<RowTerms>();
    TermsPool& pool = instance();
    const std::lock_guard lock(pool.mutex_);
    pool.free_.push_back(std::move(terms));
  }

 private:
  static TermsPool& instance() {
    static TermsPool pool;  // constructed before any borrower, so destroyed after every one
    return pool;
  }
  std::mutex mutex_;
  std::vector<std::unique_ptr<RowTerms>> free_;
};

struct BorrowedTerms {
  std::unique_ptr<RowTerms> terms = TermsPool::take();
  BorrowedTerms() = default;
  BorrowedTerms(const BorrowedTerms&) = delete;
  BorrowedTerms& operator=(const BorrowedTerms&) = delete;
  ~BorrowedTerms() { TermsPool::give(std::move(terms)); }
};


// The empty heatmaps of an output ([B, Hq, L, Ev]: per head over queries and columns) and of an LSE
// ([B, Hq, L]: one column).
UsageHeatmap output_heatmap(const TensorProblem& p) { return {p.q_heads, p.L, p.Ev}; }
UsageHeatmap lse_heatmap(const TensorProblem& p) { return {p.q_heads, p.L, 1}; }

TensorFailure failure_at(const TensorProblem& p, std::size_t row, std::size_t c, double got, const char* reason) {
  const RowIndex r = row_index(p, row);
  return {{r.b, r.h, r.i, c}, got, {0, 0}, 0, 0, 0, std::fabs(got) / ulp_of(p.dtype, 0), kInf, reason};
}

// The whole-tensor checks of one row: every element finite; a row without keys exactly ±0.
void cheap_checks(const TensorProblem& p, std::span<const double> output, std::size_t row, bool empty,
                  RowOutcome& outcome) {
  const std::size_t first = output_index(p, row, 0);  // the row's Ev outputs are contiguous
  for (std::size_t c = 0; c < p.Ev; ++c) {
    const double got = output[first + c];
    if (std::isnan(got)) {
      outcome.failures.push_back(failure_at(p, row, c, got, empty ? "NaN in a fully masked row" : "NaN"));
    } else if (std::isinf(got)) {
      outcome.failures.push_back(failure_at(p, row, c, got, "Inf"));
    } else if (empty && got != 0) {
      outcome.failures.push_back(failure_at(p, row, c, got, "masked row not zero"));
    }
  }
}

// The exact check of one row with keys: enclose, band, refine to δ/1000 of the narrower tier,
// judge every element against both tiers.
// A row's final enclosure and its natural-units LSE band (TierBands::lse), handed from the
// output's certification to the LSE's (certify_tensor_and_lse) so the row is enclosed once.
struct SharedRow {
  RowEnclosure enclosure;
  double lse_band = -1;  // < 0: nothing handed on
};

// `columns` (IEEE inputs): only the columns whose class is IeeeColumn::value are judged here.
void certify_row(const TensorProblem& p, std::span<const double> output, std::size_t row, const RowBands& bands,
                 const CertifyOptions& options, double lambda, RowOutcome& outcome, SharedRow* shared = nullptr,
                 const std::vector<detail::IeeeColumn>* columns = nullptr) {
  // The fast double pass first; MPFI (from 64 bits) only when it is out of range or too wide.
  std::optional<RowEnclosure> fast = enclose_row_fast(p, row);
  const bool had_fast = fast.has_value();
  RowEnclosure enclosure = had_fast ? std::move(*fast) : enclose_row(p, row, 64);
  const auto both = [&] {
    TierBands b = bands(row, enclosure, lambda);
    if (b.statistical.empty()) b.statistical = b.certified;
    return b;
  };
  TierBands band = both();
  std::vector<double> targets(p.Ev);
  for (std::size_t c = 0; c < p.Ev; ++c) targets[c] = std::min(band.certified[c], band.statistical[c]) / 1000;
  bool narrow = true;
  for (std::size_t c = 0; c < p.Ev; ++c) narrow = narrow && 2 * enclosure.fine[c].radius <= targets[c];
  if (!narrow) {
    enclosure = enclose_row(p, row, targets, {had_fast ? 64 : 128, 1024, false});
    band = both();  // from the tighter enclosure; each is rigorous
  }
  outcome.capped = enclosure.capped;
  outcome.fast = enclosure.fast;
  outcome.certified = true;
  const std::vector<double> plain = plain_row(p, row, options.arithmetic.compute);
  const RowIndex r = row_index(p, row);
  outcome.head = r.h, outcome.query = r.i;
  const bool by_certified = options.tier == Tier::certified;
  const std::vector<double>& deciding = by_certified ? band.certified : band.statistical;
  const std::vector<double>& other = by_certified ? band.statistical : band.certified;
  for (std::size_t c = 0; c < p.Ev; ++c) {
    const double got = output[output_index(p, row, c)];
    if (!std::isfinite(got)) continue;  // failed in cheap_checks
    if (columns && (*columns)[c] != detail::IeeeColumn::value && (*columns)[c] != detail::IeeeColumn::maybe_nan)
      continue;  // NaN or ±inf: judged by its class
    const FineEnclosure& exact = enclosure.fine[c];
    const Distance d = distance_to(exact, got);
    const auto usage_of = [&](double delta) { return d.lower == 0 ? 0 : delta > 0 ? d.lower / delta : kInf; };
    const double usage = usage_of(deciding[c]), other_usage = usage_of(other[c]);
    if (!std::isfinite(band.certified[c])) ++outcome.unbounded;
    outcome.usages.push_back(usage);
    outcome.other_usages.push_back(other_usage);
    outcome.usage_columns.push_back(static_cast<std::uint32_t>(c));
    const double half_ulp = ulp_of(p.dtype, exact.head) / 2;
    outcome.plain_ratios.push_back(d.to_mid / std::max(distance_to(exact, plain[c]).to_mid, half_ulp));
    if (other_usage > 1) ++outcome.other_failures;
    if (usage > 1) {
      const double ulps = d.to_mid / ulp_of(p.dtype, exact.head);
      outcome.failures.push_back({{r.b, r.h, r.i, c}, got, enclosure.out[c], deciding[c], band.certified[c],
                                  band.statistical[c], ulps, usage, "outside band"});
    }
  }
  if (shared) shared->lse_band = band.lse, shared->enclosure = std::move(enclosure);
}

bool worse(const TensorFailure& a, const TensorFailure& b) {
  if (a.usage != b.usage) return a.usage > b.usage;
  return a.index < b.index;
}

std::string number(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", x);
  return text;
}

bool same_arithmetic(const Arithmetic& a, const Arithmetic& b) {
  return a.storage == b.storage && a.compute == b.compute && a.exp_ulps == b.exp_ulps &&
         a.weights_in_storage == b.weights_in_storage && a.query_in_storage == b.query_in_storage &&
         a.scores_in_storage == b.scores_in_storage && a.output_rounded == b.output_rounded &&
         a.accumulator == b.accumulator && a.kv_storage == b.kv_storage;
}

// The bands of `arithmetic` (its kv_storage taken from the problem, which says what key and value are
// stored in) from band_terms, each thread reusing one RowTerms row after row and call after call.
RowBands standard_bands(const TensorProblem& problem, Arithmetic arithmetic) {
  arithmetic.kv_storage = problem.kv_dtype;
  return [&problem, arithmetic](std::size_t row, const RowEnclosure& enclosure, double lambda) {
    thread_local BorrowedTerms borrowed;
    band_terms(problem, row, enclosure, *borrowed.terms);
    return tensor_row_tier_bands(*borrowed.terms, arithmetic, lambda);
  };
}

void certify_rows(const TensorProblem& p, std::span<const double> output, const std::vector<char>& certify,
                  const RowBands& bands, const CertifyOptions& options, double lambda,
                  std::vector<RowOutcome>& outcomes, std::span<const double> lse = {},
                  const LseFormat* format = nullptr, std::vector<RowOutcome>* lse_outcomes = nullptr);

// diagnose's body: `passes` certifies the output under other options.
void diagnose_with(DType dtype, const CertifyOptions& options, TensorReport& report,
                   const std::function<bool(const CertifyOptions&)>& passes) {
  report.diagnosed = true;
  // NaN, Inf and nonzero masked rows fail under every profile: only band failures are diagnosed.
  const bool outside = std::any_of(report.failures.begin(), report.failures.end(),
                                   [](const TensorFailure& f) { return f.reason == "outside band"; });
  if (!outside && report.failure_count == report.failures.size()) return;
  for (const std::string& name : profiles_for(dtype)) {
    if (name == options.profile) continue;
    CertifyOptions other = options;
    other.arithmetic = arithmetic_profile(name).value();
    other.arithmetic.structure = options.arithmetic.structure;
    other.arithmetic.exp_ulps = std::max(other.arithmetic.exp_ulps, options.arithmetic.exp_ulps);
    other.arithmetic.output_rounded = options.arithmetic.output_rounded;
    other.arithmetic.accumulator = options.arithmetic.accumulator;
    other.arithmetic.kv_storage = options.arithmetic.kv_storage;
    other.diagnose = false;
    other.max_failures = 0;
    if (same_arithmetic(other.arithmetic, options.arithmetic)) continue;
    if (passes(other)) report.consistent_with.push_back(name);
  }
}

}  // namespace

// The standard profiles of the dtype under which the same output passes (the declared structure,
// a larger exp_ulps and a widened output carried over); the profile in use is not certified again.
void diagnose(const TensorProblem& p, std::span<const double> output, const CertifyOptions& options,
              TensorReport& report) {
  diagnose_with(p.dtype, options, report,
                [&](const CertifyOptions& other) { return certify_tensor(p, output, other).passed; });
}

std::string sinks_error(const TensorProblem& p, const KernelStructure& s) {
  if (!has_sinks(p)) return "";
  if (s.key_tile != 0 || s.single_pass || s.ordered || s.sum_chunk != 1 || s.splits != 0)
    return "sinks: declare no kernel structure (where a kernel adds the sink in its tiling is not modelled)";
  return "";
}

RowTerms band_terms(const TensorProblem& p, std::size_t row, const RowEnclosure& e) {
  RowTerms t;
  band_terms(p, row, e, t);
  return t;
}

void band_terms(const TensorProblem& p, std::size_t row, const RowEnclosure& e, RowTerms& t) {
  // Every vector is cleared and refilled, keeping its capacity (certify_tensor reuses one per thread).
  for (std::vector<double>* v : {&t.gap, &t.gap_hi, &t.abs_bias, &t.weight, &t.weight_lo, &t.dot_lo, &t.dot_hi,
                                 &t.l2_dot, &t.abs_key, &t.abs_y, &t.y_lo, &t.y_hi})
    v->clear();
  t.keys = e.keys.size();
  t.position = e.keys;
  t.E = p.E;
  t.abs_dot = e.abs_dots;
  t.scale = std::max(std::fabs(e.scale.lo), std::fabs(e.scale.hi));
  t.scale_defaulted = !p.scale.has_value();
  t.computed_bias = !p.alibi_slopes.empty();
  t.softcap = p.softcap;
  t.sink = has_sinks(p);
  const RowIndex r = row_index(p, row);
  const std::size_t kv = kv_head_of(p, r.h);
  double top_lower = -kInf;  // the largest score is at least every score's lower end
  for (const Interval& s : e.scores) top_lower = std::max(top_lower, s.lo);
  double top_upper = -kInf;
  for (const Interval& s : e.scores) top_upper = std::max(top_upper, s.hi);
  const double* q = p.query.data() + tensor_index(p, p.q_heads, p.L, p.E, r.b, r.h, r.i, 0);
  double query_sum = 0;
  for (std::size_t c = 0; c < p.E; ++c) query_sum += std::fabs(q[c]);
  t.abs_query = up_bound(query_sum * (1 + 0x1p-40));
  for (std::size_t k = 0; k < t.keys; ++k) {
    t.gap.push_back(std::max(0.0, next_down(top_lower - e.scores[k].hi)));
    t.gap_hi.push_back(std::max(0.0, up_bound(top_upper - e.scores[k].lo)));
    const bool sink = e.keys[k] == p.S;  // the sink: score z, dot 0, value 0
    t.abs_bias.push_back(std::fabs(sink ? sink_of(p, r.h) : additive_bias(p, r.b, r.h, r.i, e.keys[k])));
    t.weight.push_back(e.weights[k].hi);
    t.weight_lo.push_back(std::max(0.0, e.weights[k].lo));
    t.dot_lo.push_back(e.dots[k].lo);
    t.dot_hi.push_back(e.dots[k].hi);
    // √Σ_c (q_c k_jc)²: products and sum in double (relative error < (E + 2)·2^-53 in any order:
    // every term is >= 0, so the lanes may reassociate), rounded up.
    const double* key = p.key.data() + tensor_index(p, p.kv_heads, p.S, p.E, r.b, kv, sink ? 0 : e.keys[k], 0);
    double squares = 0, key_sum = 0;
#pragma omp simd reduction(+ : squares, key_sum)
    for (std::size_t c = 0; c < p.E; ++c) squares += (q[c] * key[c]) * (q[c] * key[c]), key_sum += std::fabs(key[c]);
    if (sink) squares = key_sum = 0;
    t.l2_dot.push_back(std::sqrt(squares) * (1 + 0x1p-30) + 0x1p-1000);
    t.abs_key.push_back(up_bound(key_sum * (1 + 0x1p-40)));
  }
  // The values key-major as they are stored (v_j is Ev contiguous doubles in either layout).
  t.v.resize(t.keys * p.Ev);
  t.abs_v_max.assign(p.Ev, 0.0);
  for (std::size_t k = 0; k < t.keys; ++k) {
    if (e.keys[k] == p.S) {  // the sink's value row is 0
      std::fill_n(t.v.begin() + static_cast<std::ptrdiff_t>(k * p.Ev), p.Ev, 0.0);
      continue;
    }
    const double* v = p.value.data() + tensor_index(p, p.kv_heads, p.S, p.Ev, r.b, kv, e.keys[k], 0);
    std::copy(v, v + p.Ev, t.v.begin() + static_cast<std::ptrdiff_t>(k * p.Ev));
    for (std::size_t c = 0; c < p.Ev; ++c) t.abs_v_max[c] = std::max(t.abs_v_max[c], std::fabs(v[c]));
  }
  for (std::size_t c = 0; c < p.Ev; ++c) {
    t.abs_y.push_back(std::max(std::fabs(e.out[c].lo), std::fabs(e.out[c].hi)));
    t.y_lo.push_back(e.out[c].lo);
    t.y_hi.push_back(e.out[c].hi);
  }
}

namespace {

// The whole-tensor checks of one row under IEEE inputs (tensor_ieee.hpp): a NaN or infinite class
// must hold NaN (or the infinity; NaN is allowed there too), every other element must be finite, and
// zero in a row without keys; a NaN where none may be names the input that leaked it, if one did.
void ieee_checks(const TensorProblem& p, std::span<const double> output, std::size_t row,
                 const detail::IeeeExpectation& e, bool empty, const detail::IeeeInputs& inputs,
                 RowOutcome& outcome) {
  using detail::IeeeColumn;
  using detail::IeeeRow;
  outcome.unmodelled = e.row == IeeeRow::unmodelled;
  const bool keyless = empty || e.row == IeeeRow::keyless;
  const std::size_t first = output_index(p, row, 0);
  const auto fail = [&](std::size_t c, double got, std::string reason) {
    TensorFailure f = failure_at(p, row, c, got, "");
    f.reason = std::move(reason);
    outcome.failures.push_back(std::move(f));
  };
  const auto source = [&] {
    const std::string leak = inputs.leak_source(row);
    return leak.empty() ? std::string() : " (" + leak + ")";
  };
  for (std::size_t c = 0; c < p.Ev; ++c) {
    const double got = output[first + c];
    const IeeeColumn want = e.row == IeeeRow::nan ? IeeeColumn::nan : e.columns[c];
    if (e.nan_allowed && std::isnan(got) && want != IeeeColumn::nan) continue;
    if (want == IeeeColumn::maybe_nan) {
      if (std::isnan(got)) continue;  // else as a value: zero without keys, finite in an unmodelled row
    } else if (want != IeeeColumn::value) {
      ++outcome.ieee_elements;
      const bool inf_ok = (want == IeeeColumn::plus_inf && got == kInf) || (want == IeeeColumn::minus_inf && got == -kInf);
      if (std::isnan(got) || inf_ok) continue;
      const char* expected = want == IeeeColumn::nan ? "NaN" : want == IeeeColumn::plus_inf ? "+inf or NaN" : "-inf or NaN";
      fail(c, got, std::string("not ") + expected + " where IEEE arithmetic gives it (" + e.cause + ")");
      continue;
    }
    if (std::isnan(got)) {
      fail(c, got, (e.row == IeeeRow::keyless ? "NaN in a row whose every score is -inf (" + e.cause + ")"
                    : empty                   ? std::string("NaN in a fully masked row")
                                              : std::string("NaN")) + source());
    } else if (std::isinf(got)) {
      fail(c, got, "Inf" + source());
    } else if (keyless && got != 0) {
      fail(c, got, e.row == IeeeRow::keyless ? "not zero in a row whose every score is -inf (" + e.cause + ")"
                                             : std::string("masked row not zero"));
    }
  }
}

// certify_tensor's contract, ContractError naming what is wrong: a valid problem (admitting what
// `admit` admits), sinks without a declared structure, B·Hq·L·Ev outputs, alpha in (0, 1).
void require_certifiable(const TensorProblem& p, std::span<const double> output, const CertifyOptions& options,
                         Admit admit) {
  if (auto ok = validate(p, admit); !ok) throw ContractError("certify_tensor: " + ok.error().message);
  if (const std::string error = sinks_error(p, options.arithmetic.structure); !error.empty())
    throw ContractError("certify_tensor: " + error);
  if (output.size() != p.batch * p.q_heads * p.L * p.Ev)
    throw ContractError("certify_tensor: output size is not B·Hq·L·Ev");
  if (!(options.alpha > 0 && options.alpha < 1)) throw ContractError("certify_tensor: alpha must be in (0, 1)");
}

// NaN or ±inf inputs, or an empty problem: each row's IEEE expectation decides its non-finite
// elements; the others are certified on the problem with those inputs set to 0, which none of them
// reaches (tensor_ieee.hpp, rules 1-4).
TensorReport certify_ieee(const TensorProblem& problem, std::span<const double> output, const CertifyOptions& options) {
  require_certifiable(problem, output, options, Admit::ieee);
  const std::size_t total = problem.batch * problem.q_heads * problem.L;
  const detail::IeeeInputs inputs(problem);
  const TensorProblem finite = inputs.finite_problem();
  const RowBands bands = standard_bands(finite, options.arithmetic);
  const double lambda = statistical_lambda(options.alpha, total * problem.Ev);
  std::vector<char> certify(total, 0);
  for (std::size_t row : sample_rows(finite, options.rows, options.seed)) certify[row] = 1;
  std::vector<RowOutcome> outcomes(total);
  parallel_for(total, options.threads, [&](std::size_t row) {
    const detail::IeeeExpectation e = inputs.expect(row);
    const bool empty = !row_has_keys(finite, row);
    if (e.row != detail::IeeeRow::normal) certify[row] = 0;  // judged by its class, not certified
    ieee_checks(finite, output, row, e, empty, inputs, outcomes[row]);
    if (e.row == detail::IeeeRow::normal && certify[row] && !empty)
      certify_row(finite, output, row, bands, options, lambda, outcomes[row], nullptr, &e.columns);
  });
  return report_of(outcomes, certify, options, lambda, output_heatmap(problem));
}

}  // namespace

std::vector<std::size_t> sample_rows(const TensorProblem& p, std::optional<std::size_t> rows, std::uint64_t seed) {
  const std::size_t total = p.batch * p.q_heads * p.L;
  std::vector<std::size_t> all(total);
  for (std::size_t k = 0; k < total; ++k) all[k] = k;
  if (!rows || *rows >= total) return all;  // total = 0 included
  std::vector<bool> chosen(total, false);
  chosen[0] = chosen[total - 1] = true;
  for (std::size_t row = 0; row < total; ++row) chosen[row] = chosen[row] || !row_has_keys(p, row);
  std::size_t count = static_cast<std::size_t>(std::count(chosen.begin(), chosen.end(), true));
  // A partial Fisher-Yates shuffle with mt19937_64 (fully specified by the standard, so a seed
  // replays on every platform; the modulo bias is below 2^-40 for fewer than 2^24 rows).
  std::mt19937_64 random(seed);
  for (std::size_t k = 0; k < total && count < *rows; ++k) {
    std::swap(all[k], all[k + random() % (total - k)]);
    if (!chosen[all[k]]) chosen[all[k]] = true, ++count;
  }
  std::vector<std::size_t> out;
  for (std::size_t row = 0; row < total; ++row) {
    if (chosen[row]) out.push_back(row);
  }
  return out;
}

TensorReport certify_tensor(const TensorProblem& problem, std::span<const double> output,
                            const CertifyOptions& options) {
  if (has_nonfinite_inputs(problem) || is_empty(problem)) return certify_ieee(problem, output, options);
  TensorReport report = certify_tensor(problem, output, options, standard_bands(problem, options.arithmetic));
  if (!report.passed && options.diagnose) diagnose(problem, output, options, report);
  return report;
}

TensorReport certify_tensor(const TensorProblem& p, std::span<const double> output, const CertifyOptions& options,
                            const RowBands& bands) {
  require_certifiable(p, output, options, Admit::strict);
  const std::size_t total = p.batch * p.q_heads * p.L;
  const double lambda = statistical_lambda(options.alpha, total * p.Ev);
  std::vector<char> certify(total, 0);
  for (std::size_t row : sample_rows(p, options.rows, options.seed)) certify[row] = 1;
  std::vector<RowOutcome> outcomes(total);
  certify_rows(p, output, certify, bands, options, lambda, outcomes);
  return report_of(outcomes, certify, options, lambda, output_heatmap(p));
}

namespace detail {

void judge(RowOutcome& outcome, const std::array<std::size_t, 4>& index, double got, const FineEnclosure& exact,
           double deciding, double other, double certified, double statistical, DType dtype) {
  const Distance d = distance_to(exact, got);
  const auto usage_of = [&](double delta) { return d.lower == 0 ? 0 : delta > 0 ? d.lower / delta : kInf; };
  const double usage = usage_of(deciding), other_usage = usage_of(other);
  outcome.usages.push_back(usage);
  outcome.other_usages.push_back(other_usage);
  outcome.usage_columns.push_back(static_cast<std::uint32_t>(index[3]));
  outcome.head = index[1], outcome.query = index[2];
  if (other_usage > 1) ++outcome.other_failures;
  if (usage > 1) {
    const Interval bounds{next_down(exact.head + exact.tail - exact.radius),
                          next_up(exact.head + exact.tail + exact.radius)};
    outcome.failures.push_back({index, got, bounds, deciding, certified, statistical,
                                d.to_mid / ulp_of(dtype, exact.head), usage, "outside band"});
  }
}

// The report from every row's outcome (`certify`: the rows certified against the oracle).
TensorReport report_of(std::vector<RowOutcome>& outcomes, const std::vector<char>& certify,
                       const CertifyOptions& options, double lambda, UsageHeatmap heatmap) {
  const std::size_t total = outcomes.size();
  TensorReport report;
  report.tier = options.tier;
  report.alpha = options.alpha;
  report.lambda = lambda;
  report.rows_total = total;
  report.usage_histogram.assign(kDecades + 2, 0);
  double usage_sum = 0, plain_sum = 0, other_sum = 0, other_max = 0;
  std::size_t other_failures = 0;
  for (std::size_t row = 0; row < total; ++row) {
    RowOutcome& o = outcomes[row];
    report.rows_checked += certify[row] ? 1 : 0;
    report.capped_rows += o.capped ? 1 : 0;
    report.unbounded_elements += o.unbounded;
    report.ieee_elements += o.ieee_elements;
    report.unmodelled_rows += o.unmodelled ? 1 : 0;
    report.fast_rows += o.fast ? 1 : 0;
    report.failure_count += o.failures.size();
    // The cheap checks fail both tiers; "outside band" failures of the other tier are counted apart.
    for (const TensorFailure& f : o.failures) other_failures += f.reason != "outside band" ? 1 : 0;
    other_failures += o.other_failures;
    for (double u : o.other_usages) other_sum += u, other_max = std::max(other_max, u);
    for (std::size_t k = 0; k < o.usages.size(); ++k) heatmap.add(o.head, o.query, o.usage_columns[k], o.usages[k]);
    for (const TensorFailure& f : o.failures)  // a failure decided without a band shows as +inf
      heatmap.add(f.index[1], f.index[2], f.index[3], f.reason == "outside band" ? f.usage : kInf);
    for (TensorFailure& f : o.failures) report.failures.push_back(std::move(f));
    for (double u : o.usages) {
      usage_sum += u;
      report.max_band_usage = std::max(report.max_band_usage, u);
      // log10 only of a usage in (0, 1]: log10(0) = -inf has no int (UBSan's float-cast-overflow).
      const double exponent = u > 0 && u <= 1 ? std::floor(std::log10(u)) : 0.0;
      const int decade = std::clamp(static_cast<int>(std::max(exponent, -100.0)) + kDecades, 0, kDecades - 1);
      ++report.usage_histogram[u == 0 ? 0 : u > 1 ? kDecades + 1 : static_cast<std::size_t>(decade) + 1];
    }
    for (double ratio : o.plain_ratios) {
      plain_sum += ratio;
      report.max_plain_ratio = std::max(report.max_plain_ratio, ratio);
    }
    report.elements_certified += o.usages.size();
  }
  if (report.elements_certified) {
    report.mean_band_usage = usage_sum / static_cast<double>(report.elements_certified);
    report.mean_plain_ratio = plain_sum / static_cast<double>(report.elements_certified);
  }
  std::sort(report.failures.begin(), report.failures.end(), worse);
  if (report.failures.size() > options.max_failures) report.failures.resize(options.max_failures);
  report.passed = report.failure_count == 0;
  report.heatmap = std::move(heatmap);
  TierVerdict deciding{report.passed, report.failure_count, report.max_band_usage, report.mean_band_usage};
  TierVerdict other{other_failures == 0, other_failures, other_max,
                    report.elements_certified ? other_sum / static_cast<double>(report.elements_certified) : 0.0};
  report.certified = options.tier == Tier::certified ? deciding : other;
  report.statistical = options.tier == Tier::certified ? other : deciding;
  return report;
}

}  // namespace detail

namespace {

// The exact LSE in base 2: λ / ln 2 to ~150 bits, the radius scaled by 1/ln 2 < 1.4427 and widened
// by the midpoint's roundings (< 2^-100 |λ₂|).
FineEnclosure in_base2(const FineEnclosure& e) {
  if (!std::isfinite(e.head)) return e;
  MpfrFloat mid(160), ln2(160);
  mpfr_const_log2(ln2.get(), MPFR_RNDN);
  mpfr_set_d(mid.get(), e.head, MPFR_RNDN);  // exact
  mpfr_add_d(mid.get(), mid.get(), e.tail, MPFR_RNDN);  // exact: 160 bits hold head + tail
  mpfr_div(mid.get(), mid.get(), ln2.get(), MPFR_RNDN);
  FineEnclosure out;
  out.head = mpfr_get_d(mid.get(), MPFR_RNDN);
  mpfr_sub_d(mid.get(), mid.get(), out.head, MPFR_RNDN);
  out.tail = mpfr_get_d(mid.get(), MPFR_RNDN);
  out.radius = up_bound(e.radius * 1.4427 * (1 + 0x1p-40) + std::fabs(out.head) * 0x1p-100);
  return out;
}

// One LSE row: a row without keys holds exactly the declared infinity (with a sink: z, certified);
// one with keys a finite value
// within stored_lse_band of the exact LSE (certified rows), refined to δ/1000 as certify_row does.
void certify_lse_row(const TensorProblem& p, std::span<const double> lse, std::size_t row, bool certify,
                     const CertifyOptions& options, const LseFormat& format, RowOutcome& outcome,
                     SharedRow* shared = nullptr) {
  const RowIndex r = row_index(p, row);
  const double got = lse[row];
  const auto fail = [&](const char* reason) {
    outcome.failures.push_back({{r.b, r.h, r.i, 0}, got, {0, 0}, 0, 0, 0, kInf, kInf, reason});
  };
  const bool keyless = !row_has_keys(p, row);
  if (keyless && !has_sinks(p)) {
    const double expected = format.masked_plus_inf ? kInf : -kInf;
    if (got != expected) fail(format.masked_plus_inf ? "masked row LSE not +inf" : "masked row LSE not -inf");
    return;
  }
  if (std::isnan(got)) return fail("NaN");
  if (std::isinf(got)) return fail("Inf");
  if (!certify) return;
  if (keyless) {
    // No key, but the sink: λ = log e^{z} = z, within sink_only_lse_band as a kernel computes it
    // (its maximum z through a few roundings, or reset to 0); in base 2 z / ln 2 and a coarser
    // storage rounds once more (stored_lse_band).
    const double z = sink_of(p, r.h);
    const FineEnclosure natural{z, 0, 0};
    const double delta = stored_lse_band(sink_only_lse_band(z, options.arithmetic), std::fabs(z), format,
                                         options.arithmetic.compute);
    outcome.certified = true;
    detail::judge(outcome, {r.b, r.h, r.i, 0}, got, format.base2 ? in_base2(natural) : natural, delta, delta, delta,
                  delta, format.storage);
    return;
  }
  const bool handed = shared != nullptr && shared->lse_band >= 0;
  RowEnclosure enclosure;
  if (handed) {
    enclosure = std::move(shared->enclosure);
  } else {
    std::optional<RowEnclosure> fast = enclose_row_fast(p, row);
    enclosure = fast ? std::move(*fast) : enclose_row(p, row, 64);
  }
  thread_local BorrowedTerms borrowed;
  Arithmetic arithmetic = options.arithmetic;
  arithmetic.kv_storage = p.kv_dtype;
  const auto stored = [&](double natural) {
    const double abs_lse = std::max(std::fabs(enclosure.lse.lo), std::fabs(enclosure.lse.hi));
    return stored_lse_band(natural, abs_lse, format, arithmetic.compute);
  };
  const auto band = [&] {
    band_terms(p, row, enclosure, *borrowed.terms);
    return stored(tensor_row_tier_bands(*borrowed.terms, arithmetic, std::nullopt).lse);
  };
  double delta = handed ? stored(shared->lse_band) : band();
  const auto exact = [&] { return format.base2 ? in_base2(enclosure.lse_fine) : enclosure.lse_fine; };
  // Refined from the enclosure's own precision on (a handed one may already be MPFI at many bits).
  for (int bits = enclosure.fast ? 64 : 2 * enclosure.bits; !(2 * exact().radius <= delta / 1000) && bits <= 1024;
       bits *= 2) {
    enclosure = enclose_row(p, row, bits);
    delta = band();
  }
  const FineEnclosure e = exact();
  outcome.capped = !(2 * e.radius <= delta / 1000);
  outcome.fast = enclosure.fast;
  outcome.certified = true;
  if (!std::isfinite(delta)) ++outcome.unbounded;
  detail::judge(outcome, {r.b, r.h, r.i, 0}, got, e, delta, delta, delta, delta, format.storage);
}

// Every row of p: the cheap checks, the rows flagged in `certify` against the oracle, and with
// `lse_outcomes` every row's LSE (a certified row's enclosure handed on from the output's).
void certify_rows(const TensorProblem& p, std::span<const double> output, const std::vector<char>& certify,
                  const RowBands& bands, const CertifyOptions& options, double lambda,
                  std::vector<RowOutcome>& outcomes, std::span<const double> lse, const LseFormat* format,
                  std::vector<RowOutcome>* lse_outcomes) {
  parallel_for(certify.size(), options.threads, [&](std::size_t row) {
    const bool empty = !row_has_keys(p, row);
    cheap_checks(p, output, row, empty, outcomes[row]);
    SharedRow shared;
    if (certify[row] && !empty)
      certify_row(p, output, row, bands, options, lambda, outcomes[row], lse_outcomes ? &shared : nullptr);
    if (lse_outcomes) certify_lse_row(p, lse, row, certify[row] != 0, options, *format, (*lse_outcomes)[row], &shared);
  });
}

}  // namespace

TensorReport certify_lse(const TensorProblem& p, std::span<const double> lse, const CertifyOptions& options,
                         const LseFormat& format) {
  if (auto ok = validate(p); !ok) throw ContractError("certify_lse: " + ok.error().message);
  if (const std::string error = structure_error(options.arithmetic.structure); !error.empty())
    throw ContractError("certify_lse: " + error);
  if (const std::string error = sinks_error(p, options.arithmetic.structure); !error.empty())
    throw ContractError("certify_lse: " + error);
  const std::size_t total = p.batch * p.q_heads * p.L;
  if (lse.size() != total) throw ContractError("certify_lse: LSE size is not B·Hq·L");
  if (!(options.alpha > 0 && options.alpha < 1)) throw ContractError("certify_lse: alpha must be in (0, 1)");
  std::vector<char> certify(total, 0);
  for (std::size_t row : sample_rows(p, options.rows, options.seed)) certify[row] = 1;
  std::vector<RowOutcome> outcomes(total);
  parallel_for(total, options.threads, [&](std::size_t row) {
    certify_lse_row(p, lse, row, certify[row] != 0, options, format, outcomes[row]);
  });
  TensorReport report = report_of(outcomes, certify, options, statistical_lambda(options.alpha, total),
                                  lse_heatmap(p));
  report.plain = false;
  return report;
}

std::pair<TensorReport, TensorReport> certify_tensor_and_lse(const TensorProblem& p, std::span<const double> output,
                                                             std::span<const double> lse,
                                                             const CertifyOptions& options, const LseFormat& format) {
  if (auto ok = validate(p); !ok) throw ContractError("certify_tensor_and_lse: " + ok.error().message);
  const std::size_t total = p.batch * p.q_heads * p.L;
  if (output.size() != total * p.Ev) throw ContractError("certify_tensor_and_lse: output size is not B·Hq·L·Ev");
  if (lse.size() != total) throw ContractError("certify_tensor_and_lse: LSE size is not B·Hq·L");
  if (const std::string error = structure_error(options.arithmetic.structure); !error.empty())
    throw ContractError("certify_tensor_and_lse: " + error);
  if (const std::string error = sinks_error(p, options.arithmetic.structure); !error.empty())
    throw ContractError("certify_tensor_and_lse: " + error);
  if (!(options.alpha > 0 && options.alpha < 1))
    throw ContractError("certify_tensor_and_lse: alpha must be in (0, 1)");
  const RowBands bands = standard_bands(p, options.arithmetic);
  const double lambda = statistical_lambda(options.alpha, total * p.Ev);
  std::vector<char> certify(total, 0);
  for (std::size_t row : sample_rows(p, options.rows, options.seed)) certify[row] = 1;
  std::vector<RowOutcome> outcomes(total), lse_outcomes(total);
  certify_rows(p, output, certify, bands, options, lambda, outcomes, lse, &format, &lse_outcomes);
  std::pair<TensorReport, TensorReport> reports{report_of(outcomes, certify, options, lambda, output_heatmap(p)),
                                                report_of(lse_outcomes, certify, options,
                                                          statistical_lambda(options.alpha, total), lse_heatmap(p))};
  reports.second.plain = false;
  if (!reports.first.passed && options.diagnose) diagnose(p, output, options, reports.first);
  return reports;
}

TensorProblem group_problem(const TensorProblem& w, std::size_t b, std::size_t kv) {
  const std::size_t G = w.q_heads / w.kv_heads;
  TensorProblem g;
  g.batch = 1, g.q_heads = G, g.kv_heads = 1;
  g.L = w.L, g.S = w.S, g.E = w.E, g.Ev = w.Ev;
  g.dtype = w.dtype, g.kv_dtype = w.kv_dtype, g.layout = w.layout, g.scale = w.scale;
  g.causal = w.causal, g.window_left = w.window_left, g.window_right = w.window_right, g.softcap = w.softcap;
  if (!w.key_lengths.empty()) g.key_lengths = {w.key_lengths[b]};
  const auto heads_of = [&](const std::vector<double>& per_head, std::size_t base) {
    const auto first = per_head.begin() + static_cast<std::ptrdiff_t>(base + kv * G);
    return std::vector<double>(first, first + static_cast<std::ptrdiff_t>(G));
  };
  if (!w.alibi_slopes.empty()) g.alibi_slopes = heads_of(w.alibi_slopes, w.alibi_slopes.size() == w.q_heads ? 0 : b * w.q_heads);
  if (!w.sinks.empty()) g.sinks = heads_of(w.sinks, 0);
  g.mask_kind = w.mask_kind;
  if (w.mask_kind != TensorMask::none) {
    std::array<std::size_t, 4> dims{1, 1, 1, 1};  // the mask's shape padded to rank 4
    std::copy(w.mask_shape.begin(), w.mask_shape.end(), dims.end() - static_cast<std::ptrdiff_t>(w.mask_shape.size()));
    const std::size_t heads = dims[1] == 1 ? 1 : G;
    g.mask_shape = {1, heads, dims[2], dims[3]};
    g.mask.reserve(heads * dims[2] * dims[3]);
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < dims[2]; ++i)
        for (std::size_t j = 0; j < dims[3]; ++j) g.mask.push_back(w.mask[mask_offset(w, b, kv * G + h, i, j)]);
  }
  return g;
}

std::pair<TensorReport, std::optional<TensorReport>> certify_in_groups(const TensorProblem& whole,
                                                                       const GroupReader& read,
                                                                       const CertifyOptions& options,
                                                                       std::optional<std::span<const double>> lse,
                                                                       const LseFormat& format) {
  const std::string what = "certify_in_groups: ";
  if (auto ok = validate_without_values(whole); !ok) throw ContractError(what + ok.error().message);
  if (const std::string error = structure_error(options.arithmetic.structure); lse && !error.empty())
    throw ContractError(what + error);
  if (const std::string error = sinks_error(whole, options.arithmetic.structure); !error.empty())
    throw ContractError(what + error);
  if (!(options.alpha > 0 && options.alpha < 1)) throw ContractError(what + "alpha must be in (0, 1)");
  const std::size_t total = whole.batch * whole.q_heads * whole.L;
  if (lse && lse->size() != total) throw ContractError(what + "LSE size is not B·Hq·L");
  const double lambda = statistical_lambda(options.alpha, total * whole.Ev);
  std::vector<char> certify(total, 0);
  for (std::size_t row : sample_rows(whole, options.rows, options.seed)) certify[row] = 1;
  const std::size_t G = whole.q_heads / whole.kv_heads, group_rows = G * whole.L;
  // The outcomes that add to the reports (certified rows, rows with a failure), in row order.
  std::vector<RowOutcome> kept, kept_lse;
  std::vector<char> kept_certify;
  std::vector<double> output;
  for (std::size_t b = 0; b < whole.batch; ++b) {
    for (std::size_t kv = 0; kv < whole.kv_heads; ++kv) {
      const std::size_t first = (b * whole.q_heads + kv * G) * whole.L;  // the group's rows are contiguous
      const auto from = certify.begin() + static_cast<std::ptrdiff_t>(first);
      const std::vector<char> flags(from, from + static_cast<std::ptrdiff_t>(group_rows));
      const bool inputs = std::find(flags.begin(), flags.end(), 1) != flags.end();
      TensorProblem group = group_problem(whole, b, kv);
      read(b, kv, inputs, group, output);
      if (output.size() != group_rows * whole.Ev) throw ContractError(what + "a group's output is not G·L·Ev");
      if (auto ok = inputs ? validate(group) : validate_without_values(group); !ok)
        throw ContractError(what + ok.error().message);
      std::vector<RowOutcome> outcomes(group_rows), lse_outcomes(lse ? group_rows : 0);
      certify_rows(group, output, flags, standard_bands(group, options.arithmetic), options, lambda, outcomes,
                   lse ? lse->subspan(first, group_rows) : std::span<const double>{}, &format,
                   lse ? &lse_outcomes : nullptr);
      for (std::size_t r = 0; r < group_rows; ++r) {
        if (!flags[r] && outcomes[r].failures.empty() && (!lse || lse_outcomes[r].failures.empty())) continue;
        const auto in_whole = [&](RowOutcome& o) {  // the failures' indices and the head in the whole problem
          for (TensorFailure& f : o.failures) f.index[0] = b, f.index[1] += kv * G;
          o.head += kv * G;
        };
        in_whole(outcomes[r]);
        if (lse) in_whole(lse_outcomes[r]);
        kept.push_back(std::move(outcomes[r]));
        if (lse) kept_lse.push_back(std::move(lse_outcomes[r]));
        kept_certify.push_back(flags[r]);
      }
    }
  }
  std::pair<TensorReport, std::optional<TensorReport>> reports{
      report_of(kept, kept_certify, options, lambda, output_heatmap(whole)), std::nullopt};
  reports.first.rows_total = total;
  if (lse) {
    reports.second = report_of(kept_lse, kept_certify, options, statistical_lambda(options.alpha, total),
                               lse_heatmap(whole));
    reports.second->rows_total = total;
    reports.second->plain = false;
  }
  if (!reports.first.passed && options.diagnose) {
    diagnose_with(whole.dtype, options, reports.first, [&](const CertifyOptions& other) {
      return certify_in_groups(whole, read, other).first.passed;
    });
  }
  return reports;
}

std::string TensorReport::summary() const {
  std::string out = passed ? "passed" : "FAILED: " + std::to_string(failure_count) + " element(s)";
  if (!failures.empty()) {
    const TensorFailure& f = failures.front();
    out += "; worst (" + std::to_string(f.index[0]) + ", " + std::to_string(f.index[1]) + ", " +
           std::to_string(f.index[2]) + ", " + std::to_string(f.index[3]) + "): " + f.reason + ", got " +
           number(f.got) + ", exact in [" + number(f.exact.lo) + ", " + number(f.exact.hi) + "], band " +
           number(f.band) + ", " + number(f.ulps) + " ulps";
  }
  out += std::string("; decided by the ") + (tier == Tier::certified ? "certified" : "statistical") + " tier";
  out += "; band usage max " + number(max_band_usage) + ", mean " + number(mean_band_usage);
  const auto tier_text = [](const std::string& name, const TierVerdict& v) {
    return std::string("; ") + name + (v.passed ? " passed" : " FAILED (" + std::to_string(v.failure_count) + ")") +
           ", usage max " + number(v.max_band_usage);
  };
  out += tier_text("certified", certified);
  out += tier_text("statistical (alpha " + number(alpha) + ", lambda " + number(lambda) + ")", statistical);
  out += "; " + std::to_string(rows_checked) + " of " + std::to_string(rows_total) + " rows certified (" +
         std::to_string(elements_certified) + " elements), every element checked finite and masked rows zero";
  if (capped_rows) out += "; " + std::to_string(capped_rows) + " row(s) at the precision cap";
  if (unbounded_elements)
    out += "; " + std::to_string(unbounded_elements) +
           " element(s) with no finite band (the declared arithmetic has no finite worst case at this length: "
           "passed vacuously)";
  if (ieee_elements)
    out += "; " + std::to_string(ieee_elements) + " element(s) NaN or infinite by IEEE semantics (NaN or inf inputs reach them)";
  if (unmodelled_rows)
    out += "; " + std::to_string(unmodelled_rows) + " row(s) checked finite only (an infinite score drops some of "
           "their keys, or softcap caps one: not certified)";
  if (diagnosed) {
    out += "; consistent with: ";
    if (consistent_with.empty()) out += "no other standard profile of the dtype";
    for (std::size_t n = 0; n < consistent_with.size(); ++n) out += (n ? ", " : "") + consistent_with[n];
  }
  if (plain)
    out += "; error vs plain same-precision max " + number(max_plain_ratio) + ", mean " + number(mean_plain_ratio);
  return out;
}

}  // namespace attn::verify
