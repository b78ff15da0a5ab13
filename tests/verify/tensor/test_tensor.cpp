// The tensor problem (PyTorch SDPA semantics), its exact oracle against closed forms, and
// certify_tensor's verdicts on hand-made outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor/tensor_oracle.hpp"

namespace attn::verify {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A problem with values k/8, |k| <= 16: exact in every format, so any dtype is valid.
TensorProblem random_problem(std::size_t batch, std::size_t q_heads, std::size_t kv_heads, std::size_t L,
                             std::size_t S, std::size_t E, std::size_t Ev, std::uint64_t seed) {
  TensorProblem p;
  p.batch = batch, p.q_heads = q_heads, p.kv_heads = kv_heads, p.L = L, p.S = S, p.E = E, p.Ev = Ev;
  std::mt19937_64 random(seed);
  const auto fill = [&](std::vector<double>& v, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) v.push_back(static_cast<double>(static_cast<int>(random() % 33) - 16) / 8);
  };
  fill(p.query, batch * q_heads * L * E);
  fill(p.key, batch * kv_heads * S * E);
  fill(p.value, batch * kv_heads * S * Ev);
  return p;
}

std::vector<bool> visible(const TensorProblem& p, std::size_t b, std::size_t h, std::size_t i) {
  std::vector<bool> out;
  for (std::size_t j = 0; j < p.S; ++j) out.push_back(takes_part(p, b, h, i, j));
  return out;
}

TEST(TensorSemantics, BooleanMaskTrueTakesPart) {
  TensorProblem p = random_problem(1, 1, 1, 2, 3, 1, 1, 1);
  p.mask_kind = TensorMask::boolean;
  p.mask_shape = {2, 3};
  p.mask = {1, 0, 1, 0, 0, 1};
  EXPECT_EQ(visible(p, 0, 0, 0), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(visible(p, 0, 0, 1), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(additive_bias(p, 0, 0, 0, 0), 0.0);
}

TEST(TensorSemantics, AdditiveMaskMinusInfExcludesAndAddsToScaledScores) {
  TensorProblem p = random_problem(1, 1, 1, 1, 3, 1, 1, 2);
  p.query = {1}, p.key = {1, 1, 1}, p.value = {0, 1, 2}, p.scale = 0.5;
  p.mask_kind = TensorMask::additive;
  p.mask_shape = {1, 3};
  p.mask = {0, -kInf, 1};
  EXPECT_EQ(visible(p, 0, 0, 0), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(additive_bias(p, 0, 0, 0, 2), 1.0);
  // Scores 0.5 and 1.5: the bias is added after the scale, so the weights are 1/(1+e) and e/(1+e).
  const RowEnclosure e = enclose_row(p, 0, 128);
  const long double w2 = std::exp(1.0L) / (1 + std::exp(1.0L));
  EXPECT_NEAR(e.out[0].lo, static_cast<double>(2 * w2), 1e-15);
  EXPECT_LE(e.scores[1].lo, 1.5);
  EXPECT_GE(e.scores[1].hi, 1.5);
}

TEST(TensorSemantics, MaskBroadcastsFromRanks2To4) {
  TensorProblem p = random_problem(2, 2, 1, 2, 2, 1, 1, 3);
  p.mask_kind = TensorMask::boolean;
  p.mask_shape = {2, 1, 2};  // [Hq, 1, S]: per head, every query alike
  p.mask = {1, 0, 0, 1};
  ASSERT_TRUE(validate(p).ok());
  EXPECT_EQ(visible(p, 1, 0, 1), (std::vector<bool>{true, false}));
  EXPECT_EQ(visible(p, 0, 1, 0), (std::vector<bool>{false, true}));
  p.mask_shape = {2, 1, 1, 2};  // [B, 1, 1, S]
  EXPECT_EQ(visible(p, 0, 1, 1), (std::vector<bool>{true, false}));
  EXPECT_EQ(visible(p, 1, 0, 0), (std::vector<bool>{false, true}));
  p.mask_shape = {1, 1, 2, 2};  // [1, 1, L, S]
  EXPECT_EQ(visible(p, 1, 1, 1), (std::vector<bool>{false, true}));
  p.mask_shape = {3, 1, 2};
  EXPECT_FALSE(validate(p).ok());
}

TEST(TensorSemantics, TopLeftCausalWithMoreKeys) {
  TensorProblem p = random_problem(1, 1, 1, 2, 4, 1, 1, 4);
  p.causal = Causal::top_left;
  EXPECT_EQ(visible(p, 0, 0, 0), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(visible(p, 0, 0, 1), (std::vector<bool>{true, true, false, false}));
}

TEST(TensorSemantics, BottomRightCausalWithMoreKeys) {
  TensorProblem p = random_problem(1, 1, 1, 2, 4, 1, 1, 5);
  p.causal = Causal::bottom_right;  // j <= i + 2
  EXPECT_EQ(visible(p, 0, 0, 0), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(visible(p, 0, 0, 1), (std::vector<bool>{true, true, true, true}));
}

TEST(TensorSemantics, BottomRightCausalWithMoreQueriesEmptiesRows) {
  TensorProblem p = random_problem(1, 1, 1, 4, 2, 1, 1, 6);
  p.causal = Causal::bottom_right;  // j <= i - 2
  EXPECT_EQ(visible(p, 0, 0, 1), (std::vector<bool>{false, false}));
  EXPECT_EQ(visible(p, 0, 0, 2), (std::vector<bool>{true, false}));
  EXPECT_EQ(visible(p, 0, 0, 3), (std::vector<bool>{true, true}));
  EXPECT_TRUE(enclose_row(p, 1, 64).empty);
}

TEST(TensorSemantics, SlidingWindowIsFlashAttentionsBottomRightBand) {
  // flash_attn_func: query i attends to keys [i + S - L - left, i + S - L + right].
  TensorProblem p = random_problem(1, 1, 1, 3, 7, 1, 1, 12);  // S - L = 4
  p.window_left = 2, p.window_right = 1;
  EXPECT_EQ(visible(p, 0, 0, 0), (std::vector<bool>{false, false, true, true, true, true, false}));
  EXPECT_EQ(visible(p, 0, 0, 2), (std::vector<bool>{false, false, false, false, true, true, true}));
  p.window_left = -1;  // unbounded on the left
  EXPECT_EQ(visible(p, 0, 0, 0), (std::vector<bool>{true, true, true, true, true, true, false}));
  p.window_left = 0, p.window_right = 0;  // the diagonal key alone
  EXPECT_EQ(visible(p, 0, 0, 1), (std::vector<bool>{false, false, false, false, false, true, false}));
  // More queries than keys: the band leaves the top rows without keys.
  TensorProblem q = random_problem(1, 1, 1, 6, 3, 1, 1, 13);  // S - L = -3
  q.window_left = 1, q.window_right = 0;
  EXPECT_EQ(visible(q, 0, 0, 2), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(visible(q, 0, 0, 3), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(visible(q, 0, 0, 5), (std::vector<bool>{false, true, true}));
  EXPECT_FALSE(row_has_keys(q, 2));
  EXPECT_TRUE(enclose_row(q, 2, 64).empty);
}

TEST(TensorSemantics, WindowSMinusOneZeroIsExactlyBottomRightCausal) {
  // FlashAttention #1133: window_size = (S - 1, 0) must equal causal=True (bottom-right), for every
  // shape, and a left side beyond S - 1 changes nothing.
  for (std::size_t L : {1, 2, 5, 9})
    for (std::size_t S : {1, 3, 5, 12}) {
      TensorProblem window = random_problem(1, 1, 1, L, S, 1, 1, 14), causal = window;
      window.window_left = static_cast<std::int64_t>(S) - 1, window.window_right = 0;
      causal.causal = Causal::bottom_right;
      TensorProblem wider = window;
      wider.window_left += 100;
      for (std::size_t i = 0; i < L; ++i) {
        EXPECT_EQ(visible(window, 0, 0, i), visible(causal, 0, 0, i)) << "L " << L << " S " << S << " i " << i;
        EXPECT_EQ(visible(wider, 0, 0, i), visible(causal, 0, 0, i)) << "L " << L << " S " << S << " i " << i;
      }
    }
}

TEST(TensorSemantics, WindowCombinesWithCausalMaskAndKeyLengths) {
  TensorProblem p = random_problem(2, 1, 1, 4, 4, 1, 1, 15);
  p.window_left = 1, p.window_right = 2;  // S = L: keys i - 1 .. i + 2
  p.causal = Causal::top_left;            // and j <= i
  p.key_lengths = {4, 2};
  p.mask_kind = TensorMask::boolean, p.mask_shape = {1, 4}, p.mask = {1, 1, 0, 1};
  ASSERT_TRUE(validate(p).ok());
  EXPECT_EQ(visible(p, 0, 0, 3), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(visible(p, 0, 0, 1), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(visible(p, 1, 0, 3), (std::vector<bool>{false, false, false, false}));  // key lengths 2
}

TEST(TensorSemantics, KeyLengthsCombineWithCausalAndMask) {
  TensorProblem p = random_problem(2, 1, 1, 3, 3, 1, 1, 7);
  p.key_lengths = {1, 3};
  p.causal = Causal::top_left;
  p.mask_kind = TensorMask::boolean;
  p.mask_shape = {3};  // rank 1 is not allowed
  EXPECT_FALSE(validate(p).ok());
  p.mask_shape = {1, 3};
  p.mask = {1, 0, 1};
  ASSERT_TRUE(validate(p).ok());
  EXPECT_EQ(visible(p, 0, 0, 2), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(visible(p, 1, 0, 2), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(visible(p, 1, 0, 1), (std::vector<bool>{true, false, false}));
}

TEST(TensorSemantics, GqaQueryHeadReadsItsGroupsKvHead) {
  TensorProblem p = random_problem(1, 6, 2, 1, 2, 2, 2, 8);
  for (std::size_t h = 0; h < 6; ++h) EXPECT_EQ(kv_head_of(p, h), h / 3);
  // Query head 4 with kv head 1 equals a one-head problem holding just those rows.
  TensorProblem single = random_problem(1, 1, 1, 1, 2, 2, 2, 9);
  single.query.assign(p.query.begin() + 4 * 2, p.query.begin() + 5 * 2);
  single.key.assign(p.key.begin() + 4, p.key.end());
  single.value.assign(p.value.begin() + 4, p.value.end());
  const RowEnclosure a = enclose_row(p, 4, 128), b = enclose_row(single, 0, 128);
  for (std::size_t c = 0; c < 2; ++c) EXPECT_EQ(a.fine[c].head, b.fine[c].head);
}

TEST(TensorSemantics, LayoutsHoldTheSameProblem) {
  const TensorProblem p = random_problem(2, 2, 2, 3, 4, 2, 2, 10);
  TensorProblem q = p;
  q.layout = AxisOrder::batch_seq_head;
  const auto permute = [&](const std::vector<double>& from, std::vector<double>& to, std::size_t heads,
                           std::size_t rows, std::size_t width) {
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t c = 0; c < width; ++c)
            to[tensor_index(q, heads, rows, width, b, h, r, c)] = from[tensor_index(p, heads, rows, width, b, h, r, c)];
  };
  permute(p.query, q.query, 2, 3, 2);
  permute(p.key, q.key, 2, 4, 2);
  permute(p.value, q.value, 2, 4, 2);
  EXPECT_EQ(tensor_index(q, 2, 3, 2, 1, 1, 2, 1), ((1 * 3 + 2) * 2 + 1) * 2 + 1);
  for (std::size_t row = 0; row < 12; ++row) {
    const RowEnclosure a = enclose_row(p, row, 128), b = enclose_row(q, row, 128);
    EXPECT_EQ(a.fine[1].head, b.fine[1].head) << "row " << row;
  }
}

TEST(TensorValidate, ErrorsNameTheArgument) {
  const TensorProblem good = random_problem(1, 2, 1, 2, 2, 2, 2, 11);
  ASSERT_TRUE(validate(good).ok());
  const auto message = [](const TensorProblem& p) { return validate(p).ok() ? "" : validate(p).error().message; };
  TensorProblem p = good;
  p.query.pop_back();
  EXPECT_EQ(message(p).rfind("query:", 0), 0u) << message(p);
  p = good, p.kv_heads = 3;
  EXPECT_EQ(message(p).rfind("key:", 0), 0u) << message(p);
  p = good, p.dtype = DType::fp16, p.value[0] = 1 + 0x1p-12;
  EXPECT_EQ(message(p).rfind("value: element (0, 0, 0, 0) of ", 0), 0u) << message(p);
  EXPECT_NE(message(p).find("is not representable in fp16"), std::string::npos) << message(p);
  p = good, p.key[1] = std::nan("");
  EXPECT_EQ(message(p).rfind("key: element (0, 0, 0, 1) of ", 0), 0u) << message(p);  // in the tensor's own shape
  EXPECT_NE(message(p).find("is NaN (inputs must be finite)"), std::string::npos) << message(p);
  p = good, p.scale = kInf;
  EXPECT_EQ(message(p).rfind("scale:", 0), 0u) << message(p);
  p = good, p.key_lengths = {3};
  EXPECT_EQ(message(p).rfind("key_lengths:", 0), 0u) << message(p);
  p = good, p.window_right = -2;
  EXPECT_EQ(message(p).rfind("window_size: the right side must be -1 (unbounded) or at least 0, got -2", 0), 0u)
      << message(p);
  p = good, p.window_left = 0, p.window_right = 0;
  EXPECT_TRUE(validate(p).ok()) << message(p);
  p = good, p.mask_kind = TensorMask::boolean, p.mask_shape = {2, 2}, p.mask = {1, 0, 2, 1};
  EXPECT_EQ(message(p).rfind("attn_mask:", 0), 0u) << message(p);
  p.mask_kind = TensorMask::additive, p.mask = {0, kInf, 0, 0};
  EXPECT_EQ(message(p).rfind("attn_mask:", 0), 0u) << message(p);
}

TEST(TensorRounding, Fp16RangeAndSubnormals) {
  EXPECT_EQ(round_to(DType::fp16, 65504), 65504);                // largest finite, 0x7BFF
  EXPECT_EQ(round_to(DType::fp16, 65519.99), 65504);
  EXPECT_EQ(round_to(DType::fp16, 65520), kInf);                 // tie with 2^16: to even, overflows
  EXPECT_EQ(round_to(DType::fp16, -65520), -kInf);
  EXPECT_EQ(round_to(DType::fp16, 0x1p-24), 0x1p-24);            // smallest subnormal, 0x0001
  EXPECT_EQ(round_to(DType::fp16, 0x1p-25), 0);                  // tie with 0: to even
  EXPECT_EQ(round_to(DType::fp16, 0x1.0000000000001p-25), 0x1p-24);
  EXPECT_EQ(round_to(DType::fp16, 3 * 0x1p-25), 0x1p-23);        // tie between 1 and 2 quanta: 2
  EXPECT_EQ(round_to(DType::fp16, 0x1.ff8p-15), 0x1.ff8p-15);    // largest subnormal, 0x03FF
  EXPECT_EQ(round_to(DType::fp16, 0x1.ffcp-15), 0x1p-14);        // tie: up to the smallest normal (even)
  EXPECT_EQ(round_to(DType::fp16, 1 + 0x1p-11), 1);              // tie: to even
  EXPECT_EQ(round_to(DType::fp16, 1 + 3 * 0x1p-11), 1 + 0x1p-9);
  EXPECT_TRUE(std::signbit(round_to(DType::fp16, -0x1p-30)));    // underflow keeps the sign
  EXPECT_EQ(ulp_of(DType::fp16, 1), 0x1p-10);
  EXPECT_EQ(ulp_of(DType::fp16, 0), 0x1p-24);
}

TEST(TensorRounding, Bf16TiesToEven) {
  EXPECT_EQ(round_to(DType::bf16, 1 + 0x1p-8), 1);
  EXPECT_EQ(round_to(DType::bf16, 1 + 3 * 0x1p-8), 1 + 0x1p-6);
  EXPECT_EQ(round_to(DType::bf16, 1 + 0x1.0000001p-8), 1 + 0x1p-7);
  EXPECT_EQ(round_to(DType::bf16, 0x1.fep127), 0x1.fep127);      // largest finite, 0x7F7F
  EXPECT_EQ(round_to(DType::bf16, 0x1.ffp127), kInf);
  EXPECT_EQ(round_to(DType::bf16, 0x1p-133), 0x1p-133);          // smallest subnormal
  EXPECT_EQ(unit_roundoff(DType::bf16), 0x1p-8);
}

TEST(TensorRounding, Fp32MatchesTheCastAndFp64IsIdentity) {
  std::mt19937_64 random(12);
  for (int k = 0; k < 100000; ++k) {
    const double x = std::ldexp(static_cast<double>(random() >> 11) * 0x1p-53, static_cast<int>(random() % 300) - 150);
    EXPECT_EQ(round_to(DType::fp32, x), static_cast<double>(static_cast<float>(x))) << std::hexfloat << x;
    EXPECT_EQ(round_to(DType::fp64, x), x);
  }
  EXPECT_EQ(round_to(DType::fp32, 0x1.ffffffp127), kInf);
}

TEST(TensorOracle, SingleKeyGivesItsValueExactly) {
  TensorProblem p = random_problem(1, 1, 1, 1, 3, 2, 2, 13);
  p.key_lengths = {1};
  const RowEnclosure e = enclose_row(p, 0, 64);
  ASSERT_EQ(e.keys.size(), 1u);
  for (std::size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(e.out[c].lo, p.value[c]);
    EXPECT_EQ(e.out[c].hi, p.value[c]);
  }
  EXPECT_EQ(e.weights[0].lo, 1);
}

TEST(TensorOracle, EqualScoresGiveTheMeanOfValues) {
  TensorProblem p = random_problem(1, 1, 1, 1, 3, 2, 1, 14);
  p.key = {0.5, 2, 0.5, 2, 0.5, 2};
  p.value = {1, 2, 4};
  const RowEnclosure e = enclose_row(p, 0, 128);
  EXPECT_LE(e.out[0].lo, 7.0 / 3);
  EXPECT_GE(e.out[0].hi, 7.0 / 3);
  EXPECT_LT(e.out[0].hi - e.out[0].lo, 1e-15);
  for (const Interval& w : e.weights) EXPECT_NEAR(w.lo, 1.0 / 3, 1e-30 + 1e-17);
}

TEST(TensorOracle, TwoKeysGiveSigmoidWeights) {
  for (double gap : {0.0, 0.25, 3.0, -7.5, 40.0}) {
    TensorProblem p = random_problem(1, 1, 1, 1, 2, 1, 1, 15);
    p.query = {1}, p.key = {gap, 0}, p.value = {1, 0}, p.scale = 0.75;
    const long double w0 = 1 / (1 + std::exp(-0.75L * static_cast<long double>(gap)));
    const RowEnclosure e = enclose_row(p, 0, 128);
    EXPECT_NEAR(e.fine[0].head, static_cast<double>(w0), 1e-15 * static_cast<double>(w0)) << gap;
    EXPECT_LE(e.weights[0].lo, static_cast<double>(w0) * (1 + 1e-15));
  }
}

TEST(TensorOracle, DefaultScaleIsTheExactInverseRoot) {
  TensorProblem p = random_problem(1, 1, 1, 1, 2, 2, 1, 16);
  p.query = {1, 1}, p.key = {1, 0, 0, 0}, p.value = {1, 0};  // score gap 1/√2
  const long double w0 = 1 / (1 + std::exp(-1 / std::sqrt(2.0L)));
  const RowEnclosure e = enclose_row(p, 0, 128);
  EXPECT_NEAR(e.fine[0].head, static_cast<double>(w0), 1e-16);
  EXPECT_LE(e.scale.lo, static_cast<double>(1 / std::sqrt(2.0L)));
  EXPECT_GE(e.scale.hi, static_cast<double>(1 / std::sqrt(2.0L)));
  EXPECT_EQ(e.abs_dots[0], 1);
}

TEST(TensorOracle, EnclosuresShrinkBelowTheTarget) {
  TensorProblem p = random_problem(1, 1, 1, 1, 8, 4, 3, 17);
  p.query = {1000, -999, 1e-3, 77};  // huge scores: 64 bits leave wide enclosures
  const std::vector<double> targets(3, 1e-40);
  const RowEnclosure coarse = enclose_row(p, 0, 64);
  const RowEnclosure fine = enclose_row(p, 0, targets);
  EXPECT_FALSE(fine.capped);
  EXPECT_GT(fine.bits, 64);
  for (std::size_t c = 0; c < 3; ++c) {
    EXPECT_LE(2 * fine.fine[c].radius, 1e-40);
    EXPECT_LE(fine.fine[c].radius, coarse.fine[c].radius);
  }
  const RowEnclosure capped = enclose_row(p, 0, std::vector<double>(3, 0.0), {64, 256});
  EXPECT_TRUE(capped.capped);
  EXPECT_EQ(capped.bits, 256);
}

TEST(TensorOracle, PlainRowIsCloseInFp64) {
  TensorProblem p = random_problem(1, 2, 1, 3, 5, 4, 3, 18);
  p.dtype = DType::fp64;
  for (std::size_t row = 0; row < 6; ++row) {
    const RowEnclosure e = enclose_row(p, row, 128);
    const std::vector<double> plain = plain_row(p, row, DType::fp64);
    for (std::size_t c = 0; c < 3; ++c) EXPECT_NEAR(plain[c], e.fine[c].head, 1e-14);
  }
}

TEST(TensorOracle, PlainRowInFloatIsEveryOperationRoundedToFp32) {
  // fp32 inputs take plain_row's float path; the same values stored as fp64 take the double path,
  // which rounds every operation with round_to: the results agree bit for bit.
  TensorProblem p = random_problem(2, 2, 1, 4, 37, 9, 5, 19);
  std::mt19937_64 random(19);
  std::normal_distribution<double> normal;
  for (auto* v : {&p.query, &p.key, &p.value}) {
    for (double& x : *v) x = round_to(DType::fp32, std::ldexp(normal(random), static_cast<int>(random() % 9) - 4));
  }
  p.dtype = DType::fp32;
  p.causal = Causal::top_left;
  TensorProblem wide = p;
  wide.dtype = DType::fp64;
  for (std::size_t row = 0; row < 2 * 2 * 4; ++row) {
    const std::vector<double> in_float = plain_row(p, row, DType::fp32), in_double = plain_row(wide, row, DType::fp32);
    for (std::size_t c = 0; c < 5; ++c) EXPECT_EQ(in_float[c], in_double[c]) << row << " " << c;
  }
}

TEST(TensorRounding, FormatConstantsMatchTheRoundingItself) {
  for (DType dtype : {DType::fp64, DType::fp32, DType::fp16, DType::bf16}) {
    const double normal = smallest_normal(dtype), half = half_smallest_subnormal(dtype);
    // Below the normal range the spacing is 2·half (fp64: half itself is the smallest double).
    const double spacing = dtype == DType::fp64 ? half : 2 * half;
    EXPECT_EQ(round_to(dtype, normal), normal) << dtype_name(dtype);
    EXPECT_EQ(round_to(dtype, spacing), spacing) << dtype_name(dtype);
    EXPECT_EQ(round_to(dtype, 3 * spacing / 4), spacing) << dtype_name(dtype);  // rounds up to the subnormal
    EXPECT_EQ(round_to(dtype, 1 + unit_roundoff(dtype) * 2), 1 + unit_roundoff(dtype) * 2) << dtype_name(dtype);
    EXPECT_EQ(round_to(dtype, 1 + unit_roundoff(dtype)), 1.0) << dtype_name(dtype);  // a tie, to even
  }
}

}  // namespace
}  // namespace attn::verify
