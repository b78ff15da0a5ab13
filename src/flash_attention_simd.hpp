// Internal to flash_attention.cpp: the SIMD inner loops of the fast kernel, written once with
// GCC/clang vector extensions and instantiated per instruction set by the dispatch there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "flash_attention.hpp"

namespace attn::flash_detail {

// ---- Vectors. GCC/clang vector extensions: one generic source compiles to SSE2, AVX2 or AVX-512
// depending on the target attribute of the function it is inlined into (see the dispatch below).
template <class T, int W> struct Simd;
template <> struct Simd<float, 4> {
  typedef float V __attribute__((vector_size(16)));
  typedef std::int32_t I __attribute__((vector_size(16)));
};
template <> struct Simd<float, 8> {
  typedef float V __attribute__((vector_size(32)));
  typedef std::int32_t I __attribute__((vector_size(32)));
};
template <> struct Simd<float, 16> {
  typedef float V __attribute__((vector_size(64)));
  typedef std::int32_t I __attribute__((vector_size(64)));
};
template <> struct Simd<double, 2> {
  typedef double V __attribute__((vector_size(16)));
  typedef std::int64_t I __attribute__((vector_size(16)));
};
template <> struct Simd<double, 4> {
  typedef double V __attribute__((vector_size(32)));
  typedef std::int64_t I __attribute__((vector_size(32)));
};
template <> struct Simd<double, 8> {
  typedef double V __attribute__((vector_size(64)));
  typedef std::int64_t I __attribute__((vector_size(64)));
};

#define ATTN_INLINE [[gnu::always_inline]] inline

// s - (+0) is s for every s, -0 included. Only for constants and outside the hot loops: GCC 12
// may expand a broadcast of a run-time value built here as a chain of masked inserts (16 in a
// zmm), so the hot loops (dot_products, accumulate, vector_exp, the exp passes) write their
// operands scalar x vector, which it broadcasts in the caller's ISA (once, or folded as {1to16};
// 2.5x faster in P·V; the exp passes lost 15% of the whole kernel to such splats).
template <class V, class T> ATTN_INLINE V splat(T s) { return s - V{}; }
template <class V, class T> ATTN_INLINE V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class T> ATTN_INLINE void store(T* p, const V& v) { std::memcpy(p, &v, sizeof v); }

// ---- exp for x <= 0: Cody-Waite reduction x = n·ln2 + r, |r| <= ln2/2, a polynomial for e^r and
// 2^n built in the exponent field (AVX-512: x = n·ln2 + j·ln2/16 + r, a table of 2^(j/16) and a
// shorter polynomial; see vector_exp_n). Below `lowest` the result would be subnormal: it is flushed to
// +0 (absolute error < the smallest normal, accounted for in flash_error_bound).
template <class T> struct ExpConstants;
template <> struct ExpConstants<float> {
  static constexpr int bias = 127, mantissa_bits = 23;
  // lowest: ln(2^-126) rounded up; log2e; ln2 split as Cephes expf.c; shifter: t = y + 1.5·2^23
  // rounds y to an integer, kept in t's low bits; then the Cephes expf.c minimax polynomial:
  // e^r = 1 + r + r²·P(r), about 1 ulp on |r| <= ln2/2 (P's coefficients, highest first).
  // Then the softcap's t = e^-z (tanh_exp_n), from [11]: the clamp 18, ln2 rounded to fp32, and
  // the minimax cubic of e^r = 1 + r + r²·P(r) for relative error on |r| <= 0.3469 (1.78u, found by
  // Lawson's algorithm in double and rounded to fp32; highest first).
  static constexpr float table[] = {-87.33654f,      1.44269504088896341f, 0.693359375f,    -2.12194440e-4f,
                                    0x1.8p23f,       1.9875691500e-4f,     1.3981999507e-3f, 8.3334519073e-3f,
                                    4.1665795894e-2f, 1.6666665459e-1f,    5.0000001201e-1f, 18.0f,
                                    0x1.62e430p-1f,  0x1.10621ap-7f,       0x1.572aeep-5f,   0x1.5557b2p-3f,
                                    0x1.fffdfap-2f,
                                    // [17] the table-driven exp (vector_exp_n): 16·log2e, the ln2 split above / 16,
                                    // Taylor's 1/24, 1/6, 1/2, 1, then 2^(j/16) for j = 0..15, each rounded to fp32.
                                    0x1.715476p+4f,  0x1.63p-5f,           -0x1.bd0106p-17f, 1.0f / 24,
                                    1.0f / 6,        0.5f,                 1.0f,
                                    0x1p+0f,         0x1.0b5586p+0f,       0x1.172b84p+0f,   0x1.2387a6p+0f,
                                    0x1.306fe0p+0f,  0x1.3dea64p+0f,       0x1.4bfdaep+0f,   0x1.5ab07ep+0f,
                                    0x1.6a09e6p+0f,  0x1.7a1148p+0f,       0x1.8ace54p+0f,   0x1.9c4918p+0f,
                                    0x1.ae89fap+0f,  0x1.c199bep+0f,       0x1.d5818ep+0f,   0x1.ea4afap+0f,
                                    // [40] the softcap's tanh on |x| <= 1 (tanh_near_zero): P's coefficients,
                                    // lowest first.
                                    -0x1.55553cp-2f, 0x1.110be2p-3f,       -0x1.b96222p-5f,  0x1.600992p-6f,
                                    -0x1.0460c6p-7f, 0x1.2da4fcp-9f,       -0x1.77dd3ap-12f};
  static constexpr float lowest = table[0];
  // The table-driven exp's entries: 2^(j/kSteps) per step j, the constants before them.
  static constexpr int kSteps = 16, kScale = 17, kFirstCoefficient = 20, kLastCoefficient = 23, kTable = 24;
  static constexpr int kStepBits = 4;  // log2 kSteps
  static constexpr int kTanh = 40, kTanhDegree = 6;
};
template <> struct ExpConstants<double> {
  static constexpr int bias = 1023, mantissa_bits = 52;
  // lowest: ln(2^-1022) = -708.3964 rounded up; ln2 split as Cephes exp.c; then Taylor to degree 13
  // (1/13! .. 1/1!, 1): the remainder |r|^14/14!·e^|r| < 6e-18 relative, under u/16.
  static constexpr double table[] = {
      -708.39,          1.4426950408889634074, 6.93145751953125e-1, 1.42860682030941723212e-6, 0x1.8p52,
      1.0 / 6227020800, 1.0 / 479001600,       1.0 / 39916800,      1.0 / 3628800,             1.0 / 362880,
      1.0 / 40320,      1.0 / 5040,            1.0 / 720,           1.0 / 120,                 1.0 / 24,
      1.0 / 6,          0.5,                   1.0,                 1.0,
      // [19] the table-driven exp (vector_exp_n): 16·log2e, the ln2 split above / 16 (Taylor's
      // coefficients are [11, 17] above: 1/7! .. 1/1!), then 2^(j/16) for j = 0..15, each rounded.
      0x1.71547652b82fep+4, 0x1.62e4p-5, 0x1.7f7d1cf79abcap-24,
      0x1p+0, 0x1.0b5586cf9890fp+0, 0x1.172b83c7d517bp+0, 0x1.2387a6e756238p+0,
      0x1.306fe0a31b715p+0, 0x1.3dea64c123422p+0, 0x1.4bfdad5362a27p+0, 0x1.5ab07dd485429p+0,
      0x1.6a09e667f3bcdp+0, 0x1.7a11473eb0187p+0, 0x1.8ace5422aa0dbp+0, 0x1.9c49182a3f090p+0,
      0x1.ae89f995ad3adp+0, 0x1.c199bdd85529cp+0, 0x1.d5818dcfba487p+0, 0x1.ea4afa2a490dap+0};
  static constexpr double lowest = table[0];
  static constexpr int kSteps = 16, kScale = 19, kFirstCoefficient = 11, kLastCoefficient = 17, kTable = 22;
  static constexpr int kStepBits = 4;  // log2 kSteps
};

// `constants`: ExpConstants<T>::table, or a copy of it the compiler cannot see into. The hot loops
// pass the copy (Job::exp_constants): its values are then loaded where they are used, as broadcast
// operands, instead of held in a dozen vector registers across the whole work item, which made GCC
// spill P·V's register tile (bench_attention, fp32 hd 64: P·V ran 1.45x the time of Q·Kᵀ for the
// same FMAs). The same values either way, so the same results.
// Where the vector holds the whole table of 2^(j/W) (AVX-512: 16 floats or 8 doubles) and the
// compiler is GCC (clang checks an asm operand's register size before the AVX-512 entry inlines
// this; its builds, the fuzzers, take the polynomial path), exp is table-driven:
//   x = (16n + j)·ln2/16 + r, e^x = 2^n·2^(j/16)·(1 + q(r)),
// q(r) = r + r²/2 + r³/6 + r⁴/24 (fp64: Taylor to r⁷/7!), for the lanes xc = x >= lowest (the
// others are not clamped: whatever they compute, the final select makes them +0). Its error,
// relative (u = 2^-24, 2^-53):
//  - reduction: t = xc·fl(16·log2e) + 1.5·2^23 rounds to the integer 16n + j in t's low bits
//    (its own rounding only moves which integer: |r| <= 0.50012·ln2/16 = 0.021665); (16n + j)·hi
//    is exact (hi = 0x1.63p-5 has 9 bits, |16n + j| <= 2016 has 11; fp64 hi = 0x1.62e4p-5 has 15
//    and |16n + j| <= 16352 has 14, of 53) and so is xc minus it (both are multiples of ulp(xc)
//    or of hi's last bit, and the difference, below 2^-5, fits in T's digits);
//    r = fl(that - (16n + j)·lo) errs by <= u·|r| (unfused, fl((16n + j)·lo) adds <= 2^-30 =
//    0.016u absolutely, as that product reaches 0.0267) plus the split's error, lo's rounding
//    times 2016: 2.1·10^-10 = 0.004u absolutely (fp64 |hi + lo - ln2/16|·16352: 0.0002u);
//  - q: |q| <= e^0.021665 - 1 = 0.0219; Taylor's remainder < 4.1·10^-11 = 0.001u (fp64
//    r⁸/8!·e^|r| < 0.012u); q's Horner steps and r's rounding err by <= 3.1u·|q| relative:
//    <= 0.07u absolutely, so 1 + q̂ = e^r(1 + ε_q), |ε_q| <= 0.09u (fp64 0.08u);
//  - the table: |fl(2^(j/16)) - 2^(j/16)| <= 0.794u·2^(j/16) (fp64 0.738u), exact at j = 0;
//    2^n joins by an integer add to its exponent field: s = entry·2^n, exact (normal, below);
//  - the result s + s·q̂ is one fused rounding (u), or two: then the product's adds u·|q| <=
//    0.022u while s·q̂ is normal, but near the bottom of the range (n <= -121, fp64 -1018) s·q̂
//    can be subnormal and the two roundings err by up to 2^-150 (fp64 2^-1075) each: 2u/m of
//    the result, m = 2^(j/16)·e^r its significand.
// In all, fused: <= 0.09 + 0.794 + 1 = 1.89u fp32 and 0.08 + 0.738 + 1 = 1.82u fp64 (+ O(u²))
// relative; unfused: 1.91u and 1.84u, and at the bottom ε_q + the entry's own error + 2/m <=
// 2.83u and 2.78u (n = -126, fp64 -1022, at j = 1, m >= 2^(1/16)·e^-0.021665; at j = 0 there
// r > 0, below). GCC fuses at -O2 but not at -O1, the sanitizer build's level. In ulps of the
// result y every case is within kKernelExpUlps = 2 (an error of ε·|y| is ε·m/(2u) ulps; at the
// bottom, the table's and q's part so, plus 1 ulp for the two roundings: <= 1.52 and 1.57 ulps),
// and relative within the 4u (2·kKernelExpUlps·u) that flash_error_bound and fp64's softcap tanh
// assume. Range: x >= lowest gives 16n + j >= -2016 (n >= -126; fp64 -16352, n >= -1022), and
// at that bottom j = 0 and r >= 4.5·10^-6 > 0 (fp64 0.0064), so every s and the result are
// normal. The entry is picked by vpermps from one register of 16 (fp32) or by vpermt2pd from two
// of 8 (fp64), which read only the index's low 4 bits: j. NaN stays NaN (q̂ is NaN), -inf gives +0.
// fp64's 16 entries (instead of 8) let its polynomial stop at r⁷/7!: one FMA less per 8 exps
// (bench_kernel_parts, the fp64 online step: 4-8% faster in 4 alternating runs).
#if defined(__clang__)
template <class V> constexpr bool kTableExp = false;
#else
template <class V> constexpr bool kTableExp = sizeof(V) == 64;
#endif

// exp of N vectors at once: each step over all of them before the next, so that their independent
// dependency chains sit side by side in program order (see online_step).
template <class T, class V, class I, int N>
ATTN_INLINE void vector_exp_n(V (&x)[N], const T* constants = ExpConstants<T>::table) {
  using C = ExpConstants<T>;
  const T* k = constants;
  const T lowest = k[0];
  V t[N], r[N], p[N];
  if constexpr (kTableExp<V>) {
    using Lane = std::remove_cvref_t<decltype(I{}[0])>;
    typedef std::make_unsigned_t<Lane> U __attribute__((vector_size(sizeof(I))));
    // No clamp: a lane below `lowest` (or -inf) may compute garbage (its 2^n wraps the exponent
    // field), and the result's select discards it; the lanes kept compute as they did with one (a
    // max with `lowest`, in the chain of every exp before its first FMA).
    constexpr int kShift = C::kStepBits;
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) {
      t[v] = x[v] * k[C::kScale] + k[4];
      const V n = t[v] - k[4];
      r[v] = (x[v] - n * k[C::kScale + 1]) - n * k[C::kScale + 2];
    }
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) p[v] = r[v] * k[C::kFirstCoefficient] + k[C::kFirstCoefficient + 1];
#pragma GCC unroll 16
    for (int j = C::kFirstCoefficient + 2; j <= C::kLastCoefficient; ++j)
#pragma GCC unroll 8
      for (int v = 0; v < N; ++v) p[v] = p[v] * r[v] + k[j];
    // The table in one vector (fp32) or two (fp64: entries 0-7, then 8-15).
    const V table = load<V>(k + C::kTable);
    V table_high{};
    if constexpr (sizeof(T) == 8) table_high = load<V>(k + C::kTable + 8);
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) {
      const V q = p[v] * r[v];
      V entry;
      if constexpr (sizeof(T) == 4) {
        asm("vpermps %1, %2, %0" : "=v"(entry) : "v"(table), "v"(t[v]));
      } else {
        entry = table;  // lanes whose index has bit 3 set read table_high
        asm("vpermt2pd %2, %1, %0" : "+v"(entry) : "v"(t[v]), "v"(table_high));
      }
      // The add in unsigned lanes: a discarded lane's 2^n (its argument below `lowest`, unclamped)
      // may wrap, which signed lanes must not.
      const I exponent = (__builtin_bit_cast(I, t[v]) >> kShift) << C::mantissa_bits;
      const V scale = __builtin_bit_cast(V, __builtin_bit_cast(U, entry) + __builtin_bit_cast(U, exponent));
      const V e = scale * q + scale;
      x[v] = x[v] < lowest ? V{} : e;
    }
    return;
  }
  V xc[N];  // the polynomial path (SSE2, AVX2, clang builds) keeps its clamp
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) xc[v] = x[v] < lowest ? lowest : x[v];
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) t[v] = xc[v] * k[1] + k[4];
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) {
    const V n = t[v] - k[4];
    r[v] = (xc[v] - n * k[2]) - n * k[3];  // n·ln2_hi is exact: ln2_hi has few bits
  }
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) p[v] = r[v] * k[5] + k[6];
  constexpr int kLast = sizeof(T) == 4 ? 10 : 18;
#pragma GCC unroll 16
  for (int j = 7; j <= kLast; ++j)
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) p[v] = p[v] * r[v] + k[j];
  if constexpr (sizeof(T) == 4) {
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) p[v] = (p[v] * (r[v] * r[v]) + r[v]) + 1.0f;
  }
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) {
    // t's low mantissa bits hold n (two's complement, |n| small): adding the bias and shifting
    // drops everything above the exponent field.
    const I bits = (__builtin_bit_cast(I, t[v]) + C::bias) << C::mantissa_bits;
    const V e = p[v] * __builtin_bit_cast(V, bits);
    x[v] = x[v] < lowest ? V{} : e;
  }
}
template <class T, class V, class I> ATTN_INLINE V vector_exp(const V& x, const T* constants = ExpConstants<T>::table) {
  V v[1] = {x};
  vector_exp_n<T, V, I, 1>(v, constants);
  return v[0];
}

// ---- t = e^-z for the softcap's tanh (z = |2x| >= 0 or NaN). fp64: vector_exp(-z). fp32: n
// rounded as vector_exp does, then a one-step reduction, a cubic and 2^n put in the exponent field
// (four products fewer than vector_exp). tanh needs t's error ε (t(1 + ε)) only through
// 2t|ε|/(1 + t)² <= kKernelExpUlps·u = 2u (the derivation beside Core::softcap_scores):
//  - z is clamped to 18 (NaN kept): e^-18 < 2^-25, so (1 - t)/(1 + t) rounds to 1 either way,
//    and -18·log2e keeps n >= -26 and 2^n normal; no flush, no select;
//  - one step r = -z - n·ln2f, ln2f = fl(ln2), |ln2f - ln2| < 1.91·10^-9, |r| <= 0.34658
//    (n may be off by one from fl(z·log2e)'s rounding). The ln2 error moves t by |n|·1.91·10^-9·t,
//    t <= 1.42·2^n: at most 0.025u of tanh (n = -2). Fused (AVX2, AVX-512) r rounds once, by
//    <= 2^-26 (0.25u of e^r); unfused (SSE2) n·ln2f rounds first (ln2f has 21 bits), by up to
//    2^-20 at n = -26: 16u relative, but only where t <= 1.42·2^-13, so 2t|ε| < 0.01u;
//  - e^r = 1 + r + r²·P(r), P the minimax cubic: 1.78u relative on |r| <= 0.3469; P's own
//    roundings weigh r²P <= 0.068 (0.1u), r²'s and the fused step's <= 0.35u, the final 1 + ...
//    <= u. So |ε| <= 3.6u where n >= -12 and 2t|ε|/(1 + t)² <= 1.8u + 0.03u everywhere.
// Measured over every fp32 z in [0, 18], each way of fusing: |ε| <= 3.60u (fused), 19.6u
// (unfused, n <= -13), 2t|ε|/(1 + t)² <= 1.38u; the bound that matters is KernelTanh's (tests/core).
// In place, z -> t, over N vectors at once (each step over all of them: see vector_exp_n).
template <class T, class V, class I, int N> ATTN_INLINE void tanh_exp_n(V (&z)[N], const T* k) {
  if constexpr (sizeof(T) == 8) {
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) z[v] = -z[v];
    vector_exp_n<T, V, I, N>(z, k);
  } else {
    using C = ExpConstants<T>;
    V t[N], r[N], p[N];
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) {
      const V m = -(z[v] > k[11] ? k[11] : z[v]);
      t[v] = m * k[1] + k[4];
      const V n = t[v] - k[4];
      r[v] = m - n * k[12];
    }
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) p[v] = r[v] * k[13] + k[14];
#pragma GCC unroll 4
    for (int j = 15; j <= 16; ++j)
#pragma GCC unroll 8
      for (int v = 0; v < N; ++v) p[v] = p[v] * r[v] + k[j];
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) {
      p[v] = (p[v] * (r[v] * r[v]) + r[v]) + 1.0f;
      // 2^n added to p's exponent field (p in [0.7, 1.42], n in [-26, 0]: normal, the same value
      // as p·2^n). No product, so none for GCC to fuse with capped's 1 - t and 1 + t either:
      // those stay additions, off the two FMA pipes.
      z[v] = __builtin_bit_cast(V, __builtin_bit_cast(I, p[v]) + (__builtin_bit_cast(I, t[v]) << C::mantissa_bits));
    }
  }
}

// ---- fp32 tanh x for |x| <= 1 (a softcapped score within the cap, |s| <= c) by a polynomial:
// with a = |x|, tanh a = a + a·w·P(w), w = a², P(w) = (tanh(√w)/√w - 1)/w, and P̂ the minimax
// polynomial of degree 6 for tanh's relative error on [0, 1] (Remez), its coefficients rounded to
// nearest in fp32 (ExpConstants<float>::table from kTanh; scripts/tanh-polynomial fits them and
// checks every figure here). Its error, relative to tanh a (u = 2^-24):
//  - approximation: |a(1 + w·P̂(w)) - tanh a| <= α·u·tanh a, α = 0.094: the worst with the rounded
//    coefficients over 20000 points of (0, 1] in 50-digit arithmetic (a polynomial's difference
//    with an analytic function, smooth at that spacing; Remez's own level is 0.078u);
//  - roundings: ŵ = fl(a²) = w(1 + δ1); Horner's steps round once each when fused (twice
//    unfused: the product, then the sum); z = fl(a·ŵ); the result is fl(z·p̂ + a), one rounding
//    fused. Only the correction a·w·P̂ carries the inner roundings, and it is at most
//    ρ = a/tanh a - 1 <= 1/tanh 1 - 1 = 0.313 of tanh a. Its relative error is, to first order,
//    at most (2 + H + D)u: δ1 and z's rounding, H = Σ_k |p_k|·w^k/|P̂| for Horner's (p_k its k-th
//    partial value), D = w·|P̂'|/|P̂| for δ1 seen through P̂; unfused (3 + H' + D)u, the product
//    z·p̂'s rounding and H' = H + Σ_k |p_(k+1)|·w^(k+1)/|P̂| for the products inside Horner. So
//    ρ·(2 + H + D) + 1 <= 2.24u fused and ρ·(3 + H' + D) + 1 <= 2.76u unfused over [0, 1] (both
//    worst at a = 1; 4000 points; a mix of fused and unfused steps lies between). This is loose:
//    δ1 enters z and P̂(ŵ) with opposite signs (P̂ < 0 < P̂'), so |1 + w·P̂'/P̂| = 1 - D would do;
//  - in all <= 2.33u fused and 2.85u unfused, + O(u²) (about 10^-6 u): within
//    kKernelTanhNearZeroUlps = 3, relative. Below the normal range ŵ or z errs by <= 2^-150
//    absolutely and by less than a³ (they underflow only when a³ < 2^-126): times |P̂| < 1/3, at
//    most min(a², 2^-150/a)/3 <= 2^-101 relative to tanh a, under the O(u²) term.
// fl(a²) <= 1 exactly when a <= 1 (1's successor 1 + 2u squares to above 1 + 4u, which rounds to
// 1 + 4u), so a test of ŵ <= 1 selects a <= 1 exactly. In place over N vectors, x -> tanh x, from
// x and w = fl(x²): the steps are odd in x (a = |x| above), but for x = -0 the sum gives +0.
template <class T, class V, int N> ATTN_INLINE void tanh_near_zero(V (&x)[N], const V (&w)[N], const T* k) {
  static_assert(std::is_same_v<T, float>, "fp64 takes the exp path (capped)");
  using C = ExpConstants<T>;
  V p[N];
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) p[v] = w[v] * k[C::kTanh + C::kTanhDegree] + k[C::kTanh + C::kTanhDegree - 1];
#pragma GCC unroll 16
  for (int j = C::kTanhDegree - 2; j >= 0; --j)
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) p[v] = p[v] * w[v] + k[C::kTanh + j];
#pragma GCC unroll 8
  for (int v = 0; v < N; ++v) x[v] = (x[v] * w[v]) * p[v] + x[v];
}

// Whether any bit of an integer vector is set. Never from a vector comparison: with AVX-512F alone
// (no DQ) GCC cannot turn a comparison's mask register into a vector and splits it into scalar
// compares, 16 per vector. With GCC, one test into the flags: vptestmq and kortestw (AVX-512F) for a
// 512-bit vector, vptest (AVX) for a 256-bit one; otherwise the words OR'd in general registers
// (GCC extracts a 512-bit vector's 8 words in 18 instructions, a tenth of a softcap's online step).
// asm, as quotient's vrcp14ps: the caller's target allows the instruction, the template's does not.
template <class I> ATTN_INLINE bool any_bit(const I& m) {
#if !defined(__clang__)
  if constexpr (sizeof(I) == 64) {
    bool any;
    asm("vptestmq %1, %1, %%k7\n\tkortestw %%k7, %%k7" : "=@ccnz"(any) : "v"(m) : "k7");
    return any;
  } else if constexpr (sizeof(I) == 32) {
    bool any;
    asm("vptest %1, %1" : "=@ccnz"(any) : "x"(m));
    return any;
  }
#endif
  std::uint64_t words[sizeof(I) / 8], any = 0;
  std::memcpy(words, &m, sizeof m);
  for (std::uint64_t word : words) any |= word;
  return any != 0;
}

// ---- Horizontal max and sum of a vector by halving (log2 W steps instead of a chain of W): the
// sum's order is one of the "any order" the error bounds allow (flash_error_bound, Step 4).
// `op` combines two vectors (or two scalars) lane by lane.
template <class T, int W, class Op> ATTN_INLINE T reduce(typename Simd<T, W>::V v, const Op& op) {
  if constexpr (W * sizeof(T) > 16) {
    using H = typename Simd<T, W / 2>::V;
    H lo, hi;
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
    return reduce<T, W / 2>(op(lo, hi), op);
  } else {
    T x = v[0];
    for (int l = 1; l < W; ++l) x = op(x, v[l]);
    return x;
  }
}
template <class T, int W> ATTN_INLINE T reduce_max(typename Simd<T, W>::V v) {
  return reduce<T, W>(v, [](const auto& a, const auto& b) { return b > a ? b : a; });
}
template <class T, int W> ATTN_INLINE T reduce_sum(typename Simd<T, W>::V v) {
  return reduce<T, W>(v, [](const auto& a, const auto& b) { return a + b; });
}

// ---- One call, as the workers see it.
struct Strides {
  std::size_t batch = 0, head = 0, row = 0;
};

inline Strides strides_of(TensorLayout layout, std::size_t heads, std::size_t rows, std::size_t dim) {
  if (layout == TensorLayout::batch_head_seq) return {heads * rows * dim, rows * dim, dim};
  return {rows * heads * dim, dim, heads * dim};
}

// A mask argument (bits or additive values) as rows of m keys: row (b, h, i) starts at
// b·batch + h·head + i·m; a stride is 0 where the mask is shared (see FlashOptions).
template <class E> struct MaskView {
  const E* data = nullptr;
  std::size_t batch = 0, head = 0;
  const E* row(std::size_t b, std::size_t h, std::size_t i, std::size_t m) const {
    return data == nullptr ? nullptr : data + b * batch + h * head + i * m;
  }
};

template <class T> struct Job {
  const T* Q = nullptr;
  const T* K = nullptr;
  const T* V = nullptr;
  T* out = nullptr;
  FlashShape shape;
  Strides q, k, v, o;
  CausalAlignment causal = CausalAlignment::none;
  const std::size_t* key_lengths = nullptr;
  std::int64_t window_left = -1, window_right = -1;  // FlashOptions' sliding window
  const T* alibi = nullptr;                           // ALiBi slopes in T: [Hq], or [B, Hq] when alibi_per_batch
  bool alibi_per_batch = false;
  T softcap = 0;                                      // FlashOptions' softcap c in T, 0 off
  T softcap_factor = 0;                               // fl(scale / softcap) if normal, else 0 (softcap_scores)
  const T* sinks = nullptr;                           // sink logits in T, [Hq]
  const std::size_t* cu_q = nullptr;                  // packed sequences: B + 1 query offsets, or null
  const std::size_t* cu_k = nullptr;                  // and key offsets
  MaskView<std::uint8_t> bits;
  MaskView<T> bias;
  // Two ways to form exp's argument. Raw (positive scale, no bias, softcap or sink): the running
  // max is over raw dot products and the argument is (dot - max)·scale. Scaled (a bias, softcap,
  // a sink, or a scale <= 0, where the raw max is not the max score): scores dot·scale (capped)
  // + bias are formed first, the max is over them and the argument is score - max (exp_scale = 1,
  // an exact multiplication).
  bool scaled_scores = false;
  const T* exp_constants = nullptr;          // a copy of ExpConstants<T>::table (vector_exp)
  T score_scale = 1;                         // the scale, applied before the max (scaled form)
  T exp_scale = 1;                           // the scale, applied to the difference (raw form); 1 in the scaled form
  std::size_t query_tile = 0, key_tile = 0;  // key_tile is a multiple of the micro-tile width
  std::size_t head_dim_v_padded = 0;         // a multiple of the micro-tile width
  std::size_t items() const { return shape.batch * shape.q_heads * ((shape.n + query_tile - 1) / query_tile); }
};

// The queries and keys of batch item b: the call's n and m, or its packed sequence's lengths.
struct Extent {
  std::size_t n = 0, m = 0;
};
template <class T> ATTN_INLINE Extent extent_of(const Job<T>& job, std::size_t b) {
  if (job.cu_q == nullptr) return {job.shape.n, job.shape.m};
  return {job.cu_q[b + 1] - job.cu_q[b], job.cu_k[b + 1] - job.cu_k[b]};
}

// Keys key_begin(job, e, i) <= j < key_end(job, e, b, i) can take part in query i of batch item b
// (of extent e): key padding, the causal rule and the window, decided here and nowhere else (the
// masks then exclude single keys). Top-left keeps j <= i, bottom-right j <= i + m - n; the window
// keeps i + m - n - left <= j <= i + m - n + right. Signed arithmetic: sizes fit in memory, far
// below 2^62. Both ends grow with i.
template <class T>
ATTN_INLINE std::size_t key_end(const Job<T>& job, const Extent& e, std::size_t b, std::size_t i) {
  const std::int64_t centre =
      static_cast<std::int64_t>(i) + static_cast<std::int64_t>(e.m) - static_cast<std::int64_t>(e.n);
  std::int64_t end = static_cast<std::int64_t>(job.key_lengths != nullptr ? job.key_lengths[b] : e.m);
  if (job.causal == CausalAlignment::top_left) end = std::min(end, static_cast<std::int64_t>(i) + 1);
  if (job.causal == CausalAlignment::bottom_right) end = std::min(end, centre + 1);
  if (job.window_right >= 0) end = std::min(end, centre + job.window_right + 1);
  return static_cast<std::size_t>(std::max<std::int64_t>(end, 0));
}
template <class T> ATTN_INLINE std::size_t key_begin(const Job<T>& job, const Extent& e, std::size_t i) {
  if (job.window_left < 0) return 0;
  const std::int64_t first = static_cast<std::int64_t>(i) + static_cast<std::int64_t>(e.m) -
                             static_cast<std::int64_t>(e.n) - job.window_left;
  return static_cast<std::size_t>(std::max<std::int64_t>(first, 0));
}

// Register tile of both products: Core::kRows query rows x kVectors SIMD vectors. With 16 vector
// registers (SSE, AVX2) 4 rows make 8 accumulators, leaving room for the loads and the broadcast;
// AVX-512's 32 registers hold 8 rows (16 accumulators), which halves the key loads per FMA.
constexpr std::size_t kMaxRows = 8;
constexpr std::size_t kMaxLanes = 16;  // lanes of the widest vector: 16 floats (AVX-512)
constexpr std::size_t kVectors = 2;

constexpr std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

// Per-thread scratch, 64-byte aligned (one cache line; a full AVX-512 vector). One buffer serves
// call after call (fit), so that a call allocates nothing when the last one's scratch was as large.
template <class T> class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(const Job<T>& job) { fit(job); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { ::operator delete (data_, std::align_val_t{64}); }

  // Lays the parts out for `job`, in the buffer it has when that is large enough, else in a new
  // one (std::bad_alloc leaves the scratch as it was). Contents are not kept: every part is written
  // before it is read within a work item.
  void fit(const Job<T>& job) {
    const std::size_t rows = round_up(job.query_tile, kMaxRows), dv = job.head_dim_v_padded;
    const std::size_t sizes[] = {
        job.shape.head_dim_k * job.key_tile, job.key_tile * dv, kMaxRows * job.key_tile, rows * dv, rows,
        rows * kMaxLanes};
    std::size_t total = 0;
    for (std::size_t s : sizes) total += round_up(s, 64 / sizeof(T));
    if (total > capacity_) {
      T* fresh = static_cast<T*>(::operator new (total * sizeof(T), std::align_val_t{64}));
      ::operator delete (data_, std::align_val_t{64});
      data_ = fresh, capacity_ = total;
    }
    written.resize(rows);
    T** parts[] = {&keys_t, &values, &scores, &acc, &row_max, &row_sum};
    T* next = data_;
    for (std::size_t i = 0; i < std::size(sizes); ++i) *parts[i] = next, next += round_up(sizes[i], 64 / sizeof(T));
  }
  std::size_t bytes() const { return capacity_ * sizeof(T) + written.capacity(); }
  // Frees the buffer (allocates nothing, throws nothing); fit lays out a new one.
  void release() noexcept {
    ::operator delete (data_, std::align_val_t{64});
    data_ = keys_t = values = scores = acc = row_max = row_sum = nullptr, capacity_ = 0;
    std::vector<unsigned char>().swap(written);
  }

  T* keys_t = nullptr;   // d_k x key_tile: the key tile transposed, zero past its last key
  T* values = nullptr;   // key_tile x head_dim_v_padded, zero past head_dim_v
  T* scores = nullptr;   // kMaxRows x key_tile: scores, then unnormalised weights
  T* acc = nullptr;      // query rows x head_dim_v_padded: Σ weight·V, rescaled online
  T* row_max = nullptr;  // running max of raw dot products
  T* row_sum = nullptr;  // running Σ weight, kMaxLanes lane sums per row (the first W used)
  std::vector<unsigned char> written;  // per register tile of rows (at its first row): acc holds its sums

 private:
  T* data_ = nullptr;
  std::size_t capacity_ = 0;  // elements of T at data_
};

// ---- The kernel for one (T, vector width): inlined into a target-specific entry per ISA.
// Parts: the struct whose static pack, dot_products and accumulate run_item calls, this Core's own
// compiled out of line for the entry's ISA (flash_attention.cpp), so that GCC allocates each hot
// loop's registers apart from the rest of run_item; void where run_item is not used.
template <class T, int W, class Parts = void> struct Core {
  using V = typename Simd<T, W>::V;
  using I = typename Simd<T, W>::I;
  using Lane = std::remove_cvref_t<decltype(I{}[0])>;  // I's element: T's bits as a signed integer
  static constexpr std::size_t kTile = kVectors * W;  // columns of one register tile
  static constexpr std::size_t kRows = W * sizeof(T) == 64 ? kMaxRows : 4;  // rows of one register tile

  // keys_t holds K[j0 + jj][c] at key_at(dk, c, jj): register tile by register tile (kTile keys),
  // each tile's d_k rows of kTile values one after another, so that dot_block reads one contiguous
  // run of memory (in a d_k x key_tile matrix its rows, 2 KiB apart in fp64 at 256 keys, fell into
  // a few of L1's sets). Columns past `cols` are zero (they are masked later).
  ATTN_INLINE static std::size_t key_at(std::size_t dk, std::size_t c, std::size_t jj) {
    return jj / kTile * (dk * kTile) + c * kTile + jj % kTile;
  }
  // One stage of an in-register W x W transpose (rows as vectors): for each pair of rows (i, i + b)
  // with i & b == 0, the top row's lanes l & b and the bottom row's lanes l & ~b trade places.
  // Stages b = W/2, ..., 1 transpose the whole block: W·log2(W) two-source permutes.
  template <std::size_t b, std::size_t... L>
  ATTN_INLINE static void transpose_stage(V* rows, std::index_sequence<L...>) {
    for (std::size_t i = 0; i < static_cast<std::size_t>(W); ++i) {
      if (i & b) continue;
      const V top = rows[i], bottom = rows[i + b];
      rows[i] = __builtin_shufflevector(top, bottom, ((L & b) ? W + L - b : L)...);
      rows[i + b] = __builtin_shufflevector(top, bottom, ((L & b) ? W + L : L + b)...);
    }
  }
  template <std::size_t b> ATTN_INLINE static void transpose(V* rows) {
    if constexpr (b >= 1) {
      transpose_stage<b>(rows, std::make_index_sequence<W>{});
      transpose<b / 2>(rows);
    }
  }

  // K's and V's rows [from, to) (each `length` elements, `stride` apart) requested into the cache:
  // pack reads the caller's rows once, from L3 or memory, and its loads had waited on them (perf,
  // fp64 causal n = 512 hd 64: 8% of the call in pack, most on two loads).
  static constexpr std::size_t kPrefetchRows = 16;
  ATTN_INLINE static void prefetch_rows(const T* base, std::size_t stride, std::size_t length, std::size_t from,
                                        std::size_t to) {
    for (std::size_t r = from; r < to; ++r)
      for (std::size_t c = 0; c < length; c += 64 / sizeof(T)) __builtin_prefetch(base + r * stride + c);
  }

  ATTN_INLINE static void pack(const Job<T>& job, const T* k, const T* v, std::size_t cols, Scratch<T>& s) {
    const std::size_t dk = job.shape.head_dim_k, dv = job.shape.head_dim_v, dvp = job.head_dim_v_padded;
    const std::size_t cols_padded = round_up(cols, kTile);
    // K's W x W blocks transposed in registers (a scalar store per element took 5% of a call at
    // n = 2048, hd 64, fp32; in fp64, bench_kernel_parts: 28.7 -> 22 ns per key at hd 64, once
    // pack and the products were out of line, where GCC no longer spilled P·V's tile for it); the
    // keys and dimensions past the last whole block one by one.
    const std::size_t key_blocks = cols / W * W, dim_blocks = dk / W * W;
    for (std::size_t j = 0; j < key_blocks; j += W) {
      prefetch_rows(k, job.k.row, dk, j + kPrefetchRows, std::min(j + kPrefetchRows + W, cols));
      for (std::size_t c = 0; c < dim_blocks; c += W) {
        V block[W];
        for (std::size_t r = 0; r < static_cast<std::size_t>(W); ++r) block[r] = load<V>(k + (j + r) * job.k.row + c);
        transpose<static_cast<std::size_t>(W) / 2>(block);
        for (std::size_t r = 0; r < static_cast<std::size_t>(W); ++r)
          store(s.keys_t + key_at(dk, c + r, j), block[r]);
      }
    }
    for (std::size_t jj = 0; jj < cols; ++jj) {
      const T* row = k + jj * job.k.row;
      for (std::size_t c = jj < key_blocks ? dim_blocks : 0; c < dk; ++c) s.keys_t[key_at(dk, c, jj)] = row[c];
    }
    // Copied even when V's rows need no padding: read in place (unaligned, from the caller's
    // buffer) they cost the kernel a fifth of its speed (bench_attention, fp32 n = 2048, hd 64).
    // Whole vectors when dv needs no padding (a multiple of kTile): memcpy's call per row took 2%
    // of an fp64 causal call at n = 512, hd 64 (perf).
    if (dv == dvp) {
      for (std::size_t jj = 0; jj < cols; ++jj) {
        prefetch_rows(v, job.v.row, dv, jj + kPrefetchRows, std::min(jj + kPrefetchRows + 1, cols));
        for (std::size_t c = 0; c < dv; c += W) store(s.values + jj * dvp + c, load<V>(v + jj * job.v.row + c));
      }
    } else {
      for (std::size_t jj = 0; jj < cols; ++jj) {
        std::memcpy(s.values + jj * dvp, v + jj * job.v.row, dv * sizeof(T));
        std::fill(s.values + jj * dvp + dv, s.values + (jj + 1) * dvp, T(0));
      }
    }
    for (std::size_t c = 0; c < dk; ++c)
      for (std::size_t jj = cols; jj < cols_padded; ++jj) s.keys_t[key_at(dk, c, jj)] = T(0);
  }

  // scores[r][jj] = Q[row r]·K[j0 + jj] for from <= jj < cols (from a multiple of kTile, cols of W);
  // the columns before `from` are left as they were. A last block of W columns (a diagonal tile's
  // rows need no more) takes one vector per row.
  template <std::size_t kBlock>
  ATTN_INLINE static void dot_block(const Job<T>& job, const T* const* q_rows, std::size_t jb, Scratch<T>& s) {
    const std::size_t dk = job.shape.head_dim_k;
    V acc[kRows][kBlock] = {};
    const T* keys = s.keys_t + key_at(dk, 0, jb);
    for (std::size_t c = 0; c < dk; ++c) {
      V key[kBlock];
#pragma GCC unroll 4
      for (std::size_t u = 0; u < kBlock; ++u) key[u] = load<V>(keys + c * kTile + u * W);
#pragma GCC unroll 8
      for (std::size_t r = 0; r < kRows; ++r) {
        const T qv = q_rows[r][c];  // scalar x vector: the broadcast is emitted in the caller's ISA
#pragma GCC unroll 4
        for (std::size_t u = 0; u < kBlock; ++u) acc[r][u] += qv * key[u];
      }
    }
    for (std::size_t r = 0; r < kRows; ++r)
      for (std::size_t u = 0; u < kBlock; ++u) store(s.scores + r * job.key_tile + jb + u * W, acc[r][u]);
  }
  ATTN_INLINE static void dot_products(const Job<T>& job, const T* const* q_rows, std::size_t from, std::size_t cols,
                                       Scratch<T>& s) {
    std::size_t jb = from;
    for (; jb + kTile <= cols; jb += kTile) dot_block<kVectors>(job, q_rows, jb, s);
    if (jb < cols) dot_block<1>(job, q_rows, jb, s);
  }

  // Softcap: scores[jj] = c·tanh(x) for from <= jj < to (whole vectors), x = fl(dot·k) with
  // k = job.softcap_factor = fl(σ̂/ĉ) (σ̂, ĉ the scale and cap in T), or x = fl(fl(dot·σ̂)/ĉ) when
  // that k is not a normal number. Both are dot·(σ̂/ĉ)(1 + δ1)(1 + δ2), |δ| <= u: the band's model
  // (the score's rounding, then the division's); k is one rounding of σ̂/ĉ, computed in double and
  // converted (correctly rounded in fp32 too: double rounding of a quotient is innocuous with
  // 53 >= 2·24 + 2 bits), and a normal k keeps δ1 relative (<= u/(1 - u) when k = the smallest
  // normal was rounded up from below it; the band's γ's absorb that). A subnormal fl(dot·k) errs
  // by <= 2^-150 (fp32; 2^-1075 fp64) absolutely, c·2^-150 in score units, as the division's
  // does: inside the absolute slack below. The fold turns a division per score into a product (a
  // 512-bit division issues once every 5-10 cycles). Then (capped) tanh(x) = sign(x)·tanh|x|:
  // in fp32 for |x| <= 1 a polynomial, relative error <= 2.85u (tanh_near_zero, derived there);
  // beyond, and everywhere in fp64, (1 - t)/(1 + t), t = exp(-2|x|), 2|x| = |x| + |x| exact (an
  // overflow to +inf gives ±c, off by < u; tanh_exp_n: in fp64 kernel_exp, where an argument
  // below exp's range gives t = 0 and tanh 1; in fp32 |2x| clamped at 18). Both within the band's
  // model (verify/tensor_band.cpp, Step 2's softcap: tanh_ulps u relative plus (exp_ulps + 1.5) u
  // absolute); the second's error:
  //  - t's relative error ε moves (1 - t)/(1 + t) by at most 2t|ε|/(1 + t)² absolutely (t in
  //    [0, 1]), <= η/2 = kKernelExpUlps·u for |ε| <= η = 2·kKernelExpUlps·u (kernel_exp's, in
  //    fp64; max at t = 1); in fp32 tanh_exp_n bounds 2t|ε|/(1 + t)² itself, by 1.83u < 2u; t
  //    flushed to 0 below exp's range (fp64) errs by < 2e^-708, t clamped at e^-18 (fp32) by
  //    nothing (both quotients round to 1);
  //  - t >= 1/2: 1 - t is exact (Sterbenz) and only 1 + t and the quotient round: 2u relative;
  //    otherwise 1 - t rounds too: 3u relative (plus O(u²) both);
  //  - the quotient q = a/d (a = 1 - t, d = 1 + t in [1, 2]) is a division, correctly rounded,
  //    except in fp32 on AVX-512, where a 512-bit division issues once every 5-10 cycles: there
  //    y = vrcp14ps(d) (|y·d - 1| = |ε| < 2^-14, Intel's and AMD's architectural bound),
  //    q0 = fl(a·y) = a·y(1 + δ0), ρ = fl(a - d·q0) = (a - d·q0)(1 + δρ), q = fl(q0 + y·ρ)
  //    (Markstein's correction). Exactly, with s = ε + δ0 + εδ0, a - d·q0 = -a·s and
  //    q0 + yρ = (a/d)(1 - εs - (1 + ε)s·δρ): relative error ε² + 2|ε|u + u² <= u/16 + 2^-13 u + u²
  //    before the last rounding when ρ's product is fused (GCC contracts both steps), so q errs by
  //    < 1.07u. Unfused, fl(d·q0) adds one more δ3 (the subtraction is then exact by Sterbenz: d·q0
  //    is within 2^-13 of a), so < 2.07u; an unfused last step (fl(y·ρ), then the add) adds
  //    <= (2^-14 + 2u)u, and both bounds hold (a review measured 1.061u and 1.999u worst over
  //    simulated estimates at ±(1 - 2^-10)·2^-14). Normality: t <= 1 (exp of an argument <= 0), so
  //    a is 0 or in [2^-24, 1]; q0 >= 2^-25 and d's ulp is 2^-23, so the exact residual a - d·q0
  //    is a multiple of 2^-71: ρ is 0 or normal, and so is y·ρ;
  //  - so |error| <= (3.01 + q's excess over u)u|tanh| + kKernelExpUlps·u <= 4.07u|tanh| +
  //    kKernelExpUlps·u + O(u²) <= 4u|tanh| + (kKernelExpUlps + 0.08)u (|tanh| <= 1): within the
  //    band's 4 (the default tanh_ulps) relative plus (exp_ulps + 1.5)u absolute while the band's
  //    exp_ulps >= kKernelExpUlps - 1.42 (the defaults leave 1.42u spare, which also holds the
  //    subnormal rounding of x). The product by c is the band's last rounding. kernel_tanh
  //    exposes this for tests (every fp32 in [1/32, 12] and samples of the whole range, at each
  //    SIMD level: at most 0.33 of this bound; on |x| <= 1 at most 1.61u relative without FMA and
  //    1.35u with it, 0.54 of kKernelTanhNearZeroUlps; odd by construction, 1 from |x| = 8.67 on).
  // GCC only: clang checks an asm operand's register size where the template is instantiated,
  // before this Core is inlined into its AVX-512 entry, and refuses a zmm there; clang builds (the
  // fuzzers) divide.
#if defined(__clang__)
  static constexpr bool kReciprocalAsm = false;
#else
  static constexpr bool kReciprocalAsm = true;
#endif
  ATTN_INLINE static V quotient(V a, V d) {
    if constexpr (kReciprocalAsm && std::is_same_v<T, float> && W == 16) {
      V y;
      asm("vrcp14ps %1, %0" : "=v"(y) : "v"(d));  // no target check on asm: this Core runs on AVX-512 only
      const V q0 = a * y;
      const V rho = a - d * q0;
      return q0 + y * rho;
    } else {
      return a / d;
    }
  }
  // c·tanh(x) in place over N vectors. fp32: the polynomial where |x| <= 1 (tanh_near_zero; a
  // score within the cap), and only where some lane of the N vectors lies beyond, (1 - t)/(1 + t)
  // with t = exp(-(a + a)), a = |x| (the doubling is exact; an overflow to +inf gives t = 0 and
  // tanh 1) for the lanes beyond; each lane's value depends on its own x alone, not on its
  // neighbours. fp64: (1 - t)/(1 + t) everywhere: a degree-14 polynomial (scripts/tanh-polynomial
  // --format fp64) was 6% faster with every score within the cap and 28% slower where vectors hold
  // scores on both sides (bench_kernel_parts' online step, softcap 30 and 2, best of 3 alternating
  // runs: 749 against 795 and 1045 against 816 ps per score). Then x's sign is put on the result,
  // so tanh is odd, -0 included.
  static constexpr bool kTanhPolynomial = std::is_same_v<T, float>;
  template <int N> ATTN_INLINE static void capped(V (&x)[N], T c, const T* exp_constants) {
    constexpr Lane one = __builtin_bit_cast(Lane, T(1)), sign = std::numeric_limits<Lane>::min();
    V w[N], r[N];
    bool beyond = true;  // some lane needs the exp path
    if constexpr (kTanhPolynomial) {
      I far{};
#pragma GCC unroll 8
      for (int v = 0; v < N; ++v) {
        w[v] = x[v] * x[v];
        // negative where w > 1 or w is +NaN (w >= 0 or NaN: its bits order as its value); a lane of
        // -NaN (x86's default NaN, kept by x·x) stays on the polynomial, which gives NaN too
        far |= one - __builtin_bit_cast(I, w[v]);
        r[v] = x[v];
      }
      tanh_near_zero<T, V, N>(r, w, exp_constants);
      beyond = any_bit(far & sign);
    }
    if (beyond) {
      V t[N];
#pragma GCC unroll 8
      for (int v = 0; v < N; ++v) {
        const V a = __builtin_bit_cast(V, __builtin_bit_cast(I, x[v]) & ~sign);
        t[v] = a + a;
      }
      tanh_exp_n<T, V, I, N>(t, exp_constants);
#pragma GCC unroll 8
      for (int v = 0; v < N; ++v) {
        const V q = quotient(T(1) - t[v], T(1) + t[v]);
        if constexpr (kTanhPolynomial)
          r[v] = w[v] <= T(1) ? r[v] : q;
        else
          r[v] = q;
      }
    }
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) {
      const I bits = (__builtin_bit_cast(I, r[v]) & ~sign) | (__builtin_bit_cast(I, x[v]) & sign);
      x[v] = __builtin_bit_cast(V, bits) * c;
    }
  }
  // scores[jj] = c·tanh(x) for N vectors from jj (see softcap_scores); their max joins `top`.
  template <int N> ATTN_INLINE static void capped_scores(const Job<T>& job, T* scores, V& top) {
    const T c = job.softcap, k = job.softcap_factor;
    V x[N];
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v)
      x[v] = k != 0 ? load<V>(scores + v * W) * k : load<V>(scores + v * W) * job.score_scale / c;
    capped<N>(x, c, job.exp_constants);
#pragma GCC unroll 8
    for (int v = 0; v < N; ++v) {
      store(scores + v * W, x[v]);
      top = x[v] > top ? x[v] : top;
    }
  }
  // Returns the max of the capped scores it wrote (the tile's max when they are all of it). Four
  // vectors at a time, their chains side by side as in online_step's exps.
  ATTN_INLINE static V softcap_scores(const Job<T>& job, T* scores, std::size_t from, std::size_t to) {
    V top = splat<V>(-std::numeric_limits<T>::infinity());
    std::size_t jj = from;
    for (; jj + 4 * W <= to; jj += 4 * W) capped_scores<4>(job, scores + jj, top);
    for (; jj < to; jj += W) capped_scores<1>(job, scores + jj, top);
    return top;
  }

  // ALiBi: scores[jj] = scores[jj]·pre - slope·|centre - jj| for from <= jj < to (whole vectors;
  // the columns outside [first, limit) are overwritten afterwards; pre is the scale when the scores
  // are still raw dot products, else 1, exact). When every distance is at most 2^digits (all
  // realistic lengths) the distances are exact in T and formed in vectors: T(centre - jj) is exact
  // and so is subtracting 0..W-1. Otherwise (fp32 beyond 2^24 keys) each |d| is converted with its
  // one rounding, as the band's Step 2 allows.
  ATTN_INLINE static void alibi_scores(T* scores, std::size_t from, std::size_t to, T pre, T slope,
                                       std::int64_t centre) {
    constexpr std::int64_t exact = std::int64_t{1} << std::numeric_limits<T>::digits;
    const std::int64_t nearest = centre - static_cast<std::int64_t>(from),
                       farthest = centre - static_cast<std::int64_t>(to) + 1;
    if (std::max(nearest < 0 ? -nearest : nearest, farthest < 0 ? -farthest : farthest) <= exact) {
      V lane{};
      for (int l = 0; l < W; ++l) lane[l] = static_cast<T>(l);
      for (std::size_t jj = from; jj < to; jj += W) {
        const V d = static_cast<T>(centre - static_cast<std::int64_t>(jj)) - lane;
        const V distance = __builtin_bit_cast(V, __builtin_bit_cast(I, d) & std::numeric_limits<Lane>::max());
        store(scores + jj, load<V>(scores + jj) * pre - slope * distance);
      }
      return;
    }
    for (std::size_t jj = from; jj < to; ++jj) {
      const std::int64_t d = centre - static_cast<std::int64_t>(jj);
      scores[jj] = scores[jj] * pre - slope * static_cast<T>(d < 0 ? -d : d);
    }
  }

  // scores[0, N·W) = exp(argument) (see Job), their sum added to `sum`.
  template <int N> ATTN_INLINE static void exp_scores(const Job<T>& job, T* scores, T new_max, V& sum) {
    V x[N];
#pragma GCC unroll 8
    for (int u = 0; u < N; ++u) {
      x[u] = load<V>(scores + u * W) - new_max;
      if (!job.scaled_scores) x[u] *= job.exp_scale;  // scaled: exp_scale is 1, the product would be exact
    }
    vector_exp_n<T, V, I, N>(x, job.exp_constants);
#pragma GCC unroll 8
    for (int u = 0; u < N; ++u) {
      store(scores + u * W, x[u]);
      sum += x[u];
    }
  }

  // One row's part of an online step (see online_step).
  struct RowTile {
    std::size_t first = 0, limit = 0;     // the keys [first, limit) of the tile may take part
    const std::uint8_t* bits = nullptr;   // the mask's bits for the tile's columns, or null
    const T* bias = nullptr;              // the additive mask's values for them, or null
    T slope = 0;                          // ALiBi's slope (0 without)
    std::int64_t centre = 0;              // ALiBi: the column jj of distance 0 (i + m - n - j0)
  };

  // The first half of the online step for one row: masks scores[jj] for start <= jj < first and
  // jj >= limit (and the keys the masks exclude), forms the scores (see Job) and returns their max
  // (-inf when no key takes part). Columns before `start` (a multiple of kTile, the first column
  // dot_products wrote, <= the first of every row of the group that sees a key) are neither read
  // nor written: accumulate starts at or after it. A row with first < start sees no key here
  // (start is the group's least first among rows that do) and is treated as empty at start.
  // ALiBi: the bias -slope·|centre - jj| is formed in T (|d| converted, one product) and added
  // after the mask's.
  ATTN_INLINE static T tile_scores(const Job<T>& job, T* scores, std::size_t start, std::size_t cols,
                                   const RowTile& row) {
    std::size_t first = row.first, limit = row.limit;
    const std::uint8_t* bits = row.bits;
    const T* bias = row.bias;
    const T slope = row.slope;
    const std::int64_t centre = row.centre;
    constexpr T minus_inf = -std::numeric_limits<T>::infinity();
    first = std::min(first, limit);
    if (first < start) first = limit = start;
    V top = splat<V>(minus_inf);
    bool have_top = false;  // the max came with the scores' pass (softcap over a whole tile)
    if (job.scaled_scores) {
      // Before the bits and the -inf of excluded columns: a 0 scale must not meet an excluded
      // key's -inf, nor softcap turn it into -c. Softcap runs on whole vectors (cols is a multiple
      // of W); the columns outside [first, limit) are overwritten just below.
      const T scale = job.score_scale;
      const std::size_t from = first / W * W, to = round_up(limit, W);
      T pre = 1;  // the scale still to apply (fused into ALiBi's pass when nothing else comes first)
      if (job.softcap > 0) {
        top = softcap_scores(job, scores, from, to);
        have_top = bias == nullptr && job.alibi == nullptr && bits == nullptr && first == start && limit == cols;
        if (bias != nullptr)
          for (std::size_t jj = first; jj < limit; ++jj) scores[jj] += bias[jj];
      } else if (bias != nullptr) {
        for (std::size_t jj = first; jj < limit; ++jj) scores[jj] = scores[jj] * scale + bias[jj];
      } else if (job.alibi != nullptr) {
        pre = scale;
      } else {
        for (std::size_t jj = from; jj < to; jj += W) store(scores + jj, load<V>(scores + jj) * scale);
      }
      if (job.alibi != nullptr) alibi_scores(scores, from, to, pre, slope, centre);
    }
    std::fill(scores + start, scores + first, minus_inf);
    std::fill(scores + limit, scores + cols, minus_inf);
    if (bits != nullptr)
      for (std::size_t jj = first; jj < limit; ++jj) scores[jj] = bits[jj] != 0 ? scores[jj] : minus_inf;
    if (!have_top) {
      // Two running maxima, of the even and of the odd vectors: with one, the pass was a chain of
      // dependent maxima. The max of a set does not depend on the order (a NaN never enters: x >
      // top is false; of ±0 either may be kept, and s - max is then the same).
      V top_even = splat<V>(minus_inf), top_odd = top_even;
      std::size_t jj = start;
      for (; jj + 2 * W <= cols; jj += 2 * W) {
        const V x = load<V>(scores + jj), y = load<V>(scores + jj + W);
        top_even = x > top_even ? x : top_even;
        top_odd = y > top_odd ? y : top_odd;
      }
      if (jj < cols) {
        const V x = load<V>(scores + jj);
        top_even = x > top_even ? x : top_even;
      }
      top = top_odd > top_even ? top_odd : top_even;
    }
    return reduce_max<T, W>(top);
  }

  // Online softmax step for the kRows rows of a register tile (row r's scores at scores +
  // r·key_tile): forms each row's scores (tile_scores), turns them into exp(argument) (see Job) and
  // sets alpha[r], the factor α that rescales what row r accumulated so far (its running max at
  // row_max[r], its lane sums at row_sum + r·kMaxLanes). A row with nothing taking part in this
  // tile: weights 0, α = 1, running state untouched (so a fully masked row keeps sum 0 and no
  // -inf - -inf).
  ATTN_INLINE static void online_step(const Job<T>& job, T* scores, std::size_t start, std::size_t cols,
                                      const RowTile (&rows)[kRows], T* row_max, T* row_sum, T* alpha) {
    constexpr T minus_inf = -std::numeric_limits<T>::infinity();
    T new_max[kRows];
    // The exps' arguments for every row's α, then α for all rows in whole vectors at once: one
    // row at a time, each α was a dependent chain of ~30 operations on one lane (on AVX-512 in
    // 128-bit registers, without FMA), 7% of an fp64 causal call at n = 512 (perf, bench_attention).
    // A row whose max stays, or that sees no key, gets exp(0) = 1 exactly (both exps).
    alignas(64) T shift[round_up(kRows, W)] = {};
    for (std::size_t r = 0; r < kRows; ++r) {
      const T tile_max = tile_scores(job, scores + r * job.key_tile, start, cols, rows[r]);
      new_max[r] = tile_max == minus_inf ? minus_inf : std::max(row_max[r], tile_max);
      if (tile_max != minus_inf && row_max[r] != new_max[r]) shift[r] = (row_max[r] - new_max[r]) * job.exp_scale;
    }
    for (std::size_t r = 0; r < kRows; r += W) {
      const V a = vector_exp<T, V, I>(load<V>(shift + r), job.exp_constants);
      for (std::size_t l = 0; l < static_cast<std::size_t>(W) && r + l < kRows; ++l) alpha[r + l] = a[l];
    }
    for (std::size_t r = 0; r < kRows; ++r) {
      T* row = scores + r * job.key_tile;
      if (new_max[r] == minus_inf) {
        std::fill(row + start, row + cols, T(0));
        continue;
      }
      // The row sum is kept as W lane sums, each rescaled by α with the row, and added up once at
      // the end (run_item): no horizontal sum per tile.
      V sum = load<V>(row_sum + r * kMaxLanes) * alpha[r];
      // Four vectors at a time (then two, then one: cols - start is a multiple of W), each step of
      // exp over all of them before the next, so that their independent chains (13 dependent FMAs
      // in fp64's polynomial) sit side by side in program order: bench_kernel_parts, one at a
      // time 0.61 ns per fp64 score, four 0.50 (fp32 0.24 -> 0.21). Eight spill registers, and
      // are taken only by fp32's table-driven exp, where they still measure 3-5% faster
      // (bench_kernel_parts OnlineStep, 6 rounds alternating: p10 905 -> 858 ns; fp64 even).
      std::size_t jj = start;
      if constexpr (kTableExp<V> && sizeof(T) == 4)  // fp32 on AVX-512: eight (see above)
        for (; jj + 8 * W <= cols; jj += 8 * W) exp_scores<8>(job, row + jj, new_max[r], sum);
      for (; jj + 4 * W <= cols; jj += 4 * W) exp_scores<4>(job, row + jj, new_max[r], sum);
      for (; jj + 2 * W <= cols; jj += 2 * W) exp_scores<2>(job, row + jj, new_max[r], sum);
      if (jj < cols) exp_scores<1>(job, row + jj, new_max[r], sum);
      store(row_sum + r * kMaxLanes, sum);
      row_max[r] = new_max[r];
    }
  }

  // acc[r] = α_r·acc[r] + Σ_jj weight[r][jj]·V[j0 + jj] over the keys from <= jj < cols (the
  // weights outside are 0); alpha = nullptr: the rows' first tile, acc[r] = Σ (acc not read).
  ATTN_INLINE static void accumulate(const Job<T>& job, const T* alpha, std::size_t from, std::size_t cols, T* acc,
                                     Scratch<T>& s) {
    const std::size_t dvp = job.head_dim_v_padded;
    for (std::size_t cb = 0; cb < dvp; cb += kTile) {
      V sum[kRows][kVectors] = {};
      for (std::size_t jj = from; jj < cols; ++jj) {
        V value[kVectors];
#pragma GCC unroll 4
        for (std::size_t u = 0; u < kVectors; ++u) value[u] = load<V>(s.values + jj * dvp + cb + u * W);
#pragma GCC unroll 8
        for (std::size_t r = 0; r < kRows; ++r) {
          const T w = s.scores[r * job.key_tile + jj];
#pragma GCC unroll 4
          for (std::size_t u = 0; u < kVectors; ++u) sum[r][u] += w * value[u];
        }
      }
      for (std::size_t r = 0; r < kRows; ++r)
        for (std::size_t u = 0; u < kVectors; ++u) {
          T* a = acc + r * dvp + cb + u * W;
          if (alpha == nullptr)
            store(a, sum[r][u]);
          else
            store(a, load<V>(a) * alpha[r] + sum[r][u]);
        }
    }
  }

  // One work item: batch b, query head h, query rows [i0, i0 + rows). Heavy items (late query
  // blocks, which see the most keys under a causal mask) come first so threads finish together.
  ATTN_INLINE static void run_item(const Job<T>& job, std::size_t item, Scratch<T>& s) {
    const FlashShape& sh = job.shape;
    const std::size_t heads_total = sh.batch * sh.q_heads;
    const std::size_t blocks = (sh.n + job.query_tile - 1) / job.query_tile;
    const std::size_t block = blocks - 1 - item / heads_total, b = item % heads_total / sh.q_heads,
                      h = item % sh.q_heads, kv_head = h / (sh.q_heads / sh.kv_heads);
    const std::size_t i0 = block * job.query_tile;
    const Extent e = extent_of(job, b);
    if (i0 >= e.n) return;  // a packed sequence shorter than the longest
    const std::size_t rows = std::min(job.query_tile, e.n - i0);
    // Packed sequences start at a row offset (their batch strides are 0).
    const std::size_t q_first = job.cu_q != nullptr ? job.cu_q[b] : 0, k_first = job.cu_k != nullptr ? job.cu_k[b] : 0;
    const T* q = job.Q + b * job.q.batch + h * job.q.head + (q_first + i0) * job.q.row;
    const T* k = job.K + b * job.k.batch + kv_head * job.k.head + k_first * job.k.row;
    const T* v = job.V + b * job.v.batch + kv_head * job.v.head + k_first * job.v.row;
    // Both ends grow with i: the block's keys are [key_begin of its first row, key_end of its last).
    const std::size_t block_begin = key_begin(job, e, i0), block_end = key_end(job, e, b, i0 + rows - 1);
    const std::size_t dvp = job.head_dim_v_padded, rows_padded = round_up(rows, kRows);
    // A sink is the row's first key: score z, weight e^0 = 1 at the running max z, value 0.
    // acc is not cleared: a register tile's first accumulate stores its sums (α·0 adds nothing, and
    // a sum is never -0: it starts at +0), and a tile no key reached is written as zeros below.
    std::fill(s.written.begin(), s.written.begin() + rows_padded, 0);
    const T first_max = job.sinks != nullptr ? job.sinks[h] : -std::numeric_limits<T>::infinity();
    std::fill(s.row_max, s.row_max + rows_padded, first_max);
    std::fill(s.row_sum, s.row_sum + rows_padded * kMaxLanes, T(0));
    if (job.sinks != nullptr)
      for (std::size_t r = 0; r < rows_padded; ++r) s.row_sum[r * kMaxLanes] = T(1);

    // Key tiles on the grid from key 0, the first cut to start at the block's first key (rounded
    // down to the register tile's columns): under a window the block's keys start far from key 0,
    // and a whole first tile packed up to a tile of keys before them. The tiles' ends, where rows
    // rescale, stay on the grid: a window computes exactly what its mask does (their test compares
    // bits).
    for (std::size_t j0 = block_begin / kTile * kTile, j1 = 0; j0 < block_end; j0 = j1) {
      j1 = std::min(block_end, (j0 / job.key_tile + 1) * job.key_tile);
      const std::size_t cols = j1 - j0;
      Parts::pack(job, k + j0 * job.k.row, v + j0 * job.v.row, cols, s);
      for (std::size_t r0 = 0; r0 < rows; r0 += kRows) {
        const std::size_t group = std::min(kRows, rows - r0);
        if (j0 >= key_end(job, e, b, i0 + r0 + group - 1)) continue;  // no key of the tile for these rows
        if (j0 + cols <= key_begin(job, e, i0 + r0)) continue;
        const T* q_rows[kRows];
        std::size_t first[kRows] = {}, limit[kRows] = {}, group_cols = 0, group_first = cols;
        for (std::size_t r = 0; r < kRows; ++r) {
          q_rows[r] = q + std::min(r0 + r, rows - 1) * job.q.row;  // padding rows repeat a real one
          if (r < group) {
            const std::size_t begin = key_begin(job, e, i0 + r0 + r), end = key_end(job, e, b, i0 + r0 + r);
            first[r] = begin > j0 ? std::min(cols, begin - j0) : 0;
            limit[r] = end > j0 ? std::min(cols, end - j0) : 0;
            if (first[r] < limit[r]) group_first = std::min(group_first, first[r]);
          }
          group_cols = std::max(group_cols, limit[r]);
        }
        if (group_first >= group_cols) group_first = 0;  // no key of the tile for these rows after all
        // Scores to whole vectors past the group's last key (a diagonal tile's rows stop short of the
        // register tile's 2W columns), from the register tile holding its first.
        const std::size_t score_cols = round_up(group_cols, W), start = group_first / kTile * kTile;
        Parts::dot_products(job, q_rows, start, score_cols, s);
        RowTile tiles[kRows];
        for (std::size_t r = 0; r < kRows; ++r) {
          const std::size_t i = i0 + r0 + r;
          const std::uint8_t* bits = r < group ? job.bits.row(b, h, i, sh.m) : nullptr;
          const T* bias = r < group ? job.bias.row(b, h, i, sh.m) : nullptr;
          tiles[r] = {first[r], limit[r], bits ? bits + j0 : nullptr, bias ? bias + j0 : nullptr,
                      job.alibi == nullptr ? T(0) : job.alibi[job.alibi_per_batch ? b * sh.q_heads + h : h],
                      static_cast<std::int64_t>(i + e.m) - static_cast<std::int64_t>(e.n + j0)};
        }
        T alpha[kRows];
        online_step(job, s.scores, start, score_cols, tiles, s.row_max + r0, s.row_sum + r0 * kMaxLanes, alpha);
        Parts::accumulate(job, s.written[r0] ? alpha : nullptr, group_first, group_cols, s.acc + r0 * dvp, s);
        s.written[r0] = 1;
      }
    }
    // out = acc / sum. A row that saw no key has sum 0 and is written as exactly +0.0, as is a row
    // that saw only its sink (no value: 0 / sum).
    T* o = job.out + b * job.o.batch + h * job.o.head + (q_first + i0) * job.o.row;
    for (std::size_t r = 0; r < rows; ++r) {
      // >= 1 when a key (or the sink) took part: the max's own exp is 1
      const T total = reduce_sum<T, W>(load<V>(s.row_sum + r * kMaxLanes));
      T* to = o + r * job.o.row;
      const T* from = s.acc + r * dvp;
      if (!(total > 0) || !s.written[r / kRows * kRows]) {
        std::fill(to, to + sh.head_dim_v, T(0));
        continue;
      }
      // acc·fl(1/sum): a reciprocal per row and a product per value (FlashAttention 2's epilogue),
      // where a division per vector issued once every 5-10 cycles (vdivps/vdivpd, 1.5-2% of a
      // causal n = 512 call). Two roundings: flash_error_bound's Step 5 and the tensor band's
      // Step 6 count them.
      const T inverse = T(1) / total;
      std::size_t c = 0;
      for (; c + W <= sh.head_dim_v; c += W) store(to + c, load<V>(from + c) * inverse);
      for (; c < sh.head_dim_v; ++c) to[c] = from[c] * inverse;
    }
  }

  // The kernel's exp (tanh: false) or softcap tanh (true, c = 1) elementwise.
  template <bool kTanh> ATTN_INLINE static void elementwise_span(const T* x, T* out, std::size_t count) {
    for (std::size_t i = 0; i < count; i += W) {
      T lane[W] = {};
      const std::size_t take = std::min<std::size_t>(W, count - i);
      std::copy(x + i, x + i + take, lane);
      V e[1] = {load<V>(lane)};
      if constexpr (kTanh) {
        capped<1>(e, T(1), ExpConstants<T>::table);
      } else {
        vector_exp_n<T, V, I, 1>(e, ExpConstants<T>::table);
      }
      for (std::size_t l = 0; l < take; ++l) out[i + l] = e[0][l];
    }
  }
};

}  // namespace attn::flash_detail
