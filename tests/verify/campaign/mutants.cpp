#include "mutants.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#include "format.hpp"
#include "judge/rules.hpp"

namespace attn::verify {

std::vector<Bug> all_bugs() {
  return {Bug::no_max_subtraction, Bug::sqrt_d_not_sqrt_hd,    Bug::interleaved_heads, Bug::reversed_head_concat,
          Bug::mask_after_softmax, Bug::masked_row_uniform,    Bug::causal_off_by_one, Bug::normalize_over_all_keys,
          Bug::float_accumulation, Bug::negative_zero_printed, Bug::double_rounding};
}

std::string Mutant::name() const {
  switch (bug_) {
    case Bug::no_max_subtraction:
      return "no max subtraction";
    case Bug::sqrt_d_not_sqrt_hd:
      return "sqrt(d) instead of sqrt(hd)";
    case Bug::interleaved_heads:
      return "interleaved head columns";
    case Bug::reversed_head_concat:
      return "reversed head concat";
    case Bug::mask_after_softmax:
      return "mask applied after softmax";
    case Bug::masked_row_uniform:
      return "all-masked row -> uniform weights";
    case Bug::causal_off_by_one:
      return "causal off by one";
    case Bug::normalize_over_all_keys:
      return "normalizing over all keys";
    case Bug::float_accumulation:
      return "float accumulation";
    case Bug::negative_zero_printed:
      return "\"-0.00\" printed";
    case Bug::double_rounding:
      return "double rounding";
  }
  return "?";
}

namespace {

// The textbook algorithm in a chosen precision, with the bug switched in where it belongs.
template <typename Real> Solution textbook(const Instance& instance, Bug bug) {
  const std::size_t n = instance.n, m = instance.m, h = instance.heads;
  const std::size_t head_k = instance.d_k / h, head_v = instance.d_v / h;
  Solution solution = zero_solution(instance, true);
  const Real divisor = bug == Bug::sqrt_d_not_sqrt_hd && instance.scale == ScaleKind::sqrt_head_dim
                           ? static_cast<Real>(std::sqrt(static_cast<double>(instance.d_k)))
                           : static_cast<Real>(divisor_as_double(instance));
  auto column_k = [&](std::size_t g, std::size_t c) {
    return bug == Bug::interleaved_heads ? c * h + g : g * head_k + c;
  };
  auto column_v = [&](std::size_t g, std::size_t c) {
    return bug == Bug::interleaved_heads ? c * h + g : g * head_v + c;
  };
  auto visible = [&](std::size_t b, std::size_t i, std::size_t j) {
    if (bug == Bug::causal_off_by_one && instance.mask == MaskKind::causal) return j < i;
    return key_visible(instance, b, i, j);
  };
  std::vector<Real> score(m), weight(m);
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    const BatchItem& item = instance.batch[b];
    for (std::size_t g = 0; g < h; ++g) {
      const std::size_t out_block = bug == Bug::reversed_head_concat ? h - 1 - g : g;
      for (std::size_t i = 0; i < n; ++i) {
        bool any = false;
        for (std::size_t j = 0; j < m; ++j) any = any || visible(b, i, j);
        if (!any && bug != Bug::masked_row_uniform) continue;
        // Which keys enter the softmax, and which enter its denominator.
        auto in_softmax = [&](std::size_t j) { return !any || bug == Bug::mask_after_softmax || visible(b, i, j); };
        auto in_denominator = [&](std::size_t j) { return in_softmax(j) || bug == Bug::normalize_over_all_keys; };
        Real top = -std::numeric_limits<Real>::infinity();
        for (std::size_t j = 0; j < m; ++j) {
          Real dot = 0;
          for (std::size_t c = 0; c < head_k; ++c) {
            dot += static_cast<Real>(item.Q.at(i, column_k(g, c))) * static_cast<Real>(item.K.at(j, column_k(g, c)));
          }
          score[j] = !any ? Real(0) : dot / divisor;
          if (in_softmax(j)) top = std::max(top, score[j]);
        }
        if (bug == Bug::no_max_subtraction) top = 0;
        Real total = 0;
        for (std::size_t j = 0; j < m; ++j) {
          weight[j] = in_denominator(j) ? std::exp(score[j] - top) : Real(0);
          total += weight[j];
        }
        for (std::size_t j = 0; j < m; ++j) {
          weight[j] = in_softmax(j) && (any ? visible(b, i, j) : true) ? weight[j] / total : Real(0);
          solution.weights[((b * h + g) * n + i) * m + j] = static_cast<double>(weight[j]);
        }
        for (std::size_t c = 0; c < head_v; ++c) {
          Real sum = 0;
          for (std::size_t j = 0; j < m; ++j) sum += weight[j] * static_cast<Real>(item.V.at(j, column_v(g, c)));
          solution.values[(b * n + i) * instance.d_v + column_v(out_block, c)] = static_cast<double>(sum);
        }
      }
    }
  }
  return solution;
}

}  // namespace

Solution Mutant::run(const Instance& instance) const {
  return bug_ == Bug::float_accumulation ? textbook<float>(instance, bug_) : textbook<double>(instance, bug_);
}

std::string Mutant::format(const Instance& instance, const Solution& solution) const {
  if (bug_ != Bug::negative_zero_printed && bug_ != Bug::double_rounding) return format_solution(instance, solution);
  std::string out;
  char buffer[512];
  for (std::size_t k = 0; k < solution.values.size(); ++k) {
    double x = solution.values[k];
    if (bug_ == Bug::double_rounding) {
      std::snprintf(buffer, sizeof buffer, "%.*f", instance.decimals + 2, x);  // first rounding
      x = std::strtod(buffer, nullptr);
    }
    std::snprintf(buffer, sizeof buffer, "%.*f", instance.decimals, x);
    std::string token = buffer;
    if (bug_ == Bug::double_rounding && token.find_first_not_of("-0.") == std::string::npos && token[0] == '-') {
      token.erase(0, 1);  // this mutant only rounds twice; it does normalize "-0"
    }
    out += token;
    out += (k + 1) % solution.cols == 0 ? '\n' : ' ';
  }
  return out;
}

}  // namespace attn::verify
