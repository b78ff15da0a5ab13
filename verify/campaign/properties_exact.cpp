// The properties whose expectation needs no oracle: exact values (+0.0 rows, a copied V row),
// bit-for-bit metamorphic relations (masked keys, the causal mask, h = 1, powers of two), the
// printed rounding, and one a priori error bound (weights summing to 1).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "campaign/property_support.hpp"
#include "campaign/transforms.hpp"
#include "judge/rules.hpp"

namespace attn::verify::detail {
namespace {

// Two runs whose exact answers are equal and computed by the same operations: bit for bit.
void require_identical(const Solution& a, const Solution& b, const std::string& what) {
  for (std::size_t k = 0; k < a.values.size(); ++k) {
    require(a.values[k] == b.values[k], what + ": " + cell_name(k / a.cols, k % a.cols) + " is not bit for bit equal");
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

// A row that sees exactly one key outputs exactly that key's V row (weight exactly 1).
void single_visible_key_copies_v(const Implementation& implementation, const Instance& original) {
  Instance instance = with_explicit_mask(as_general(original));
  std::vector<std::size_t> chosen(instance.batch.size() * instance.n);
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t i = 0; i < instance.n; ++i) {
      chosen[b * instance.n + i] = *rc::gen::inRange<std::size_t>(0, instance.m);
      for (std::size_t j = 0; j < instance.m; ++j)
        instance.batch[b].mask[i * instance.m + j] = j == chosen[b * instance.n + i];
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
    for (std::size_t c = 0; c < instance.d_v; ++c)
      set_text(item.V, key * instance.d_v + c, c % 2 ? "1000" : "-999.999");
  }
  require_identical(before, run_checked(implementation, instance), "changing a masked key");
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
    require(token == expected,
            cell_name(k / solution.cols, k % solution.cols) + " printed '" + token + "', expected '" + expected + "'");
  }
}

// Weights are >= 0, 0 where masked, and each softmax row sums to 1 within c·(k + 2 + 2·range)·u:
// Blanchard, Higham & Higham (2021), "Accurately computing the log-sum-exp and softmax functions",
// bound the shifted softmax's relative error per weight by about (k + 2 + 2·range)·u to first
// order, k = visible keys, range = largest minus smallest scaled score. c = 2 covers the
// second-order terms and a 1-ulp exp (u more per term); summing the k weights adds k·u, inside it.
void weights_sum_to_one(const Implementation& implementation, const Instance& instance) {
  if (!implementation.provides_weights()) return;
  const Solution solution = run_checked(implementation, instance);
  const std::size_t h = instance.heads;
  const double divisor = divisor_as_double(instance);
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t g = 0; g < h; ++g) {
      for (std::size_t i = 0; i < instance.n; ++i) {
        const double* w = &solution.weights[((b * h + g) * instance.n + i) * instance.m];
        long double sum = 0, lowest = INFINITY, highest = -INFINITY;
        std::size_t k = 0;
        for (std::size_t j = 0; j < instance.m; ++j) {
          if (!key_visible(instance, b, i, j)) {
            require(w[j] == 0.0,
                    "weight of masked key " + std::to_string(j) + " in row " + std::to_string(i) + " is not 0");
            continue;
          }
          require(w[j] >= 0.0, "negative weight in row " + std::to_string(i));
          long double dot = 0;
          const HeadColumns head = head_columns(instance, g);
          for (std::size_t c = 0; c < head.k_count; ++c) {
            dot += static_cast<long double>(instance.batch[b].Q.at(i, head.k_first + c)) *
                   instance.batch[b].K.at(j, head.k_first + c);
          }
          lowest = std::min(lowest, dot / divisor);
          highest = std::max(highest, dot / divisor);
          sum += w[j];
          ++k;
        }
        if (k == 0) continue;
        const double range = static_cast<double>(highest - lowest);
        const double bound = 2.0 * (static_cast<double>(k) + 2.0 + 2.0 * range) * 0x1p-53;
        require(std::abs(static_cast<double>(sum) - 1.0) <= bound, "weights of row " + std::to_string(i) + " head " +
                                                                       std::to_string(g) + " sum to 1 + " +
                                                                       std::to_string(static_cast<double>(sum) - 1.0));
      }
    }
  }
}

}  // namespace

std::vector<Property> exact_properties() {
  return {
      {"AllMaskedRowIsZero", all_masked_row_is_zero},
      {"CausalEqualsLowerTriangularMask", causal_equals_lower_triangular_mask},
      {"SingleHeadEqualsSqrtD", single_head_equals_sqrt_d},
      {"SingleVisibleKeyCopiesV", single_visible_key_copies_v},
      {"MaskedValuesDoNotMatter", masked_values_do_not_matter},
      {"PowerOfTwoScalingOfV", power_of_two_scaling_of_v},
      {"FormatIsCorrectRounding", format_is_correct_rounding},
      {"WeightsSumToOne", weights_sum_to_one},
  };
}

}  // namespace attn::verify::detail
