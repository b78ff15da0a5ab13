#include "tensor/tensor_ieee.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

namespace attn::verify::detail {

namespace {

// The IEEE class of a score s_ij (before the softmax): finite, NaN, ±inf, or capped (softcap over an
// infinite score: ±c, finite but from infinite inputs).
enum class Score { finite, nan, plus_inf, minus_inf, capped };

// The class of scale · Σ_c q_c k_c in IEEE arithmetic, whatever the order of the sum: a NaN factor or
// inf·0 makes a NaN term; +inf and -inf terms together make NaN; infinite terms of one sign that
// infinity; finite terms a finite exact sum (rounding may overflow it, but the exact score is finite).
// The bias (an additive mask's finite value, ALiBi's) leaves an infinity as it is.
Score score_class(const TensorProblem& p, const double* q, const double* k) {
  bool pos = false, neg = false;
  for (std::size_t c = 0; c < p.E; ++c) {
    const double x = q[c], y = k[c];
    if (std::isnan(x) || std::isnan(y)) return Score::nan;
    if (std::isinf(x) || std::isinf(y)) {
      if (x == 0 || y == 0) return Score::nan;
      (std::signbit(x) != std::signbit(y) ? neg : pos) = true;
    }
  }
  if (pos && neg) return Score::nan;
  if (!pos && !neg) return Score::finite;
  const double scale = p.scale.value_or(1.0);  // the default 1/√E is positive
  if (scale == 0) return Score::nan;
  if (p.softcap > 0) return Score::capped;
  return pos != (scale < 0) ? Score::plus_inf : Score::minus_inf;
}

bool any_nonfinite(const double* x, std::size_t n) {
  for (std::size_t c = 0; c < n; ++c) {
    if (!std::isfinite(x[c])) return true;
  }
  return false;
}

// "query (0, 1, 2, 3) of [B, H, L, E] is NaN": the first non-finite element of a row of a tensor.
std::string first_nonfinite(const TensorProblem& p, const char* name, const std::vector<double>& data,
                            std::size_t heads, std::size_t rows, std::size_t width, std::size_t b, std::size_t h,
                            std::size_t row) {
  const std::size_t first = tensor_index(p, heads, rows, width, b, h, row, 0);
  for (std::size_t c = 0; c < width; ++c) {
    if (!std::isfinite(data[first + c]))
      return std::string(name) + " " + element_name(stored_dims(p, heads, rows, width), first + c) + " is " +
             nonfinite_name(data[first + c]);
  }
  return {};
}

}  // namespace

IeeeInputs::IeeeInputs(const TensorProblem& problem)
    : p_(problem), bad_query_(problem.batch * problem.q_heads * problem.L, 0),
      bad_keys_(problem.batch * problem.kv_heads), bad_values_(problem.batch * problem.kv_heads) {
  for (std::size_t row = 0; row < bad_query_.size(); ++row) {
    const RowIndex r = row_index(p_, row);
    bad_query_[row] = any_nonfinite(&p_.query[tensor_index(p_, p_.q_heads, p_.L, p_.E, r.b, r.h, r.i, 0)], p_.E);
  }
  for (std::size_t b = 0; b < p_.batch; ++b) {
    for (std::size_t g = 0; g < p_.kv_heads; ++g) {
      for (std::size_t j = 0; j < p_.S; ++j) {
        if (any_nonfinite(&p_.key[tensor_index(p_, p_.kv_heads, p_.S, p_.E, b, g, j, 0)], p_.E))
          bad_keys_[b * p_.kv_heads + g].push_back(j);
        if (any_nonfinite(&p_.value[tensor_index(p_, p_.kv_heads, p_.S, p_.Ev, b, g, j, 0)], p_.Ev))
          bad_values_[b * p_.kv_heads + g].push_back(j);
      }
    }
  }
}

IeeeExpectation IeeeInputs::expect(std::size_t row) const {
  IeeeExpectation e;
  e.columns.assign(p_.Ev, IeeeColumn::value);
  const RowIndex r = row_index(p_, row);
  const std::size_t g = kv_head_of(p_, r.h), group = r.b * p_.kv_heads + g;
  const double* q = &p_.query[tensor_index(p_, p_.q_heads, p_.L, p_.E, r.b, r.h, r.i, 0)];
  const auto cause_of = [&](std::size_t j) {
    std::string cause = first_nonfinite(p_, "query", p_.query, p_.q_heads, p_.L, p_.E, r.b, r.h, r.i);
    return cause.empty() ? first_nonfinite(p_, "key", p_.key, p_.kv_heads, p_.S, p_.E, r.b, g, j) : cause;
  };
  // Rules 1 and 2: the scores. Only a non-finite query row or key row can make one non-finite.
  std::size_t keys = 0;
  std::vector<std::size_t> dropped;  // keys whose score is -inf
  bool capped = false;
  const auto judge_key = [&](std::size_t j) {
    const Score s = score_class(p_, q, &p_.key[tensor_index(p_, p_.kv_heads, p_.S, p_.E, r.b, g, j, 0)]);
    if (s == Score::finite) return false;
    if (e.cause.empty() || s == Score::nan || s == Score::plus_inf) e.cause = cause_of(j);
    if (s == Score::nan || s == Score::plus_inf) return true;
    if (s == Score::capped) {
      capped = true;
    } else {
      dropped.push_back(j);  // Score::minus_inf
    }
    return false;
  };
  if (bad_query_[row]) {
    for (std::size_t j = 0; j < p_.S; ++j) {
      if (!takes_part(p_, r.b, r.h, r.i, j)) continue;
      ++keys;
      if (judge_key(j)) return e.row = IeeeRow::nan, e;
    }
  } else {
    for (std::size_t j : bad_keys_[group]) {
      if (takes_part(p_, r.b, r.h, r.i, j) && judge_key(j)) return e.row = IeeeRow::nan, e;
    }
    if (!dropped.empty()) {
      for (std::size_t j = 0; j < p_.S; ++j) keys += takes_part(p_, r.b, r.h, r.i, j) ? 1 : 0;
    }
  }
  if (capped || !dropped.empty()) e.row = !dropped.empty() && dropped.size() == keys ? IeeeRow::keyless : IeeeRow::unmodelled;
  e.nan_allowed = !dropped.empty();
  // Rule 4: keys a mask, the causal rule or the window excludes may leak (padding may not).
  const auto padding = [&](std::size_t j) { return !p_.key_lengths.empty() && j >= p_.key_lengths[r.b]; };
  for (std::size_t j : bad_keys_[group]) {
    if (!takes_part(p_, r.b, r.h, r.i, j) && !padding(j)) e.nan_allowed = true;
  }
  for (std::size_t j : bad_values_[group]) {
    if (takes_part(p_, r.b, r.h, r.i, j) || padding(j)) continue;
    const double* v = &p_.value[tensor_index(p_, p_.kv_heads, p_.S, p_.Ev, r.b, g, j, 0)];
    for (std::size_t c = 0; c < p_.Ev; ++c) {
      if (!std::isfinite(v[c]) && e.columns[c] == IeeeColumn::value) e.columns[c] = IeeeColumn::maybe_nan;
    }
  }
  // Rule 3: the values of the keys that take part, column by column. A dropped key's weight is 0
  // exactly, but a kernel forms it as e^{-inf - m} = 0 and multiplies: 0·NaN, 0·inf may be NaN there.
  for (std::size_t j : bad_values_[group]) {
    if (!takes_part(p_, r.b, r.h, r.i, j)) continue;
    const bool weightless = std::find(dropped.begin(), dropped.end(), j) != dropped.end();
    const double* v = &p_.value[tensor_index(p_, p_.kv_heads, p_.S, p_.Ev, r.b, g, j, 0)];
    for (std::size_t c = 0; c < p_.Ev; ++c) {
      if (std::isfinite(v[c])) continue;
      IeeeColumn& column = e.columns[c];
      if (weightless) {
        if (column == IeeeColumn::value) column = IeeeColumn::maybe_nan;
        continue;
      }
      const IeeeColumn inf = v[c] > 0 ? IeeeColumn::plus_inf : IeeeColumn::minus_inf;
      const bool open = column == IeeeColumn::value || column == IeeeColumn::maybe_nan || column == inf;
      column = std::isnan(v[c]) || !open ? IeeeColumn::nan : inf;
      if (e.cause.empty()) e.cause = first_nonfinite(p_, "value", p_.value, p_.kv_heads, p_.S, p_.Ev, r.b, g, j);
    }
  }
  return e;
}

TensorProblem IeeeInputs::finite_problem() const {
  TensorProblem finite = p_;
  for (std::vector<double>* data : {&finite.query, &finite.key, &finite.value}) {
    for (double& x : *data) x = std::isfinite(x) ? x : 0.0;
  }
  return finite;
}

std::string IeeeInputs::leak_source(std::size_t row) const {
  const RowIndex r = row_index(p_, row);
  const std::size_t g = kv_head_of(p_, r.h), group = r.b * p_.kv_heads + g;
  for (const auto& [name, rows, data, width] :
       {std::tuple{"value", &bad_values_[group], &p_.value, p_.Ev}, std::tuple{"key", &bad_keys_[group], &p_.key, p_.E}}) {
    for (std::size_t j : *rows) {
      if (!p_.key_lengths.empty() && j >= p_.key_lengths[r.b])
        return first_nonfinite(p_, name, *data, p_.kv_heads, p_.S, width, r.b, g, j) + " past the sequence's length";
    }
  }
  return {};
}

}  // namespace attn::verify::detail
