// The backward oracle (enclose_gradients): its enclosures hold the gradients computed in __float128
// by the same formulas with D_i = dO_i · O_i, agree with central differences of the forward oracle
// (the formulas are the derivatives of the forward semantics: masks, causal, GQA, key lengths), and
// satisfy Σ_j dK_j = 0 and Σ_j dV_j = Σ_i dO_i over rows with keys; rows without keys give dQ = 0;
// the additive mask's gradient (dS summed over its broadcast) holds the __float128 one and matches
// the central differences too.
#include <gtest/gtest.h>
#include <quadmath.h>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_backward.hpp"
#include "tensor/tensor_oracle.hpp"

namespace attn::verify {
namespace {

using Q128 = __float128;

// B = 2, Hq = 4 over Hkv = 2 (GQA), L = 5, S = 7, E = 3, Ev = 2; values k/8; an additive mask with
// -inf entries (query 2 of head 1 sees no key), key lengths 7 and 5, bottom-right causal or not.
TensorProblem problem(bool causal, unsigned seed) {
  TensorProblem p;
  p.batch = 2, p.q_heads = 4, p.kv_heads = 2, p.L = 5, p.S = 7, p.E = 3, p.Ev = 2, p.dtype = DType::fp32;
  std::mt19937_64 random(seed);
  const auto eighth = [&] { return static_cast<double>(static_cast<int>(random() % 33) - 16) / 8; };
  for (std::size_t n = 0; n < p.batch * p.q_heads * p.L * p.E; ++n) p.query.push_back(eighth());
  for (std::size_t n = 0; n < p.batch * p.kv_heads * p.S * p.E; ++n) p.key.push_back(eighth());
  for (std::size_t n = 0; n < p.batch * p.kv_heads * p.S * p.Ev; ++n) p.value.push_back(eighth());
  p.mask_kind = TensorMask::additive;
  p.mask_shape = {p.q_heads, p.L, p.S};
  for (std::size_t h = 0; h < p.q_heads; ++h)
    for (std::size_t i = 0; i < p.L; ++i)
      for (std::size_t j = 0; j < p.S; ++j)
        p.mask.push_back((h == 1 && i == 2) || random() % 5 == 0 ? -HUGE_VAL : eighth() / 2);
  p.key_lengths = {7, 5};
  if (causal) p.causal = Causal::bottom_right;
  return p;
}

std::vector<double> upstream(const TensorProblem& p, unsigned seed) {
  std::mt19937_64 random(seed);
  std::vector<double> dout;
  for (std::size_t n = 0; n < p.batch * p.q_heads * p.L * p.Ev; ++n)
    dout.push_back(static_cast<double>(static_cast<int>(random() % 17) - 8) / 4);
  return dout;
}

struct Gradients {
  std::vector<Q128> dq, dk, dv, dmask;
};

// The gradients in __float128, with D_i = dO_i · O_i (the oracle uses Σ_j P_ij dP_ij).
Gradients reference(const TensorProblem& p, const std::vector<double>& dout) {
  Gradients g{std::vector<Q128>(p.query.size(), 0), std::vector<Q128>(p.key.size(), 0),
              std::vector<Q128>(p.value.size(), 0), std::vector<Q128>(p.mask.size(), 0)};
  const Q128 sigma = 1 / sqrtq(static_cast<Q128>(p.E));
  for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
    const RowIndex r = row_index(p, row);
    const std::size_t kv = kv_head_of(p, r.h);
    std::vector<std::size_t> keys;
    for (std::size_t j = 0; j < p.S; ++j)
      if (takes_part(p, r.b, r.h, r.i, j)) keys.push_back(j);
    if (keys.empty()) continue;
    const auto q = [&](std::size_t c) { return p.query[tensor_index(p, p.q_heads, p.L, p.E, r.b, r.h, r.i, c)]; };
    const auto k = [&](std::size_t j, std::size_t c) { return p.key[tensor_index(p, p.kv_heads, p.S, p.E, r.b, kv, j, c)]; };
    const auto v = [&](std::size_t j, std::size_t c) { return p.value[tensor_index(p, p.kv_heads, p.S, p.Ev, r.b, kv, j, c)]; };
    const auto d = [&](std::size_t c) { return dout[tensor_index(p, p.q_heads, p.L, p.Ev, r.b, r.h, r.i, c)]; };
    std::vector<Q128> s, P, dP;
    for (std::size_t j : keys) {
      Q128 dot = 0;
      for (std::size_t c = 0; c < p.E; ++c) dot += static_cast<Q128>(q(c)) * k(j, c);
      s.push_back(sigma * dot + additive_bias(p, r.b, r.h, r.i, j));
    }
    Q128 top = s[0], total = 0;
    for (Q128 x : s) top = x > top ? x : top;
    for (Q128 x : s) total += expq(x - top);
    for (Q128 x : s) P.push_back(expq(x - top) / total);
    Q128 D = 0;
    for (std::size_t c = 0; c < p.Ev; ++c) {
      Q128 o = 0;
      for (std::size_t t = 0; t < keys.size(); ++t) o += P[t] * v(keys[t], c);
      D += d(c) * o;
    }
    for (std::size_t t = 0; t < keys.size(); ++t) {
      Q128 dp = 0;
      for (std::size_t c = 0; c < p.Ev; ++c) dp += static_cast<Q128>(d(c)) * v(keys[t], c);
      const Q128 dS = P[t] * (dp - D);
      g.dmask[mask_offset(p, r.b, r.h, r.i, keys[t])] += dS;  // the mask [Hq, L, S] broadcasts over B
      for (std::size_t c = 0; c < p.E; ++c) {
        g.dq[tensor_index(p, p.q_heads, p.L, p.E, r.b, r.h, r.i, c)] += sigma * dS * k(keys[t], c);
        g.dk[tensor_index(p, p.kv_heads, p.S, p.E, r.b, kv, keys[t], c)] += sigma * dS * q(c);
      }
      for (std::size_t c = 0; c < p.Ev; ++c)
        g.dv[tensor_index(p, p.kv_heads, p.S, p.Ev, r.b, kv, keys[t], c)] += P[t] * d(c);
    }
  }
  return g;
}

void expect_holds(const std::vector<FineEnclosure>& enclosure, const std::vector<Q128>& exact, const char* name) {
  ASSERT_EQ(enclosure.size(), exact.size()) << name;
  for (std::size_t n = 0; n < exact.size(); ++n) {
    const Q128 mid = static_cast<Q128>(enclosure[n].head) + enclosure[n].tail;
    const double distance = static_cast<double>(fabsq(mid - exact[n]));
    EXPECT_LE(distance, enclosure[n].radius + 1e-28) << name << "[" << n << "]";
    EXPECT_LE(enclosure[n].radius, 1e-30) << name << "[" << n << "]";
  }
}

TEST(TensorBackward, EnclosuresHoldTheQuadPrecisionGradients) {
  for (bool causal : {false, true})
    for (unsigned seed = 1; seed <= 3; ++seed) {
      const TensorProblem p = problem(causal, seed);
      const std::vector<double> dout = upstream(p, seed + 10);
      const GradientEnclosure g = enclose_gradients(p, dout, 160);
      const Gradients exact = reference(p, dout);
      expect_holds(g.dq, exact.dq, "dq");
      expect_holds(g.dk, exact.dk, "dk");
      expect_holds(g.dv, exact.dv, "dv");
      expect_holds(g.dmask, exact.dmask, "dmask");
    }
}

// Σ dout ∘ O by the forward oracle.
double loss(const TensorProblem& p, const std::vector<double>& dout) {
  double total = 0;
  for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
    const RowEnclosure e = enclose_row(p, row, 256);
    for (std::size_t c = 0; c < p.Ev; ++c) total += dout[output_index(p, row, c)] * (e.fine[c].head + e.fine[c].tail);
  }
  return total;
}

// The central difference of the loss in one input element, step 2^-20 (exact on values k/8).
double central_difference(TensorProblem p, std::vector<double> TensorProblem::*tensor, std::size_t n,
                          const std::vector<double>& dout) {
  constexpr double kStep = 0x1p-20;
  const double x = (p.*tensor)[n];
  (p.*tensor)[n] = x + kStep;
  const double up = loss(p, dout);
  (p.*tensor)[n] = x - kStep;
  return (up - loss(p, dout)) / (2 * kStep);
}

TEST(TensorBackward, GradientsAreTheForwardsDerivatives) {
  const TensorProblem p = problem(true, 4);
  const std::vector<double> dout = upstream(p, 14);
  const GradientEnclosure g = enclose_gradients(p, dout);
  // Every element of a few rows and keys, GQA's shared kv heads included (error O(step²) ~ 1e-11).
  for (std::size_t n = 0; n < p.query.size(); n += 7)
    EXPECT_NEAR(g.dq[n].head, central_difference(p, &TensorProblem::query, n, dout), 1e-8) << "dq[" << n << "]";
  for (std::size_t n = 0; n < p.key.size(); n += 5)
    EXPECT_NEAR(g.dk[n].head, central_difference(p, &TensorProblem::key, n, dout), 1e-8) << "dk[" << n << "]";
  for (std::size_t n = 0; n < p.value.size(); n += 3)
    EXPECT_NEAR(g.dv[n].head, central_difference(p, &TensorProblem::value, n, dout), 1e-8) << "dv[" << n << "]";
  // The additive mask's (summed over the batch it broadcasts across); a -inf element's is 0.
  std::size_t finite = 0;
  for (std::size_t n = 0; n < p.mask.size(); n += 2) {
    if (p.mask[n] == -HUGE_VAL) {
      EXPECT_EQ(g.dmask[n].head, 0.0) << "dmask[" << n << "]";
      continue;
    }
    ++finite;
    EXPECT_NEAR(g.dmask[n].head, central_difference(p, &TensorProblem::mask, n, dout), 1e-8) << "dmask[" << n << "]";
  }
  EXPECT_GT(finite, 20u);
}

TEST(TensorBackward, ConservationAndRowsWithoutKeys) {
  const TensorProblem p = problem(false, 5);
  const std::vector<double> dout = upstream(p, 15);
  const GradientEnclosure g = enclose_gradients(p, dout);
  for (std::size_t b = 0; b < p.batch; ++b)
    for (std::size_t kv = 0; kv < p.kv_heads; ++kv) {
      // Σ_j dS_ij = 0 for every row, so Σ_j dK_j = σ Σ_i (Σ_j dS_ij) q_i = 0.
      for (std::size_t c = 0; c < p.E; ++c) {
        double sum = 0, radius = 0;
        for (std::size_t j = 0; j < p.S; ++j) {
          const FineEnclosure& x = g.dk[tensor_index(p, p.kv_heads, p.S, p.E, b, kv, j, c)];
          sum += x.head, radius += x.radius;
        }
        EXPECT_NEAR(sum, 0, 1e-14 + radius) << "b " << b << " kv " << kv << " c " << c;
      }
      // Σ_j P_ij = 1, so Σ_j dV_j = Σ over the group's rows with keys of dO_i.
      for (std::size_t c = 0; c < p.Ev; ++c) {
        double sum = 0, expected = 0;
        for (std::size_t j = 0; j < p.S; ++j) sum += g.dv[tensor_index(p, p.kv_heads, p.S, p.Ev, b, kv, j, c)].head;
        for (std::size_t h = 0; h < p.q_heads; ++h) {
          if (kv_head_of(p, h) != kv) continue;
          for (std::size_t i = 0; i < p.L; ++i) {
            if (row_has_keys(p, (b * p.q_heads + h) * p.L + i)) expected += dout[tensor_index(p, p.q_heads, p.L, p.Ev, b, h, i, c)];
          }
        }
        EXPECT_NEAR(sum, expected, 1e-14) << "b " << b << " kv " << kv << " c " << c;
      }
    }
  // Query 2 of head 1 sees no key: its dQ row is exactly zero.
  for (std::size_t b = 0; b < p.batch; ++b)
    for (std::size_t c = 0; c < p.E; ++c) {
      const FineEnclosure& x = g.dq[tensor_index(p, p.q_heads, p.L, p.E, b, 1, 2, c)];
      EXPECT_EQ(x.head, 0);
      EXPECT_EQ(x.radius, 0);
    }
  // Keys j >= 5 of batch item 1 are masked by its key length: dK = dV = 0 exactly.
  for (std::size_t kv = 0; kv < p.kv_heads; ++kv)
    for (std::size_t j = 5; j < p.S; ++j) {
      EXPECT_EQ(g.dk[tensor_index(p, p.kv_heads, p.S, p.E, 1, kv, j, 0)].head, 0);
      EXPECT_EQ(g.dv[tensor_index(p, p.kv_heads, p.S, p.Ev, 1, kv, j, 1)].radius, 0);
    }
}

TEST(TensorBackward, BadDoutIsNamed) {
  const TensorProblem p = problem(false, 6);
  std::vector<double> dout = upstream(p, 16);
  dout.pop_back();
  const auto short_dout = validate_dout(p, dout);
  ASSERT_FALSE(short_dout.ok());
  EXPECT_EQ(short_dout.error().message.rfind("dout: expected 80 values", 0), 0u) << short_dout.error().message;
  dout.push_back(std::nan(""));
  const auto nan_dout = validate_dout(p, dout);
  ASSERT_FALSE(nan_dout.ok());
  EXPECT_NE(nan_dout.error().message.find("is NaN"), std::string::npos) << nan_dout.error().message;
  EXPECT_THROW((void)enclose_gradients(p, dout), ContractError);
}

}  // namespace
}  // namespace attn::verify
