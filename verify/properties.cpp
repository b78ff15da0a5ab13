#include "properties.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <rapidcheck/detail/Configuration.h>

#include "checker.hpp"
#include "transforms.hpp"

namespace attn::verify {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) RC_FAIL(message);
}

std::string cell_name(std::size_t row, std::size_t col) {
  return "output[" + std::to_string(row) + "][" + std::to_string(col) + "]";
}

// Runs the implementation and checks the shape of what it returned.
Solution run_checked(const Implementation& implementation, const Instance& instance) {
  Solution solution = implementation.run(instance);
  require(solution.values.size() == instance.batch.size() * instance.n * instance.d_v,
          "run() returned " + std::to_string(solution.values.size()) + " values");
  if (implementation.provides_weights()) {
    require(solution.weights.size() == instance.batch.size() * instance.heads * instance.n * instance.m,
            "run() returned " + std::to_string(solution.weights.size()) + " weights");
  }
  return solution;
}

// A random permutation of 0..size-1 (Fisher-Yates with RapidCheck's draws, so it shrinks).
std::vector<std::size_t> draw_permutation(std::size_t size) {
  std::vector<std::size_t> order(size);
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t i = size; i > 1; --i) std::swap(order[i - 1], order[*rc::gen::inRange<std::size_t>(0, i)]);
  return order;
}

bool within(double x, const Interval& exact, double band) { return x >= exact.lo - band && x <= exact.hi + band; }

std::size_t visible_count(const Instance& instance, std::size_t b, std::size_t i) {
  std::size_t count = 0;
  for (std::size_t j = 0; j < instance.m; ++j) count += instance.visible(b, i, j) ? 1 : 0;
  return count;
}

// Two runs whose exact answers are equal: each within its own band of the other.
void require_close(const Solution& a, const Certificate& a_bands, const Solution& b, const Certificate& b_bands,
                   const std::string& what) {
  for (std::size_t k = 0; k < a.values.size(); ++k) {
    const double allowed = a_bands.cells[k].band + b_bands.cells[k].band;
    require(std::abs(a.values[k] - b.values[k]) <= allowed,
            what + ": " + cell_name(k / a.cols, k % a.cols) + " differs by " + std::to_string(a.values[k] - b.values[k]));
  }
}

void require_identical(const Solution& a, const Solution& b, const std::string& what) {
  for (std::size_t k = 0; k < a.values.size(); ++k) {
    require(a.values[k] == b.values[k], what + ": " + cell_name(k / a.cols, k % a.cols) + " is not bit for bit equal");
  }
}

// --- The properties --------------------------------------------------------------------------

// Weights are >= 0, 0 where masked, and each softmax row sums to 1 within c·(k + 2 + 2·range)·u:
// Blanchard, Higham & Higham (2021), "Accurately computing the log-sum-exp and softmax functions",
// bound the shifted softmax's relative error per weight by about (k + 2 + 2·range)·u to first
// order, k = visible keys, range = largest minus smallest scaled score. c = 2 covers the
// second-order terms and a 1-ulp exp (u more per term); summing the k weights adds k·u, inside it.
void weights_sum_to_one(const Implementation& implementation, const Instance& instance) {
  if (!implementation.provides_weights()) return;
  const Solution solution = run_checked(implementation, instance);
  const std::size_t h = instance.heads, head_k = instance.d_k / h;
  const double divisor = instance.scale_divisor();
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t g = 0; g < h; ++g) {
      for (std::size_t i = 0; i < instance.n; ++i) {
        const double* w = &solution.weights[((b * h + g) * instance.n + i) * instance.m];
        long double sum = 0, lowest = INFINITY, highest = -INFINITY;
        std::size_t k = 0;
        for (std::size_t j = 0; j < instance.m; ++j) {
          if (!instance.visible(b, i, j)) {
            require(w[j] == 0.0, "weight of masked key " + std::to_string(j) + " in row " + std::to_string(i) + " is not 0");
            continue;
          }
          require(w[j] >= 0.0, "negative weight in row " + std::to_string(i));
          long double dot = 0;
          for (std::size_t c = 0; c < head_k; ++c) {
            dot += static_cast<long double>(instance.batch[b].Q.at(i, g * head_k + c)) * instance.batch[b].K.at(j, g * head_k + c);
          }
          lowest = std::min(lowest, dot / divisor);
          highest = std::max(highest, dot / divisor);
          sum += w[j];
          ++k;
        }
        if (k == 0) continue;
        const double range = static_cast<double>(highest - lowest);
        const double bound = 2.0 * (static_cast<double>(k) + 2.0 + 2.0 * range) * 0x1p-53;
        require(std::abs(static_cast<double>(sum) - 1.0) <= bound,
                "weights of row " + std::to_string(i) + " head " + std::to_string(g) + " sum to 1 + " +
                    std::to_string(static_cast<double>(sum) - 1.0));
      }
    }
  }
}

// A row with no visible key is exactly +0.0 (not -0.0, not NaN), weights 0, for any heads.
void all_masked_row_is_zero(const Implementation& implementation, const Instance& original) {
  Instance instance = with_explicit_mask(original);
  const std::size_t row = *rc::gen::inRange<std::size_t>(0, instance.n);
  std::fill_n(instance.batch[0].mask.begin() + static_cast<std::ptrdiff_t>(row * instance.m), instance.m, 0);
  const Solution solution = run_checked(implementation, instance);
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t i = 0; i < instance.n; ++i) {
      if (visible_count(instance, b, i) != 0) continue;
      for (std::size_t c = 0; c < instance.d_v; ++c) {
        const double x = solution.values[(b * instance.n + i) * instance.d_v + c];
        require(x == 0.0 && !std::signbit(x), "all-masked " + cell_name(b * instance.n + i, c) + " is not +0.0");
      }
      if (!implementation.provides_weights()) continue;
      for (std::size_t g = 0; g < instance.heads; ++g) {
        for (std::size_t j = 0; j < instance.m; ++j) {
          require(solution.weights[((b * instance.heads + g) * instance.n + i) * instance.m + j] == 0.0,
                  "all-masked row " + std::to_string(i) + " has a nonzero weight");
        }
      }
    }
  }
}

// Head g's output block is single-head attention on head g's column slice (scale √hd), and
// permuting the head blocks of Q, K, V permutes the output blocks the same way.
void head_concat_order(const Implementation& implementation, const Instance& instance) {
  const Solution full = run_checked(implementation, instance);
  const Certificate full_bands = certify(instance);
  const std::size_t h = instance.heads, head_v = instance.d_v / h;
  for (std::size_t g = 0; g < h; ++g) {
    const Instance slice = head_slice(instance, g);
    const Solution alone = run_checked(implementation, slice);
    const Certificate alone_bands = certify(slice);
    for (std::size_t r = 0; r < full.rows; ++r) {
      for (std::size_t c = 0; c < head_v; ++c) {
        const std::size_t k = r * instance.d_v + g * head_v + c;
        require(std::abs(full.values[k] - alone.values[r * head_v + c]) <= full_bands.cells[k].band + alone_bands.cells[r * head_v + c].band,
                "head " + std::to_string(g) + " block of " + cell_name(r, g * head_v + c) + " differs from head " +
                    std::to_string(g) + " alone");
      }
    }
  }
  const std::vector<std::size_t> order = draw_permutation(h);
  const Solution permuted = run_checked(implementation, permute_heads(instance, order));
  for (std::size_t r = 0; r < full.rows; ++r) {
    for (std::size_t g = 0; g < h; ++g) {
      for (std::size_t c = 0; c < head_v; ++c) {
        const std::size_t from = r * instance.d_v + order[g] * head_v + c, to = r * instance.d_v + g * head_v + c;
        require(std::abs(permuted.values[to] - full.values[from]) <= 2 * full_bands.cells[from].band,
                "permuting heads did not permute " + cell_name(r, g * head_v + c));
      }
    }
  }
}

// Every output within δ of the exact value, weights too, and the printed text is the canonical
// answer or, in ambiguous cells, the other neighbour.
void agrees_with_oracle_within_band(const Implementation& implementation, const Instance& instance) {
  const Solution solution = run_checked(implementation, instance);
  const Certificate certificate = certify(instance);
  for (std::size_t k = 0; k < solution.values.size(); ++k) {
    const CellCertificate& cell = certificate.cells[k];
    require(within(solution.values[k], cell.value, cell.band),
            cell_name(k / solution.cols, k % solution.cols) + " = " + std::to_string(solution.values[k]) +
                " is outside the exact value ± " + std::to_string(cell.band));
  }
  if (implementation.provides_weights()) {
    for (std::size_t k = 0; k < solution.weights.size(); ++k) {
      require(within(solution.weights[k], certificate.weights[k].value, certificate.weights[k].band),
              "weight " + std::to_string(k) + " is outside the exact weight ± its band");
    }
  }
  const Verdict verdict = check_output(certificate, implementation.format(instance, solution));
  require(verdict.kind == VerdictKind::ok || verdict.kind == VerdictKind::acceptable,
          std::string(verdict_name(verdict.kind)) + ": " + verdict.message);
}

// Scores near ±limit²·d/scale (AI006: ±4e6) or at a limit widened to 1e6 stay finite and within δ.
void overflow_safe_at_huge_scores(const Implementation& implementation, const Instance& original) {
  Instance instance = original;
  // |q|, |k| at the limit or one below it: scores near the extreme, with gaps of limit·d/scale.
  const long long limit = *rc::gen::element<long long>(instance.problem == Problem::ai031 ? 8 : 1000, 1000000);
  for (BatchItem& item : instance.batch) {
    for (Matrix* matrix : {&item.Q, &item.K}) {
      for (std::size_t k = 0; k < matrix->values.size(); ++k) {
        const long long magnitude = k % 3 == 1 ? limit - 1 : limit;
        set_text(*matrix, k, std::to_string(std::signbit(matrix->values[k]) ? -magnitude : magnitude));
      }
    }
    if (instance.self_form) item.V = item.Q;
  }
  const Solution solution = run_checked(implementation, instance);
  const Certificate certificate = certify(instance);
  for (std::size_t k = 0; k < solution.values.size(); ++k) {
    require(std::isfinite(solution.values[k]), cell_name(k / solution.cols, k % solution.cols) + " is not finite");
    require(within(solution.values[k], certificate.cells[k].value, certificate.cells[k].band),
            cell_name(k / solution.cols, k % solution.cols) + " is outside the exact value ± δ at huge scores");
  }
}

// softmax(s + c) = softmax(s): adding a per-row constant to every score changes nothing exact.
void shift_invariance(const Implementation& implementation, const Instance& original) {
  Instance base = as_general(original);
  if (base.scale == ScaleKind::sqrt_head_dim) base.scale = ScaleKind::none;  // the shift adds columns
  std::vector<std::string> shifts(base.n);
  for (auto& shift : shifts) shift = std::to_string(*rc::gen::inRange(-5, 6));
  const Instance shifted = shift_scores(base, shifts);
  require_close(run_checked(implementation, base), certify(base), run_checked(implementation, shifted), certify(shifted),
                "shifting the scores of each row");
}

// Reordering keys together with their values and mask columns changes nothing exact.
void key_permutation_invariance(const Implementation& implementation, const Instance& instance) {
  const std::vector<std::size_t> order = draw_permutation(instance.m);
  const Certificate bands = certify(instance);
  require_close(run_checked(implementation, instance), bands, run_checked(implementation, permute_keys(instance, order)),
                bands, "permuting keys and values");
}

// Keys masked for every query do not matter, bit for bit, whatever K and V hold there.
void masked_values_do_not_matter(const Implementation& implementation, const Instance& original) {
  Instance instance = with_explicit_mask(as_general(original));
  instance.self_form = false;
  const std::size_t key = *rc::gen::inRange<std::size_t>(0, instance.m);
  for (BatchItem& item : instance.batch) {
    for (std::size_t i = 0; i < instance.n; ++i) item.mask[i * instance.m + key] = 0;
  }
  const Solution before = run_checked(implementation, instance);
  for (BatchItem& item : instance.batch) {
    for (std::size_t c = 0; c < instance.d_k; ++c) set_text(item.K, key * instance.d_k + c, c % 2 ? "-1000" : "1000");
    for (std::size_t c = 0; c < instance.d_v; ++c) set_text(item.V, key * instance.d_v + c, c % 2 ? "1000" : "-999.999");
  }
  require_identical(before, run_checked(implementation, instance), "changing a masked key");
}

// A row that sees exactly one key outputs exactly that key's V row (weight exactly 1).
void single_visible_key_copies_v(const Implementation& implementation, const Instance& original) {
  Instance instance = with_explicit_mask(as_general(original));
  std::vector<std::size_t> chosen(instance.batch.size() * instance.n);
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t i = 0; i < instance.n; ++i) {
      chosen[b * instance.n + i] = *rc::gen::inRange<std::size_t>(0, instance.m);
      for (std::size_t j = 0; j < instance.m; ++j) instance.batch[b].mask[i * instance.m + j] = j == chosen[b * instance.n + i];
    }
  }
  const Solution solution = run_checked(implementation, instance);
  for (std::size_t r = 0; r < solution.rows; ++r) {
    const Matrix& V = instance.batch[r / instance.n].V;
    for (std::size_t c = 0; c < instance.d_v; ++c) {
      require(solution.values[r * instance.d_v + c] == V.at(chosen[r], c),
              cell_name(r, c) + " is not exactly V[" + std::to_string(chosen[r]) + "][" + std::to_string(c) + "]");
    }
  }
}

// Identical keys give identical scores: the output is the mean of the visible V rows.
void identical_keys_give_mean_of_visible_v(const Implementation& implementation, const Instance& original) {
  Instance instance = as_general(original);
  instance.self_form = false;
  for (BatchItem& item : instance.batch) {
    for (std::size_t j = 1; j < instance.m; ++j) {
      for (std::size_t c = 0; c < instance.d_k; ++c) set_text(item.K, j * instance.d_k + c, item.K.text_at(0, c));
    }
  }
  const Solution solution = run_checked(implementation, instance);
  const Certificate bands = certify(instance);
  for (std::size_t r = 0; r < solution.rows; ++r) {
    const std::size_t b = r / instance.n, i = r % instance.n;
    const std::size_t count = visible_count(instance, b, i);
    for (std::size_t c = 0; c < instance.d_v; ++c) {
      long double sum = 0;
      for (std::size_t j = 0; j < instance.m; ++j) sum += instance.visible(b, i, j) ? instance.batch[b].V.at(j, c) : 0.0L;
      const double mean = count ? static_cast<double>(sum / count) : 0.0;
      // The long double mean is off by at most m·2^-64·max|V|, far inside δ; 2δ leaves room for it.
      require(std::abs(solution.values[r * instance.d_v + c] - mean) <= 2 * bands.cells[r * instance.d_v + c].band,
              cell_name(r, c) + " is not the mean of the visible V");
    }
  }
}

// The causal mask is the explicit lower-triangular mask, bit for bit.
void causal_equals_lower_triangular_mask(const Implementation& implementation, const Instance& original) {
  Instance causal = as_general(original);
  causal.mask = MaskKind::causal;
  for (BatchItem& item : causal.batch) item.mask.clear();
  require_identical(run_checked(implementation, causal), run_checked(implementation, with_explicit_mask(causal)),
                    "causal versus lower-triangular mask");
}

// ai031 with h = 1 and a lower-triangular mask is ai006 (scale √d), bit for bit.
void single_head_equals_sqrt_d(const Implementation& implementation, const Instance& original) {
  RC_PRE(original.n == original.m && original.d_k == original.d_v);
  Instance ai006 = original;
  ai006.problem = Problem::ai006;
  ai006.heads = 1;
  ai006.mask = MaskKind::causal;
  ai006.scale = ScaleKind::sqrt_head_dim;
  ai006.decimals = 4;
  ai006.batch.resize(1);
  ai006.batch[0].mask.clear();
  Instance ai031 = with_explicit_mask(ai006);
  ai031.problem = Problem::ai031;
  ai031.decimals = 2;
  require_identical(run_checked(implementation, ai006), run_checked(implementation, ai031), "h = 1 ai031 versus ai006");
}

// Each output lies between the smallest and largest visible V of its column (within δ).
void output_within_visible_range(const Implementation& implementation, const Instance& instance) {
  const Solution solution = run_checked(implementation, instance);
  const Certificate bands = certify(instance);
  for (std::size_t r = 0; r < solution.rows; ++r) {
    const std::size_t b = r / instance.n, i = r % instance.n;
    for (std::size_t c = 0; c < instance.d_v; ++c) {
      double lowest = INFINITY, highest = -INFINITY;
      for (std::size_t j = 0; j < instance.m; ++j) {
        if (!instance.visible(b, i, j)) continue;
        lowest = std::min(lowest, instance.batch[b].V.at(j, c));
        highest = std::max(highest, instance.batch[b].V.at(j, c));
      }
      const double x = solution.values[r * instance.d_v + c];
      if (lowest > highest) continue;  // all masked: the row is zero (AllMaskedRowIsZero)
      const double band = bands.cells[r * instance.d_v + c].band;
      require(x >= lowest - band && x <= highest + band, cell_name(r, c) + " lies outside the visible values");
    }
  }
}

// V times 2^p gives the output times 2^p exactly: every operation on V is linear and a power of
// two scales a double without rounding, as long as nothing is subnormal. A weight below 2^-1022
// (scores 708 apart) makes w·v subnormal; that term's rounding error is at most 2^-1074, so
// outputs of magnitude >= 2^-900 are still compared bit for bit and smaller ones within m·2^-1070.
void power_of_two_scaling_of_v(const Implementation& implementation, const Instance& instance) {
  const int power = *rc::gen::element(-1, 1, 3);
  const Solution base = run_checked(implementation, as_general(instance));
  const Solution scaled = run_checked(implementation, scale_values(instance, power));
  for (std::size_t k = 0; k < base.values.size(); ++k) {
    const double expected = std::ldexp(base.values[k], power);
    const bool far_from_underflow = std::abs(base.values[k]) >= 0x1p-900;
    const double slack = far_from_underflow ? 0.0 : static_cast<double>(instance.m + 1) * 0x1p-1070;
    require(std::abs(scaled.values[k] - expected) <= slack,
            cell_name(k / base.cols, k % base.cols) + " did not scale exactly by 2^" + std::to_string(power));
  }
}

// The printed value is the double correctly rounded to k decimals, checked against glibc's printf
// (an independent exact conversion), with "-0.00" normalized; no exponent, no "nan".
void format_is_correct_rounding(const Implementation& implementation, const Instance& original) {
  // Tiny values on both sides of zero make "-0.00" likely: V times 2^-20 keeps every digit exact.
  const Instance instance = *rc::gen::arbitrary<bool>() ? scale_values(original, -20) : original;
  const Solution solution = run_checked(implementation, instance);
  const std::string text = implementation.format(instance, solution);
  std::istringstream tokens(text);
  std::string token;
  for (std::size_t k = 0; k < solution.values.size(); ++k) {
    require(static_cast<bool>(tokens >> token), "output text has fewer values than the answer");
    std::vector<char> buffer(400 + static_cast<std::size_t>(instance.decimals));
    std::snprintf(buffer.data(), buffer.size(), "%.*f", instance.decimals, solution.values[k]);
    std::string expected = buffer.data();
    if (expected.find_first_not_of("-0.") == std::string::npos && expected[0] == '-') expected.erase(0, 1);
    require(token == expected, cell_name(k / solution.cols, k % solution.cols) + " printed '" + token + "', expected '" +
                                   expected + "'");
  }
}

const std::vector<Property> kProperties = {
    {"AllMaskedRowIsZero", all_masked_row_is_zero},
    {"CausalEqualsLowerTriangularMask", causal_equals_lower_triangular_mask},
    {"SingleHeadEqualsSqrtD", single_head_equals_sqrt_d},
    {"SingleVisibleKeyCopiesV", single_visible_key_copies_v},
    {"MaskedValuesDoNotMatter", masked_values_do_not_matter},
    {"PowerOfTwoScalingOfV", power_of_two_scaling_of_v},
    {"FormatIsCorrectRounding", format_is_correct_rounding},
    {"WeightsSumToOne", weights_sum_to_one},
    {"AgreesWithOracleWithinBand", agrees_with_oracle_within_band},
    {"OverflowSafeAtHugeScores", overflow_safe_at_huge_scores},
    {"OutputWithinVisibleRange", output_within_visible_range},
    {"IdenticalKeysGiveMeanOfVisibleV", identical_keys_give_mean_of_visible_v},
    {"KeyPermutationInvariance", key_permutation_invariance},
    {"ShiftInvariance", shift_invariance},
    {"HeadConcatOrder", head_concat_order},
};

}  // namespace

const std::vector<Property>& properties() { return kProperties; }

const Property& property(const std::string& name) {
  for (const Property& p : kProperties) {
    if (name == p.name) return p;
  }
  throw std::out_of_range("no property named " + name);
}

GenOptions property_gen_options(Problem problem) {
  GenOptions options = gen_options(problem, Profile::edge);
  if (problem == Problem::general) {
    // Judge-test sizes: the oracle certifies every case, several times for metamorphic pairs.
    options.limits.max_n = options.limits.max_m = 12;
    options.limits.max_d = 8;
    options.limits.max_batch = 3;
    options.limits.max_decimals = 6;
  }
  options.typical_n = 5;
  options.typical_d = 4;
  return options;
}

bool CheckReport::passed() const { return first_failure() == nullptr; }

const PropertyOutcome* CheckReport::first_failure() const {
  for (const PropertyOutcome& outcome : outcomes) {
    if (!outcome.passed) return &outcome;
  }
  return nullptr;
}

CheckReport check_implementation(const Implementation& implementation, const CheckOptions& options) {
  CheckReport report;
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  if (options.seed != 0) params.seed = options.seed;
  params.maxSuccess = options.cases;
  params.disableShrinking = !options.shrink;
  report.seed = params.seed;
  for (const Property& p : kProperties) {
    for (Problem problem : options.problems) {
      const GenOptions gen = property_gen_options(problem);
      const auto result = rc::detail::checkTestable(
          [&] { p.check(implementation, *gen_instance(gen)); }, rc::detail::TestMetadata{}, params);
      PropertyOutcome outcome{p.name, problem, true, options.cases, ""};
      if (result.template is<rc::detail::FailureResult>()) {
        const auto& failure = result.template get<rc::detail::FailureResult>();
        std::ostringstream description;
        rc::detail::printResultMessage(failure, description);
        outcome = {p.name, problem, false, failure.numSuccess + 1, description.str()};
      } else if (result.template is<rc::detail::GaveUpResult>()) {
        // Too many discarded cases (RC_PRE): it passed on the cases it could run.
        outcome.cases = result.template get<rc::detail::GaveUpResult>().numSuccess;
      } else if (result.template is<rc::detail::Error>()) {
        outcome = {p.name, problem, false, 0, "error: " + result.template get<rc::detail::Error>().description};
      }
      report.outcomes.push_back(std::move(outcome));
      if (options.stop_at_first_failure && !report.outcomes.back().passed) return report;
    }
  }
  return report;
}

}  // namespace attn::verify
