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
#include <vector>

#include "numeric/interval.hpp"
#include "tensor/tensor.hpp"
#include "tensor/tensor_band.hpp"
#include "tensor/tensor_oracle.hpp"

namespace attn::verify {

/// One output element that fails.
struct TensorFailure {
  std::array<std::size_t, 4> index{};  ///< (b, h, i, c)
  double got = 0;
  Interval exact;      ///< the oracle's enclosure ([0, 0] in a fully masked row)
  double band = 0;     ///< δ (0 in a fully masked row: it must be exactly zero)
  double ulps = 0;     ///< |got - exact| in ulps of the storage format at |exact|
  double usage = 0;    ///< |got - exact| / δ (+inf for NaN, Inf and masked-row failures)
  std::string reason;  ///< "outside band", "NaN", "Inf", "masked row not zero", "NaN in a fully masked row"
};

/// The verdict on one output tensor.
struct TensorReport {
  bool passed = true;
  std::vector<TensorFailure> failures;       ///< worst first (usage, then index), at most max_failures kept
  std::size_t failure_count = 0;             ///< all failures, kept or not
  double max_band_usage = 0;                 ///< |got - exact| / δ over certified elements (distance to the
  double mean_band_usage = 0;                ///< enclosure, so exact up to its width, <= δ/1000)
  std::vector<std::size_t> usage_histogram;  ///< 0, decades [1e-12, 1e-11) .. [0.1, 1], then > 1
  std::size_t rows_checked = 0;              ///< rows certified against the oracle
  std::size_t rows_total = 0;                ///< B·Hq·L
  std::size_t elements_certified = 0;        ///< finite elements of certified rows with keys
  std::size_t capped_rows = 0;               ///< rows whose enclosure stayed wider than δ/1000 at the cap
  std::size_t fast_rows = 0;                 ///< certified rows decided by the fast double pass alone (no MPFI)
  double max_plain_ratio = 0;                ///< |got - exact| / max(|plain - exact|, half an ulp): non-deciding
  double mean_plain_ratio = 0;
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
};

/// δ for each output column of one row, from its enclosure.
using RowBands = std::function<std::vector<double>(std::size_t row, const RowEnclosure& enclosure)>;

/// The quantities the band needs, from a row's enclosure (each rounded in the safe direction).
[[nodiscard]] RowTerms band_terms(const TensorProblem& problem, std::size_t row, const RowEnclosure& enclosure);

/// The rows certified: all of them, or `rows` of them drawn with `seed` (at least: the first, the
/// last and every row in which no key takes part; more than `rows` when those alone are more).
[[nodiscard]] std::vector<std::size_t> sample_rows(const TensorProblem& problem, std::optional<std::size_t> rows,
                                                   std::uint64_t seed);

/// Certifies `output` ([B, Hq, L, Ev] in problem.layout) with the bands of options.arithmetic.
/// Results do not depend on options.threads. Throws ContractError when validate(problem) fails or
/// output.size() != B·Hq·L·Ev (the caller validates input first).
[[nodiscard]] TensorReport certify_tensor(const TensorProblem& problem, std::span<const double> output,
                                          const CertifyOptions& options);

/// As above with bands from `bands` instead of options.arithmetic (tests, other band models).
[[nodiscard]] TensorReport certify_tensor(const TensorProblem& problem, std::span<const double> output,
                                          const CertifyOptions& options, const RowBands& bands);

}  // namespace attn::verify
