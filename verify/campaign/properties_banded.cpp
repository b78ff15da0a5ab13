// The properties checked against the oracle: each output within its band δ of the certified
// exact value, or two runs whose exact answers are equal each within its band of the other.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "campaign/property_support.hpp"
#include "campaign/transforms.hpp"
#include "judge/checker.hpp"
#include "judge/rules.hpp"

namespace attn::verify::detail {
namespace {

// A random permutation of 0..size-1 (Fisher-Yates with RapidCheck's draws, so it shrinks).
std::vector<std::size_t> draw_permutation(std::size_t size) {
  std::vector<std::size_t> order(size);
  std::iota(order.begin(), order.end(), 0);
  for (std::size_t i = size; i > 1; --i) std::swap(order[i - 1], order[*rc::gen::inRange<std::size_t>(0, i)]);
  return order;
}

// x within `band` of the enclosure [lo, hi] of the exact value.
bool within(double x, const Interval& exact, double band) { return x >= exact.lo - band && x <= exact.hi + band; }

// Two runs whose exact answers are equal: each within its own band of the other.
void require_close(const Solution& a, const Certificate& a_bands, const Solution& b, const Certificate& b_bands,
                   const std::string& what) {
  for (std::size_t k = 0; k < a.values.size(); ++k) {
    const double allowed = a_bands.cells[k].band + b_bands.cells[k].band;
    require(
        std::abs(a.values[k] - b.values[k]) <= allowed,
        what + ": " + cell_name(k / a.cols, k % a.cols) + " differs by " + std::to_string(a.values[k] - b.values[k]));
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

// Each output lies between the smallest and largest visible V of its column (within δ).
void output_within_visible_range(const Implementation& implementation, const Instance& instance) {
  const Solution solution = run_checked(implementation, instance);
  const Certificate bands = certify(instance);
  for (std::size_t r = 0; r < solution.rows; ++r) {
    const std::size_t b = r / instance.n, i = r % instance.n;
    for (std::size_t c = 0; c < instance.d_v; ++c) {
      double lowest = INFINITY, highest = -INFINITY;
      for (std::size_t j = 0; j < instance.m; ++j) {
        if (!key_visible(instance, b, i, j)) continue;
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
      for (std::size_t j = 0; j < instance.m; ++j)
        sum += key_visible(instance, b, i, j) ? instance.batch[b].V.at(j, c) : 0.0L;
      const double mean = count ? static_cast<double>(sum / count) : 0.0;
      // The long double mean is off by at most m·2^-64·max|V|, far inside δ; 2δ leaves room for it.
      require(std::abs(solution.values[r * instance.d_v + c] - mean) <= 2 * bands.cells[r * instance.d_v + c].band,
              cell_name(r, c) + " is not the mean of the visible V");
    }
  }
}

// Reordering keys together with their values and mask columns changes nothing exact.
void key_permutation_invariance(const Implementation& implementation, const Instance& instance) {
  const std::vector<std::size_t> order = draw_permutation(instance.m);
  const Certificate bands = certify(instance);
  require_close(run_checked(implementation, instance), bands,
                run_checked(implementation, permute_keys(instance, order)), bands, "permuting keys and values");
}

// softmax(s + c) = softmax(s): adding a per-row constant to every score changes nothing exact.
void shift_invariance(const Implementation& implementation, const Instance& original) {
  Instance base = as_general(original);
  if (base.scale == ScaleKind::sqrt_head_dim) base.scale = ScaleKind::none;  // the shift adds columns
  std::vector<std::string> shifts(base.n);
  for (auto& shift : shifts) shift = std::to_string(*rc::gen::inRange(-5, 6));
  const Instance shifted = shift_scores(base, shifts);
  require_close(run_checked(implementation, base), certify(base), run_checked(implementation, shifted),
                certify(shifted), "shifting the scores of each row");
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
        require(std::abs(full.values[k] - alone.values[r * head_v + c]) <=
                    full_bands.cells[k].band + alone_bands.cells[r * head_v + c].band,
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

}  // namespace

std::vector<Property> banded_properties() {
  return {
      {"AgreesWithOracleWithinBand", agrees_with_oracle_within_band},
      {"OverflowSafeAtHugeScores", overflow_safe_at_huge_scores},
      {"OutputWithinVisibleRange", output_within_visible_range},
      {"IdenticalKeysGiveMeanOfVisibleV", identical_keys_give_mean_of_visible_v},
      {"KeyPermutationInvariance", key_permutation_invariance},
      {"ShiftInvariance", shift_invariance},
      {"HeadConcatOrder", head_concat_order},
  };
}

}  // namespace attn::verify::detail
