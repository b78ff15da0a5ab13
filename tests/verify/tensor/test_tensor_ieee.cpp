// NaN and infinity in the inputs (tensor_ieee.hpp): a FlashAttention-style double kernel (the running
// maximum starts at the sink or -inf, keys that take no part skipped, a row whose maximum stays -inf
// written as zeros) passes on random problems with NaN and ±inf planted in query, key and value under
// every feature (GQA, both layouts, masks, causal, windows, key lengths, sinks, softcap, ALiBi,
// sampling), and so does one that masks tiles FlashAttention's way (keys a mask, causal or the window
// excludes enter P·V with weight 0); three kernels that mishandle them are caught wherever they differ
// from it: one that swallows NaN (written as 0), one that lets keys past key_lengths into P·V with
// weight 0 (0·NaN leaks), one whose maximum skips a NaN score (std::max drops it).
// Seeds are printed (SCOPED_TRACE) and replay with the same loop index.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor/tensor_ieee.hpp"

namespace attn::verify {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// correct skips every excluded key; tile_masking lets keys a mask, causal or the window excludes into
// P·V with weight 0 (FlashAttention's tiles: allowed); padding_in_pv does so for keys past key_lengths
// too (a leak).
enum class Kernel { correct, swallows_nan, padding_in_pv, max_skips_nan, tile_masking };

// The kernel in double: exact enough for fp32 storage (its error is far inside the fp32 band).
std::vector<double> run(const TensorProblem& p, Kernel kernel) {
  std::vector<double> out(p.batch * p.q_heads * p.L * p.Ev, 0.0);
  const double scale = p.scale.value_or(1 / std::sqrt(static_cast<double>(p.E)));
  TensorProblem unpadded = p;  // takes_part without key_lengths
  unpadded.key_lengths.clear();
  for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
    const RowIndex r = row_index(p, row);
    const std::size_t g = kv_head_of(p, r.h);
    std::vector<double> s(p.S, -kInf);
    std::vector<char> part(p.S, 0), in_pv(p.S, 0);
    double m = has_sinks(p) ? sink_of(p, r.h) : -kInf;
    for (std::size_t j = 0; j < p.S; ++j) {
      part[j] = takes_part(p, r.b, r.h, r.i, j);
      const bool padding = !p.key_lengths.empty() && j >= p.key_lengths[r.b];
      in_pv[j] = part[j] || (kernel == Kernel::padding_in_pv && takes_part(unpadded, r.b, r.h, r.i, j)) ||
                 (kernel == Kernel::tile_masking && !padding);
      if (!part[j]) continue;
      double dot = 0;
      for (std::size_t c = 0; c < p.E; ++c)
        dot += p.query[tensor_index(p, p.q_heads, p.L, p.E, r.b, r.h, r.i, c)] *
               p.key[tensor_index(p, p.kv_heads, p.S, p.E, r.b, g, j, c)];
      double x = dot * scale;
      if (p.softcap > 0) x = p.softcap * std::tanh(x / p.softcap);
      s[j] = x + additive_bias(p, r.b, r.h, r.i, j);
      m = kernel == Kernel::max_skips_nan ? std::max(m, s[j]) : (std::isnan(s[j]) || s[j] > m ? s[j] : m);
    }
    if (m == -kInf) continue;  // no key (or every score -inf): zeros
    double l = has_sinks(p) ? std::exp(sink_of(p, r.h) - m) : 0;
    std::vector<double> acc(p.Ev, 0.0);
    for (std::size_t j = 0; j < p.S; ++j) {
      if (!in_pv[j]) continue;
      if (kernel == Kernel::max_skips_nan && std::isnan(s[j])) continue;
      const double w = part[j] ? std::exp(s[j] - m) : 0.0;
      l += w;
      for (std::size_t c = 0; c < p.Ev; ++c) acc[c] += w * p.value[tensor_index(p, p.kv_heads, p.S, p.Ev, r.b, g, j, c)];
    }
    for (std::size_t c = 0; c < p.Ev; ++c) {
      double y = round_to(DType::fp32, acc[c] / l);
      if (kernel == Kernel::swallows_nan && std::isnan(y)) y = 0;
      out[output_index(p, row, c)] = y;
    }
  }
  return out;
}

// A random problem with a few NaN and ±inf planted; every feature drawn.
TensorProblem draw(std::uint64_t seed) {
  std::mt19937_64 random(seed);
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(random() % n); };
  std::normal_distribution<double> normal;
  TensorProblem p;
  p.kv_heads = 1 + pick(2), p.q_heads = p.kv_heads * (1 + pick(2)), p.batch = 1 + pick(2);
  p.L = 1 + pick(6), p.S = 1 + pick(9), p.E = 1 + pick(5), p.Ev = 1 + pick(4);
  p.layout = pick(2) ? AxisOrder::batch_seq_head : AxisOrder::batch_head_seq;
  const auto fill = [&](std::vector<double>& v, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) v.push_back(round_to(DType::fp32, normal(random)));
  };
  fill(p.query, p.batch * p.q_heads * p.L * p.E);
  fill(p.key, p.batch * p.kv_heads * p.S * p.E);
  fill(p.value, p.batch * p.kv_heads * p.S * p.Ev);
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), kInf, -kInf, 0.0};
  for (std::vector<double>* t : {&p.query, &p.key, &p.value, &p.value}) {
    for (std::size_t n = pick(3); n-- > 0;) (*t)[pick(t->size())] = specials[pick(4)];
  }
  switch (pick(4)) {
    case 0: p.causal = Causal::top_left; break;
    case 1: p.window_left = static_cast<std::int64_t>(pick(3)), p.window_right = static_cast<std::int64_t>(pick(2)); break;
    case 2: {
      p.mask_kind = TensorMask::boolean, p.mask_shape = {p.L, p.S};
      for (std::size_t k = 0; k < p.L * p.S; ++k) p.mask.push_back(pick(4) ? 1.0 : 0.0);
      break;
    }
    default: break;
  }
  if (pick(2) == 0) {
    for (std::size_t b = 0; b < p.batch; ++b) p.key_lengths.push_back(pick(p.S + 1));
  }
  if (pick(3) == 0) {
    for (std::size_t h = 0; h < p.q_heads; ++h) p.sinks.push_back(round_to(DType::fp32, normal(random)));
  }
  if (pick(4) == 0) p.softcap = 2.0;
  if (pick(4) == 0) {
    for (std::size_t h = 0; h < p.q_heads; ++h) p.alibi_slopes.push_back(0.25 * static_cast<double>(h + 1));
  }
  return p;
}

CertifyOptions options(std::uint64_t seed) {
  CertifyOptions o;
  o.arithmetic = arithmetic_profile("fp32").value();
  if (seed % 3 == 0) o.rows = 2, o.seed = seed;
  return o;
}

TEST(TensorIeee, ACorrectKernelPassesAndEachMishandlingIsCaughtWhereItDiffers) {
  std::size_t with_specials = 0, caught[4] = {0, 0, 0, 0}, differs[4] = {0, 0, 0, 0};
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const TensorProblem p = draw(seed);
    ASSERT_TRUE(validate(p, Admit::ieee)) << validate(p, Admit::ieee).error().message;
    with_specials += has_nonfinite_inputs(p) ? 1 : 0;
    const std::vector<double> good = run(p, Kernel::correct);
    const detail::IeeeInputs ieee(p);
    const TensorReport report = certify_tensor(p, good, options(seed));
    ASSERT_TRUE(report.passed) << report.summary();
    const TensorReport tiles = certify_tensor(p, run(p, Kernel::tile_masking), options(seed));
    ASSERT_TRUE(tiles.passed) << "FlashAttention's tile masking: " << tiles.summary();
    for (Kernel k : {Kernel::swallows_nan, Kernel::padding_in_pv, Kernel::max_skips_nan}) {
      const std::vector<double> out = run(p, k);
      bool same = true;
      for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
        const detail::IeeeExpectation e = ieee.expect(row);
        for (std::size_t c = 0; c < p.Ev; ++c) {
          const std::size_t n = output_index(p, row, c);
          // NaN where the correct kernel has ±inf is what rule 3 allows (a weight that rounds to 0),
          // and NaN where the rules allow it (rule 4's excluded keys, rules 1-2's -inf scores).
          const bool allowed = e.nan_allowed || e.columns[c] == detail::IeeeColumn::maybe_nan || std::isinf(good[n]);
          same = same && (out[n] == good[n] || (std::isnan(out[n]) && (std::isnan(good[n]) || allowed)));
        }
      }
      if (same) continue;
      const auto index = static_cast<std::size_t>(k);
      ++differs[index];
      const TensorReport bad = certify_tensor(p, out, options(seed));
      caught[index] += bad.passed ? 0 : 1;
      EXPECT_FALSE(bad.passed) << "kernel " << index << ": " << bad.summary();
    }
  }
  std::printf("problems with NaN/inf inputs: %zu of 400; caught (differing): swallows NaN %zu (%zu), padding "
              "in P·V %zu (%zu), max skips NaN %zu (%zu)\n",
              with_specials, caught[1], differs[1], caught[2], differs[2], caught[3], differs[3]);
  EXPECT_GE(with_specials, 300u);
  for (std::size_t k = 1; k < 4; ++k) EXPECT_GE(differs[k], 20u) << "kernel " << k << " rarely differs";
}

TEST(TensorIeee, EmptyProblems) {
  TensorProblem p = draw(7);
  for (std::vector<double>* t : {&p.query, &p.key, &p.value}) {
    for (double& x : *t) x = std::isfinite(x) ? x : 1.0;
  }
  p.key_lengths.clear();
  TensorProblem no_keys = p;
  no_keys.S = 0, no_keys.key.clear(), no_keys.value.clear(), no_keys.mask_kind = TensorMask::none;
  no_keys.mask.clear(), no_keys.mask_shape.clear(), no_keys.window_left = no_keys.window_right = -1;
  std::vector<double> zeros(no_keys.batch * no_keys.q_heads * no_keys.L * no_keys.Ev, 0.0);
  EXPECT_TRUE(certify_tensor(no_keys, zeros, options(1)).passed);
  zeros[0] = 0.5;
  const TensorReport bad = certify_tensor(no_keys, zeros, options(1));
  ASSERT_EQ(bad.failure_count, 1u);
  EXPECT_EQ(bad.failures[0].reason, "masked row not zero");
  TensorProblem no_queries = p;
  no_queries.L = 0, no_queries.query.clear(), no_queries.mask_kind = TensorMask::none;
  no_queries.mask.clear(), no_queries.mask_shape.clear();
  const TensorReport empty = certify_tensor(no_queries, {}, options(1));
  EXPECT_TRUE(empty.passed);
  EXPECT_EQ(empty.rows_total, 0u);
  EXPECT_FALSE(validate(no_keys)) << "the strict validation still refuses S = 0";
}

}  // namespace
}  // namespace attn::verify
