// Certification of a kernel's output tensor: every sampled row against the oracle's enclosures
// (tensor_oracle.hpp) and the error band δ of a named arithmetic (tensor_band.hpp); cheap checks
// (finite, fully masked rows exactly zero) over every element.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "numeric/interval.hpp"
#include "tensor/tensor.hpp"
#include "tensor/tensor_band.hpp"
#include "tensor/tensor_heatmap.hpp"
#include "tensor/tensor_oracle.hpp"

namespace attn::verify {

/// One output element that fails.
struct TensorFailure {
  std::array<std::size_t, 4> index{};  ///< (b, h, i, c)
  double got = 0;
  Interval exact;      ///< the oracle's enclosure ([0, 0] in a fully masked row)
  double band = 0;     ///< δ of the deciding tier (0 in a fully masked row: it must be exactly zero)
  double certified_band = 0, statistical_band = 0;  ///< both tiers' δ
  double ulps = 0;     ///< |got - exact| in ulps of the storage format at |exact|
  double usage = 0;    ///< |got - exact| / δ (+inf for NaN, Inf and masked-row failures)
  std::string reason;  ///< "outside band", "NaN", "Inf", "masked row not zero", "NaN in a fully masked row"
};

/// Which band decides `passed`: the certified one (a failure proves a bug for the declared
/// arithmetic) or the statistical one (a failure is evidence at false-alarm probability alpha).
enum class Tier { certified, statistical };

/// One tier's verdict.
struct TierVerdict {
  bool passed = true;
  std::size_t failure_count = 0;  ///< elements outside this tier's band (plus the cheap-check failures)
  double max_band_usage = 0, mean_band_usage = 0;
};

/// The verdict on one output tensor.
struct TensorReport {
  bool passed = true;                        ///< the deciding tier's verdict
  Tier tier = Tier::certified;               ///< the deciding tier
  TierVerdict certified, statistical;        ///< both tiers
  double alpha = 0, lambda = 0;              ///< the statistical tier's false-alarm probability and its λ
  /// On a failure (with CertifyOptions::diagnose): the standard profiles of the inputs' dtype
  /// (profiles_for) under which the same output passes the deciding tier, e.g. {"bf16-math"}.
  std::vector<std::string> consistent_with;
  bool diagnosed = false;                    ///< whether consistent_with was computed
  std::vector<TensorFailure> failures;       ///< the deciding tier's, worst first (usage, then index), at most max_failures kept
  std::size_t failure_count = 0;             ///< all failures of the deciding tier, kept or not
  double max_band_usage = 0;                 ///< |got - exact| / δ over certified elements (distance to the
  double mean_band_usage = 0;                ///< enclosure, so exact up to its width, <= δ/1000)
  std::vector<std::size_t> usage_histogram;  ///< 0, decades [1e-12, 1e-11) .. [0.1, 1], then > 1
  std::size_t rows_checked = 0;              ///< rows certified against the oracle
  std::size_t rows_total = 0;                ///< B·Hq·L
  std::size_t elements_certified = 0;        ///< finite elements of certified rows with keys
  std::size_t capped_rows = 0;               ///< rows whose enclosure stayed wider than δ/1000 at the cap
  /// Elements whose certified band is infinite: the declared arithmetic has no finite worst case at
  /// this length (an fp16 accumulator over about 340 keys and more, say); they pass vacuously.
  std::size_t unbounded_elements = 0;
  std::size_t fast_rows = 0;                 ///< certified rows decided by the fast double pass alone (no MPFI)
  /// NaN or ±inf in the inputs (tensor_ieee.hpp): elements whose IEEE value is NaN or ±inf, judged
  /// by that class; rows judged only finite (an infinite score drops some keys, or softcap caps one).
  std::size_t ieee_elements = 0, unmodelled_rows = 0;
  double max_plain_ratio = 0;                ///< |got - exact| / max(|plain - exact|, half an ulp): non-deciding
  double mean_plain_ratio = 0;
  bool plain = true;                         ///< whether the plain ratios were computed (not for an LSE)
  /// Where the usage sits: per query head, max-pooled over batch items, over (query, output column);
  /// an LSE's over (query, one column). Empty (no heads) for the gradients' reports.
  UsageHeatmap heatmap;
  /// A short human summary: verdict, worst element, usage, coverage.
  [[nodiscard]] std::string summary() const;
};

/// What to certify and how.
struct CertifyOptions {
  Arithmetic arithmetic;            ///< the band's arithmetic; its compute format for the plain row
  std::optional<std::size_t> rows;  ///< certify a seeded sample of this many rows (nullopt: all)
  std::uint64_t seed = 0;           ///< of the sample
  unsigned threads = 0;             ///< 0: std::thread::hardware_concurrency()
  std::size_t max_failures = 100;   ///< failures kept in the report
  Tier tier = Tier::certified;      ///< the tier that decides `passed`
  double alpha = 1e-9;              ///< the statistical tier's false-alarm probability for the whole report
  bool diagnose = true;             ///< on a failure, certify again under every standard profile of the dtype
  std::string profile;              ///< the profile options.arithmetic came from, if any (not re-certified)
};

/// Both tiers' δ for each output column of one row, from its enclosure and the statistical λ (an
/// empty `statistical` means the same as `certified`).
using RowBands = std::function<TierBands(std::size_t row, const RowEnclosure& enclosure, double lambda)>;

/// Why sinks cannot be certified under the declared structure ("" when they can, or without sinks).
[[nodiscard]] std::string sinks_error(const TensorProblem& problem, const KernelStructure& structure);

/// The quantities the band needs, from a row's enclosure (each rounded in the safe direction).
[[nodiscard]] RowTerms band_terms(const TensorProblem& problem, std::size_t row, const RowEnclosure& enclosure);
/// The same into `terms`, reusing its vectors' capacity.
void band_terms(const TensorProblem& problem, std::size_t row, const RowEnclosure& enclosure, RowTerms& terms);

/// The rows certified: all of them, or `rows` of them drawn with `seed` (at least: the first, the
/// last and every row in which no key takes part; more than `rows` when those alone are more).
[[nodiscard]] std::vector<std::size_t> sample_rows(const TensorProblem& problem, std::optional<std::size_t> rows,
                                                   std::uint64_t seed);

/// Certifies `output` ([B, Hq, L, Ev] in problem.layout) with the bands of options.arithmetic, its
/// kv_storage taken from problem.kv_dtype.
/// Results do not depend on options.threads. Throws ContractError when validate(problem, Admit::ieee)
/// fails or output.size() != B·Hq·L·Ev (the caller validates input first). NaN and ±inf in query,
/// key and value are judged by IEEE semantics (tensor_ieee.hpp: a NaN that reaches an element must
/// be there, one from a key that takes no part must not); an empty problem (B, L or S zero) has no
/// output, or rows without keys (zeros).
[[nodiscard]] TensorReport certify_tensor(const TensorProblem& problem, std::span<const double> output,
                                          const CertifyOptions& options);

/// Certifies a kernel's log-sum-exp `lse` ([B, Hq, L], row (b, h, i) at (b·Hq + h)·L + i, failures
/// indexed (b, h, i, 0)) against the exact log Σ_j e^{s_j} of each row, within stored_lse_band of
/// options.arithmetic (its kv_storage taken from problem.kv_dtype; Step L of tensor_band.cpp). Rows
/// without keys must hold exactly -inf (+inf with format.masked_plus_inf). Sampling, seeds and
/// failures as certify_tensor; both tiers use the one LSE band. Throws ContractError as
/// certify_tensor does, and when lse.size() != B·Hq·L.
[[nodiscard]] TensorReport certify_lse(const TensorProblem& problem, std::span<const double> lse,
                                       const CertifyOptions& options, const LseFormat& format = {});

/// certify_tensor (standard bands) and certify_lse in one pass over the rows: each certified row is
/// enclosed once and its LSE band comes with the output's. The verdicts and failures are the two
/// calls', the usages equal up to the enclosures' widths (each below δ/1000): the LSE starts from the
/// output's enclosure, so its report's fast_rows and capped_rows may differ from certify_lse's.
[[nodiscard]] std::pair<TensorReport, TensorReport> certify_tensor_and_lse(const TensorProblem& problem,
                                                                           std::span<const double> output,
                                                                           std::span<const double> lse,
                                                                           const CertifyOptions& options,
                                                                           const LseFormat& format = {});

/// Fills report.consistent_with: certifies `output` again under each standard profile of the
/// problem's dtype other than options.arithmetic (certify_tensor with standard bands calls it on a
/// failure when options.diagnose).
void diagnose(const TensorProblem& problem, std::span<const double> output, const CertifyOptions& options,
              TensorReport& report);

/// As above with bands from `bands` instead of options.arithmetic (tests, other band models).
[[nodiscard]] TensorReport certify_tensor(const TensorProblem& problem, std::span<const double> output,
                                          const CertifyOptions& options, const RowBands& bands);

/// The problem of one (batch item b, kv head kv) group of `whole`: B = 1, Hkv = 1, the group's G
/// query heads (kv·G .. kv·G + G - 1), all L queries and S keys, the mask, key length, ALiBi slopes and
/// sinks of those heads and that item (L and S unchanged, so the causal rule and the window align as in
/// the whole), without query, key or value values. Its row r is the whole's row (b·Hq + kv·G)·L + r.
[[nodiscard]] TensorProblem group_problem(const TensorProblem& whole, std::size_t b, std::size_t kv);

/// Fills the query, key and value of group (b, kv) of the whole problem into `group`
/// (group_problem's; only when `inputs`: a group with no certified row needs none) and the group's
/// output ([1, G, L, Ev]) into `output`.
using GroupReader = std::function<void(std::size_t b, std::size_t kv, bool inputs, TensorProblem& group,
                                       std::vector<double>& output)>;

/// certify_tensor (standard bands), or certify_tensor_and_lse when `lse` is given ([B, Hq, L]), of a
/// problem read one (batch item, kv head) group at a time: `whole` holds everything but the values of
/// query, key and value (validate_without_values; the caller checks those values). The rows are
/// sample_rows(whole, options.rows, options.seed); each group's are certified on group_problem with
/// the whole's statistical λ, and the reports merged in row order with indices in the whole: the
/// same reports (and diagnosis) as certify_tensor and certify_tensor_and_lse of the whole problem,
/// holding one group's values at a time. Throws ContractError as they do.
[[nodiscard]] std::pair<TensorReport, std::optional<TensorReport>> certify_in_groups(
    const TensorProblem& whole, const GroupReader& read, const CertifyOptions& options,
    std::optional<std::span<const double>> lse = std::nullopt, const LseFormat& format = {});

}  // namespace attn::verify
