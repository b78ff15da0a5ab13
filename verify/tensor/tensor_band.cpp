#include "tensor/tensor_band.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>
#include <utility>

#include <boost/sort/spreadsort/integer_sort.hpp>

#include "numeric/double_interval.hpp"

// Derivation of the tensor band δ (band.cpp's derivation, generalized to an arithmetic profile).
//
// Model. One row: k keys taking part, dot length E, multiplier σ > 0, additive bias b_j (0
// without a mask). Exact: D_j = q·k_j, A_j = Σ_c |q_c k_jc|, scores s_j = σ D_j + b_j,
// R_j := σ A_j + |b_j| >= |s_j|, gaps g_j = max_i s_i - s_j, weights w_j = e^{-g_j} / Σ_i e^{-g_i},
// y = Σ_j w_j v_j. Inputs are exact in storage; key and value may have a format of their own
// (kv_storage: llama.cpp's fp16 cache read by an fp32 query). Then Q's rounding before Q·Kᵀ (Step
// 2') and P's before P·V (Step 6) may go to either format, or to the query's and then K's (V's):
// Q takes u_k := the coarser unit and one more rounding, P both units ((1 + u_s)(1 + u_v) - 1),
// and both h_k := the sum of both h; the scores and the output keep storage's. u = unit roundoff of compute, u_s of storage,
// λ = smallest normal of compute, h = half the smallest subnormal of storage. θ_n is any product
// of at most n factors (1+ε_i)^±1, |ε_i| <= u, and |θ_n| <= γ_n = nu/(1-nu) (Higham, Accuracy
// and Stability of Numerical Algorithms, 2nd ed., Lemmas 3.1 and 3.3). exp (or exp2) is accurate
// to exp_ulps ulps: relative error <= η := 2·exp_ulps·u for a normal result (1 ulp <= 2u|x|).
// A correct implementation may: apply the computed scale to Q, to K, to both (as √σ each), or to
// the scores, or fold it with log2(e) into an exp2; add the bias in compute; take the max over a
// tile or the row; run an online softmax over T tiles (running max m_t, rescale factor
// α_t = exp(m_{t-1} - m_t), rescaled sum and accumulator), T counted below; sum and accumulate in
// any order, FMA or not; normalize before or after P·V; round P to storage before P·V
// (weights_in_storage); split the keys into partitions merged by their LSE (Step 7); round the
// output to storage. Underflow may flush to zero (GPUs do).
// Counting (the declared structure, KernelStructure). T := the tiles holding a key taking part:
// undeclared, T = k (one key per tile at worst); key_tile = t, the distinct ⌊j/t⌋ over the row's
// key positions j; single_pass, 1; with p > 1 splits each cut may split a tile, so p - 1 more; at
// most k. A tile without a key taking part contributes nothing: its maximum does not move (the
// factor is exp(0) = 1) and its terms are exact zeros. N_c := the (tile, chunk) pairs holding a
// key, chunks being c = sum_chunk consecutive positions from a tile's start (c = 1: N_c = k),
// plus p - 1 cuts, at most k. A key's exps are its own and the rescales after its tile: <= T.
//
// Step 1 (the scale). σ̂ = σ θ_{c_σ}: c_σ = 2 when defaulted (sqrt then divide, both correctly
// rounded; an rsqrt within 1 ulp is θ_2 too: a judgement that it is that accurate), else 1 (the
// caller's double converted to compute). Folded: F̂ = σ̂·fl(log2 e) rounded, θ_{c_σ+2}.
// Step 2 (scores, in natural units: exp2's argument divided by the exact log2 e). Scores scaled:
// D̂ θ_E · σ̂ · θ_1; Q (or K) scaled first: each q_c σ̂ is rounded (θ_{c_σ+1}) and the dot product
// of the rounded values adds θ_E; both scaled by f = fl(√σ̂) converted: f² = σ θ_{c_σ+4} and two
// element roundings; the bias add is one more. Every route (Higham eq. (3.5)) gives
// |ŝ_j - s_j| <= e_j := γ_{E+c_σ+7} R_j + (2E+4) λ (1+2σ)   (flushed products and sums).
// With storage (or K's format) finer than compute, q and k convert first: E+c_σ+9. ALiBi's bias
// is formed by the kernel: |d| converted to compute (exact below 2^24 in fp32, one rounding
// otherwise) and multiplied by the fp32 slope (one rounding), so |b̂_j - b_j| <= γ_2 |b_j| <= γ_2 R_j,
// and with the add's own rounding the chain holds γ_{E+c_σ+9} R_j (two more in every route).
// Softcap (ScoreErrorModel::operator()): c·tanh(ŝ/c) is 1-Lipschitz with |c·tanh(x/c)| <= |x|: the
// error so far passes through, R_j still bounds the capped score plus the bias, and the division,
// tanh (Arithmetic::tanh_ulps u relative + (exp_ulps + 1.5) u absolute) and the product add
// (2 + tanh_ulps) u (1+γ_2)² (R_j + e_j) + (exp_ulps + 1.5) u c. FlashAttention 2's causal ALiBi
// adds slope·j (the row's constant dropped): its rounding u·slope·j is within Step 3's γ_2 P when
// key 0 takes part (P >= slope·(i + S - L)); with a window that leaves out the far keys that form
// is outside the model.
// E := max e_j, P := max(R_j+e_j).
// Step 2' (intermediates in storage, PyTorch's math path in fp16/bf16: query_in_storage,
// scores_in_storage). Rounding the scaled (or unscaled) Q and K to K's format (PyTorch 1.13 scales
// each by E^-1/4, 2.x by √scale; or Q alone by σ; ggml converts an unscaled fp32 Q to its fp16
// cache's format) changes each product by (1 + δ)(1 + δ') (a third factor when mixed), so each
// score by at most γ_2(u_k)(1 + γ) σ A_j (γ_3 when mixed), plus an absolute h_k per component
// rounded into the subnormals: h_k (1 + γ_2)(1 + γ) max(1, σ, √σ)(Σ_c |k_jc| + Σ_c |q_c|) + E h_k².
// Rounding the scores after Q·Kᵀ, after a scale and after the bias add: at most three relative u_s
// of |ŝ_j| <= R_j + e_j, plus 3h.
// All join e_j. A scale itself rounded to storage before use is outside the -math profiles.
// Step 3 (arguments, any tiling). Key j in tile t gets its own exponential at argument ŝ_j - m_t
// and then the rescales of tiles t+1..T at m_{i-1} - m_i: the natural arguments sum to
// ŝ_j - m_T, m_T = max_i ŝ_i the same for every key, so by shift invariance only the deviation
// from s_j - m_T matters. Each piece is formed either as a difference rounded once and multiplied
// by the factor F̂ (relative θ_{c_σ+4} on |piece|), or FlashAttention-style fl(ŝ F̂ - μ) with
// μ = fl(m F̂) (FMA or not): that deviates by at most u|ŝ_j F̂| + u|μ| once per key; when the
// rescales use the same μ the μ's telescope (fl is deterministic), else the rescales are the
// difference form. Judgement: a kernel that recomputes the converted maximum differently at each
// rescale (error u|m| per tile, T of them) is outside the model. The pieces are all <= 0 and sum
// to Ĝ_j = m_T - ŝ_j <= |m_T| + |ŝ_j| <= P + R_j + e_j (we are given only lower bounds of g_j).
// So the argument is s_j - m_T + τ_j with
//   |τ_j| <= T_j := e_j + (γ_{c_σ+4} + γ_2)(R_j + e_j + P)     (u(1+γ_4) <= γ_2).
// This is the per-key "range" term of Blanchard, Higham and Higham, "Accurately computing the
// log-sum-exp and softmax functions", IMA J. Numer. Anal. 41 (2021): far keys get large T_j but
// carry weight <= e^{-g_j}.
// Step 4 (exponentials). Key j's effective numerator ê_j is the product of at most T exps (its own
// and the rescales after its tile), each within η: ê_j = e^{s_j - m_T} λ_j, |λ_j - 1| <= m_j :=
// expm1(T_j + T η'), η' = -log1p(-η) (since (1+η)^T and (1-η)^-T are both <= e^{Tη'}, and
// e^{-x} >= 2 - e^x covers the lower side). The roundings of the products α·ℓ and α·acc are
// summation roundings (Step 6). The key with ŝ = m_T has own argument 0 (difference form) or
// within γ_2 P (FMA residual of μ) and rescales of argument exactly 0, so Σ ê >= low :=
// e^{-γ_2 P - Tη'}. Flushed exps, products and sums are absolute errors: see U.
// Step 5 (softmax of the computed exponentials). ω_j = ê_j / Σ ê = w_j λ_j / Λ, Λ = Σ w_i λ_i >=
// 1 - M̄, M̄ := Σ w_j m_j. Since Σ_j w_j (v_j - y) = 0,
//   |Σ_j ω_j v_j - y| = |Σ_j w_j (λ_j - 1)(v_j - y)| / Λ <= Σ_j w_j m_j |v_j - y| / (1 - M̄).
// w_j m_j is bounded both by w_j^hi m_j and by e^{T_j + Tη' - g_j} (w_j <= e^{-g_j}).
// Step 6 (sum, accumulator, division). Each term of the sum ℓ goes through at most c - 1 additions
// inside its chunk, one addition per chunk joining the running sum after it (<= N_c) and at most T
// rescale products: depth D := c - 1 + N_c + T (undeclared: 2k), Σ̂ = Σ ê θ_D (the θ's of positive
// terms average into one). Each term of the accumulator also has the product p·v: θ_{D+1}. One
// division (or, normalizing before, one division per weight and the same additions; or a
// reciprocal and a product, acc·fl(1/ℓ), FlashAttention 2's epilogue): ŷ = Σ_j ω_j v_j θ_{2D+1}.
// The count: D over-counts each term's roundings by two. A key is rescaled only by the tiles
// after its own (<= T - 1 products: the first tile's α multiplies exact zeros or is skipped) and
// the first chunk joins an exact 0 (<= N_c - 1 rounded joins), so a term of ℓ carries at most
// θ_{D-2} (θ_{D-1} with a sink added in) and a term of the accumulator θ_{D-1} (its product
// included); one division makes θ_{2D-1}, a reciprocal and a product θ_{2D}, within θ_{2D+1}
// (TensorBand.Every*KernelWithinBand runs the reciprocal kernel). So
// |ŷ - Σ ω_j v_j| <= ρ Σ_j ω_j |v_j|, ρ := (1 + γ_{2D+1+c_v})(1 + u_P) - 1,
// where c_v = 1 when v converts to compute and u_P = u_k when P is rounded to V's format (relative
// u_k per weight; u_k = u_s unless mixed; mixed, P may be rounded to the query's format and then
// V's: u_P = (1 + u_s)(1 + u_v) - 1).
// Σ ω_j |v_j| <= Σ_j (w_j^hi + w_j m_j) |v_j| / (1 - M̄).
// Rounding P to V's format errs by <= u_k p + min(h_k, p) (0 is representable): the absolute part,
// carried through the rescales (α <= 1 + η) and divided by Σ ê, is per key
// <= min(h e^{Tη'} (1+ρ) / low, ω_j (1+ρ)) |v_j|: term S_sub. For fp16 this is 2^-25 per weight
// (subnormal P), far from negligible for long rows of small weights.
// Step 6' (an accumulator in a coarser format, Arithmetic::accumulator: ggml's fp16 decode path).
// Each of the accumulator's at most D + 1 + (p + 1) operations rounds to u_a as well (counted on
// top of compute's γ, conservatively): ρ gains the factor 1 + γ_{D+1+...}(u_a); each may flush or
// round in u_a's subnormal range, absolutely λ_a against ℓ >= low, (k + 2T + 3p) λ_a (1 + ρ)/low in
// U. An accumulator that overflows (fp16: Σ p|v| > 65504) gives Inf, a failure of its own.
// Step 7 (splits). With p > 1 partitions (flash-decoding, FlashAttention's split-KV combine), each
// runs Steps 2-6 on its keys (its own max m_p, sum ℓ_p, accumulator; T and N_c above already count
// its tiles) and ends with o_p = acc_p / ℓ_p and lse_p = m_p + log ℓ_p; then lse = M + log Σ_q
// exp(lse_q - M), M = max lse_q, and ŷ = Σ_p exp(lse_p - lse)·o_p. log is accurate to exp_ulps ulps
// (a judgement, as for exp), relative 2·exp_ulps·u. Bound Λ := P + log k + 1 + γ_2 P + Tη' >= every
// |m_p|, |log ℓ_p|, |lse_p|, |lse| (ℓ_p lies in [e^{-γ_2 P - Tη'}, k(1 + ·)] by Step 4). Writing the
// combine factor ĉ_p = exp(l̂se_p - l̂se)(1 + ε): e^{m_p} cancels exactly between lse_p and the
// split's exponentials, ℓ̂_p between lse_p and o_p, so ĉ_p ô_p = F_p e^{-τ} Σ_{j in p} ê_j v_j θ / Z
// where F_p gathers what is common to one split and τ = l̂se - log Σ_q e^{l̂se_q} is common to all:
//   |log F_p| <= x_split := η' + (2·exp_ulps + 5) u Λ   (the log, the add m_p + log ℓ_p, the
//     combine's argument (2Λ), its exp, and a conversion to log2 units: at most (2L + 5)uΛ + η');
//   |τ| <= x_common := η' + γ_p + (2·exp_ulps + 5) u (Λ + log p + 1)   (the exps of lse_q - M, the
//     p - 1 additions, the log of a sum in [1, p(1 + η)], the final add).
// F_p is one more per-key factor of λ_j (m_j := expm1(T_j + Tη' + x_split)); e^{-τ} is not
// normalized away and multiplies ŷ: ρ := (1 + γ_{2D+p+2+c_v})(1 + u_P) e^{x_common + η'} - 1 (the
// division per split, the combine product and p - 1 additions). The flushes grow by 3p (combine
// exps, products, lse exps) and the absolute terms are against low·e^{-x_split - x_common}. The
// combine's own exp error ε_p is not normalized away (the normalizer sums other exps): ρ takes
// e^{x_common + η'} with splits. A split may restart its chunks at its own start: with splits and
// sum_chunk > 1, chunks of up to c keys anywhere and N_c := 2N_c + p - 1. The
// undeclared default takes p = k (any number), so it holds for split kernels too.
// Step L (the log-sum-exp a kernel returns beside the output, TierBands::lse). Exact:
// λ = log Σ_j e^{s_j} = M + log Σ_j e^{s_j - M} for any M. The kernel returns l̂ = M̂ + log ℓ̂
// (FlashAttention: row_max·scale + log(row_sum)). With M = m_T, the maximum its exps were taken
// against (Step 3): ℓ̂ = Σ_j ê_j θ_D + flushes, ê_j = e^{s_j - m_T} λ_j (Step 4), so
//   ℓ̂ / Σ_j e^{s_j - m_T} = θ_D Σ_j w_j λ_j + φ,
// the θ's of positive terms averaging into one (Step 6), |φ| <= F := N λ e^{Tη'} / (low (1 - γ_D))
// (the N flushes of U, each <= λ and carried through later rescales, against the computed sum
// >= low (1 - γ_D)). Σ_j w_j λ_j is a mean of the λ_j, so it lies in
// [e^{-max x_j}, e^{max x_j}] (x_j the exponent of m_j), and in [1 - M̄, 1 + M̄]: its log is at
// most min(-log1p(-M̄), max_j x_j) in size. The M̂ returned may be another rounding of the same
// maximum (natural units against exp2's, say): |M̂ - m_T| <= (γ_{c_σ+4} + γ_2) P, as in Step 3.
// log is accurate to 2·exp_ulps·u max(1, |log ℓ̂|) absolutely (a judgement, as for exp; GPU
// intrinsics such as __logf are accurate absolutely near 1), <= 2·exp_ulps·u Λ (1 <= Λ, |log ℓ̂| <= Λ,
// Step 7); the add rounds once, u |l̂| <= u (P + Λ); a kernel in log2 units may convert the whole
// l̂ by a rounded ln 2, γ_2 (P + Λ). With a sink added after the keys (FlashAttention 4, also to
// split 0 of its split-KV with that split's maximum), e^{z - m} may exceed 1, ℓ̂ reaching k·e^{2P}:
// Λ grows by P (see Lambda), in the output's band (x_split, x_common) as in the LSE's. So
//   |l̂ - λ| <= min(-log1p(-M̄), max_j x_j) - log1p(-γ_D) - log1p(-F) + (γ_{c_σ+4} + γ_2) P
//              + 2·exp_ulps·u Λ + (u + γ_2)(P + Λ)   [+ x_split + x_common with p > 1 splits].
// Judgements: the exps and the sum of the LSE are those of the output, in `compute`, summing the
// unrounded P (FlashAttention, Triton, ggml); torch.logsumexp on bf16 scores runs its exps and sum
// in bf16 and a kernel summing P rounded to storage errs by ~u_s: both are outside this model
// (declare compute = bf16 for the former).
// With splits, l̂ = log Σ_q e^{l̂se_q} + τ (Step 7) and each l̂se_q errs by log(θ_D Σ_{j in q}
// w_j^(q) λ_j) and F_p, w^(q) the weights within split q; the splits' softmax weights π_q times
// w_j^(q) are the w_j, so log Σ_q π_q e^{ε_q} is again the mean above times e^{±x_split}, and τ
// adds x_common. Stored (stored_lse_band): in base 2, δ and |λ| divide by ln 2 and a conversion
// by a rounded log2 e adds γ_2 (|λ₂| + δ₂); a storage coarser than compute rounds once more,
// u_l (|λ| + δ) + h_l. A row without keys has λ = -inf, to be returned exactly (or +inf, as
// FlashAttention 2 writes it, when that convention is declared). One tier: the statistical verdict
// on an LSE uses this band.
// Result. δ_pre = [Σ_j wm_j |v_j - y| + ρ Σ_j (w_j^hi + wm_j)|v_j|] / (1 - M̄) + S_sub + U,
//   U = 2 N λ (1 + max|v|) / low, N = k(2T + 4) + 2T flushes at most (exps, rescale products,
//   p·v products, divisions, additions), each <= λ absolute against a sum >= low.
// Capped by |ŷ| + |y| <= (1 + ρ) max|v| + k·h e^{Tη'}(1+ρ) max|v|/low + U + |y|, which also serves
// when M̄ >= 1/2. Output rounded to a coarser storage: δ = δ_pre + u_s (|y| + δ_pre) + h.
//
// Size. Undeclared, T = k doubles the summation count of band.cpp (γ_{4k+1} against γ_{2k+2}), adds
// Tη to every m_j, and p = k splits add γ_k and Λ-terms: for fp64 with exp <= 1 ulp δ is a few
// times band.cpp's (tests compare them). Declaring key_tile = t cuts Tη to (k/t)η, and tile sums
// (sum_chunk = t) cut D from 2k to about t + 2k/t: at k = 16384, t = 128 the band narrows about
// 100-fold; with terms added straight in (sum_chunk = 1) D stays near k and ρ dominates. δ grows
// like k·u while observed errors grow like √k·u (Higham and Mary, "A new approach to probabilistic
// rounding error analysis", SIAM J. Sci. Comput. 41 (2019)): a worst-case bound is looser on long
// rows by about √k, and by the constant factors of the worst-case count.
//
// Statistical tier. Model S: the relative errors of the kernel's elementary operations, every
// rounding of +, -, ×, /, fma and conversion (|δ| <= u, or u_s into storage), are independent
// random variables with mean zero (Higham and Mary, "A new approach to probabilistic rounding error
// analysis", SIAM J. Sci. Comput. 41 (2019), and Ipsen and Zhou, SIAM J. Sci. Comput. 42 (2020),
// who use the same model: rounding errors of data that is not specially structured behave so in
// their experiments; stochastic rounding makes it exact). Two things are not random under Model S:
// an operation repeated on identical operands repeats its error, so operations the analysis cannot
// tell apart are grouped into one block whose effect is the sum of its members' (keys with
// overlapping dot-product enclosures share their score's roundings; keys with overlapping gaps,
// widened by e_j, share their exponentials' arguments, p's rounding and the product p·v; and
// additions of a repeated addend into a running sum, s + x, s + 2x, ..., err alike within a binade,
// so the n additions of keys of one gap block to ℓ, and with equal v_jc to the accumulator, are one
// variable of coefficient n·partial: V gains u²(|y|² Σ_B (n_B² - n_B) + H² Σ_{B,v} (n² - n)); and
// everything common to many keys is kept at its worst case: every exp and exp2 (an exp's error is a
// function of its argument, and rising scores, ALiBi, repeat arguments across tiles), the scale and
// log2(e), the rescales, the split factors and the output's rounding to storage. Then ŷ = f(δ) with
// f smooth on the cube of possible errors, and McDiarmid's inequality over the independent blocks
// gives |f - E f| <= λ u √(Σ_r C_r²) with probability >= 1 - 2 exp(-λ²/2), C_r >= sup |∂f/∂δ_r|,
// while |E f - y| is at most the worst-case parts plus the second-order terms (E δ = 0 removes the
// first order). The report's λ makes 2 N exp(-λ²/2) = α for its N elements (union bound).
// Coefficients (a_j := (w_j^hi + wm_j)(|v_j - y| + δ)(1 + ρ)/(1 - M̄) >= |ω_j (v_j - ŷ)| anywhere on
// the cube, the first-order sensitivity of ŷ to key j's log-numerator):
// Step S1 (scores, random). Key j's score has at most n_s := 3E + 2 roundings (E products, E - 1
// additions, E conversions of k, the scale and the bias), each with coefficient <= u R_j a_j; its
// argument at most 3 more (subtraction or fma residual, log2 units), <= u M_j a_j, M_j := R_j + e_j +
// P. Q's roundings (conversion, scaling Q first or both by √σ: <= 3 per component c) are common to
// all keys: by Minkowski √(Σ_c (Σ_j a_j σ |q_c k_jc|)²) <= Σ_j a_j σ ℓ2_j, ℓ2_j := √Σ_c (q_c k_jc)².
//   V_S := Σ_{dot blocks B} n_s u² (Σ_B a_j R_j)² + Σ_{gap blocks B} 3 u² (Σ_B a_j M_j)² + 3 u² (Σ_j a_j σ ℓ2_j)².
// Step S2 (worst-case parts of the weights). Own exps η' Σ_j a_j; scale, log2(e) and the rescale
// arguments, whose sum over a key's chain is at most its gap, γ_{c_σ+4} Σ_j a_j (g_j^hi + 2e_j + |b_j| +
// max|b|) + γ_2 2P W; the rescales (T - 1) η' W, where W >= |Σ_{j in B} ω_j (v_j - y)| over every
// prefix B a rescale can follow: A/2 in any tiling (Σ_j w_j (v_j - y) = 0, so a prefix and its
// complement cancel: A := Σ_j a_j), and with declared tiles (whole tiles before a rescale) half of
// Σ_t |Σ_{j in t} w_j (v_j - y)|, plus one tile's Σ a_j when splits may cut a tile; splits x_split A;
// the absolute (subnormal) parts of Step 2', not modelled as random: A max_j h_j, h_j that part of
// e_j from Q's and K's roundings, and 3h A for scores rounded to storage.
// Step S3 (sums, random). The accumulator's additions have coefficient |partial|/ℓ <= H (ω units):
// in any tiling H := max(Σ_j (ω_j v_j)^+, Σ_j (ω_j v_j)^-) (any subset); with tiles a partial is
// whole tiles in any order plus part of one: H := max(Σ_t b_t^+, Σ_t b_t^-) + max_t max(P_t^+, P_t^-),
// b_t the tile's Σ ω_j v_j, P_t^± its positive and negative parts; inside chunks H_c := max_t max(P_t^±).
// k - N_c additions inside chunks, N_c + T + 3p joins, rescale products and combine steps (the
// division, product and addition of each split):
//   V_acc := u² [(k - N_c) H_c² + (N_c + T + 3p) H²]; the sum ℓ likewise with Z_c := max_t Σ_t ω_j
// and 1: its relative error multiplies ŷ, V_ℓ |y|²; the products p·v, conversions of v, divisions
// before P·V and p's rounding to V's format, per gap block: V_P := Σ_B (Σ_B ω_j |v_j|)² (3u² + u_k²).
// Ordered (declared): the additions' partial sums are the running sums in position order (either
// direction, the larger taken), so V_acc := u² Σ_r S_r² and V_ℓ := u² Σ_r L_r² over every addition,
// join and rescale product r, each |S_r| bounded from the enclosure's weights (ordered_squares).
// Step S4 (second order, worst case). Σ_j a_j (expm1(x_j) - x_j), x_j := T_j + Tη' + x_split >= |log λ_j|;
// (M̄/(1 - M̄) + ρ) times the certified spread; (γ_D' - D'u) times the certified magnitude.
// With splits a prefix or a partial may hold two cut tiles of one split (its first and its last):
// W and H take two of them. Tensor-core MMA accumulation that truncates instead of rounding to
// nearest is outside Model S (and outside the certified band's round-to-nearest γ's).
// Step S5. δ_S := λ √(V_S + V_acc + V_ℓ |y|² + V_P) + S2 + S4 + repeated + 2u|y| (the division, or a
// reciprocal and a product) + (x_common + η') (|y| + δ)
// + S_sub + U, then the output's rounding as in the certified band, and δ_S := min(δ_S, δ).
// Step S6 (what it is worth). The √ terms grow like √k u and shrink with the weights' spread
// (Σ a_j² against (Σ a_j)²), where the certified band grows like k u; the worst-case parts do not
// grow with k except (T - 1) η' W, so in an undeclared tiling (T = k) the rescales still dominate at
// long rows: declare key_tile to use the statistical tier there.
//
// Evaluating the bound. Inputs arrive rounded in the safe direction; the rest is computed in
// round-to-nearest double on non-negative quantities (the subtraction 1 - M̄ is far from
// cancelling since M̄ < 1/2), fewer than 8k + 64 roundings in any chain plus libm's exp, expm1 and
// log1p (< 1 ulp each), so multiplying by 1 + 2^-20 > (1 + 2^-53)^(8k+64) (k < 2^24) is safe.

namespace attn::verify {
namespace {

constexpr double kSafety = 1 + 0x1p-20;  // see "Evaluating the bound"
constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Format {
  double unit;         ///< unit roundoff
  double normal;       ///< smallest normal: the absolute error of a flush to zero
  double half_spacing;  ///< >= half the smallest subnormal: the error of rounding to nearest there
};

Format format_of(DType dtype) {
  return {unit_roundoff(dtype), smallest_normal(dtype), half_smallest_subnormal(dtype)};
}

// γ_n for unit roundoff u, rounded upwards; +infinity when nu >= 1/2.
double gamma_of(double n, double u) {
  const double nu = n * u;
  if (!(nu < 0.5)) return std::numeric_limits<double>::infinity();
  return nu / (1 - nu) * kSafety;
}

void check_sizes(const RowTerms& t) {
  const std::size_t k = t.keys, columns = t.abs_v_max.size();
  const bool per_key = t.abs_dot.size() == k && t.gap.size() == k && t.abs_bias.size() == k &&
                       t.weight.size() == k && t.position.size() == k;
  const bool per_column = t.abs_y.size() == columns && t.y_lo.size() == columns && t.y_hi.size() == columns &&
                          t.v.size() == k * columns;
  if (!per_key || !per_column) throw ContractError("tensor_row_bands: RowTerms vectors do not match keys and columns");
}

// The counts of "Counting": T (tiles, the exps of a key's chain), N_c (chunks joining the running
// sums) and p (splits), for one row's key positions.
struct Walk {
  double tiles = 0, chunks = 0, splits = 1;
  double chunk_keys = 1;                 ///< the most keys in one chunk
  std::vector<std::size_t> tile_of_key;   ///< per key: its tile (0, 1, ... in position order)
  std::vector<std::size_t> chunk_of_key;  ///< per key: its chunk (0, 1, ... in position order)
};

Walk walk_of(const RowTerms& t, const KernelStructure& s) {
  const std::size_t k = t.keys;
  Walk walk;
  walk.splits = static_cast<double>(s.splits == 0 ? k : std::min(s.splits, k));
  const double cuts = walk.splits - 1;
  walk.tile_of_key.resize(k);
  walk.chunk_of_key.resize(k);
  if (s.key_tile == 0 && !s.single_pass) {
    walk.tiles = walk.chunks = static_cast<double>(k);
    for (std::size_t n = 0; n < k; ++n) walk.tile_of_key[n] = walk.chunk_of_key[n] = n;
    return walk;
  }
  // Tiles and chunks as (tile, chunk) index pairs; positions increase, so distinct pairs are runs.
  const std::size_t tile = s.single_pass ? 0 : s.key_tile;  // 0: the whole row
  std::size_t tiles = 0, chunks = 0, run = 0, longest = 0;
  std::size_t last_tile = 0, last_chunk = 0;
  for (std::size_t n = 0; n < k; ++n) {
    const std::size_t j = t.position[n];
    const std::size_t this_tile = tile == 0 ? 0 : j / tile;
    const std::size_t this_chunk = (tile == 0 ? j : j - this_tile * tile) / s.sum_chunk;
    if (n == 0 || this_tile != last_tile) {
      ++tiles, ++chunks, run = 0;
    } else if (this_chunk != last_chunk) {
      ++chunks, run = 0;
    }
    longest = std::max(longest, ++run);
    walk.tile_of_key[n] = tiles - 1;
    walk.chunk_of_key[n] = chunks - 1;
    last_tile = this_tile, last_chunk = this_chunk;
  }
  walk.tiles = std::min(static_cast<double>(tiles) + cuts, static_cast<double>(k));
  walk.chunks = std::min(static_cast<double>(chunks) + cuts, static_cast<double>(k));
  walk.chunk_keys = static_cast<double>(longest);
  if (walk.splits > 1 && s.sum_chunk > 1) {
    // A split may restart its chunks at its own start, not the tile's: chunks of up to sum_chunk
    // keys anywhere, at most two pieces of each aligned chunk plus the cuts.
    walk.chunk_keys = std::min(static_cast<double>(s.sum_chunk), static_cast<double>(k));
    walk.chunks = std::min(2 * static_cast<double>(chunks) + cuts, static_cast<double>(k));
  }
  return walk;
}

void check_statistical_sizes(const RowTerms& t) {
  const std::size_t k = t.keys;
  const bool per_key = t.weight_lo.size() == k && t.gap_hi.size() == k && t.dot_lo.size() == k &&
                       t.dot_hi.size() == k && t.l2_dot.size() == k;
  if (!per_key)
    throw ContractError("tensor_row_tier_bands: the statistical RowTerms vectors do not match the keys");
}

// The blocks of Model S: per key, its block among keys with overlapping dot-product enclosures
// and among keys with overlapping gaps widened by e_j (single linkage over the sorted intervals),
// and its tile.
struct Blocks {
  std::vector<std::size_t> dot, gap, tile, chunk;
  std::size_t dot_blocks = 0, gap_blocks = 0;
  std::vector<std::vector<std::size_t>> shared_gap, shared_dot;  ///< the keys of each block of more than one key
  mutable std::vector<double> scratch;               ///< per-block sums (one row's columns run in turn)
  bool ordered = false;
  std::size_t tiles = 0;
  bool cut = false;  ///< splits may cut a tile
};

std::vector<std::size_t> link(const std::vector<double>& lo, const std::vector<double>& hi) {
  // Sorted by lo as order-preserving 64-bit keys (the sign bit flipped, negatives' bits inverted),
  // by spreadsort: radix on the keys, unsigned throughout. A NaN lo sorts as +inf (any fixed place
  // would do: an unordered pair starts a block either way); -0 sorts just below +0. Equal lo may come
  // in any order, which links them into the same block either way.
  struct Entry {
    std::uint64_t key;
    std::size_t j;
  };
  std::vector<Entry> order(lo.size());
  std::vector<std::size_t> block(lo.size());
  for (std::size_t j = 0; j < order.size(); ++j) {
    const double x = std::isnan(lo[j]) ? std::numeric_limits<double>::infinity() : lo[j];
    const auto u = std::bit_cast<std::uint64_t>(x);
    order[j] = {u >> 63 ? ~u : u | (std::uint64_t{1} << 63), j};
  }
  boost::sort::spreadsort::integer_sort(
      order.begin(), order.end(), [](const Entry& e, unsigned offset) { return e.key >> offset; },
      [](const Entry& a, const Entry& b) { return a.key < b.key; });
  std::size_t id = 0;
  double reach = -std::numeric_limits<double>::infinity();
  for (std::size_t n = 0; n < order.size(); ++n) {
    const std::size_t j = order[n].j;
    if (n > 0 && !(lo[j] <= reach)) ++id;  // NaN-safe: an unordered pair starts a block
    reach = n == 0 || !(lo[j] <= reach) ? hi[j] : std::max(reach, hi[j]);
    block[j] = id;
  }
  return block;
}

// The keys of each block of more than one key.
std::vector<std::vector<std::size_t>> shared_blocks(const std::vector<std::size_t>& block, std::size_t count) {
  std::vector<std::vector<std::size_t>> shared;
  if (count == block.size()) return shared;
  std::vector<std::size_t> size(count, 0), slot(count, SIZE_MAX);
  for (std::size_t id : block) ++size[id];
  for (std::size_t j = 0; j < block.size(); ++j) {
    if (size[block[j]] < 2) continue;
    if (slot[block[j]] == SIZE_MAX) slot[block[j]] = shared.size(), shared.emplace_back();
    shared[slot[block[j]]].push_back(j);
  }
  return shared;
}

Blocks blocks_of(const RowTerms& t, const std::vector<double>& e, const KernelStructure& s) {
  Blocks b;
  b.dot = link(t.dot_lo, t.dot_hi);
  std::vector<double> lo(t.keys), hi(t.keys);
  for (std::size_t j = 0; j < t.keys; ++j) lo[j] = t.gap[j] - 2 * e[j], hi[j] = t.gap_hi[j] + 2 * e[j];
  b.gap = link(lo, hi);
  for (std::size_t id : b.dot) b.dot_blocks = std::max(b.dot_blocks, id + 1);
  for (std::size_t id : b.gap) b.gap_blocks = std::max(b.gap_blocks, id + 1);
  b.shared_gap = shared_blocks(b.gap, b.gap_blocks);
  b.shared_dot = shared_blocks(b.dot, b.dot_blocks);
  const Walk walk = walk_of(t, s);
  b.tile = walk.tile_of_key;
  b.chunk = walk.chunk_of_key;
  b.ordered = s.ordered;
  b.tiles = t.keys == 0 ? 0 : b.tile.back() + 1;
  b.cut = walk.splits > 1;
  return b;
}

// Σ over blocks of (Σ_{j in block} f(j))²; `count` blocks (count == keys: every block one key).
template <typename F>
double block_square_sum(const std::vector<std::size_t>& block, std::size_t count, std::vector<double>& scratch,
                        const F& f) {
  double total = 0;
  if (count == block.size()) {
    for (std::size_t j = 0; j < block.size(); ++j) total += f(j) * f(j);
    return total;
  }
  scratch.assign(count, 0.0);
  for (std::size_t j = 0; j < block.size(); ++j) scratch[block[j]] += f(j);
  for (double x : scratch) total += x * x;
  return total;
}

// |v - y| for every y in [lo, hi], rounded up: the farther end's distance.
inline double distance_of(double v, double lo, double hi) {
  return up_bound(std::max(std::fabs(v - lo), std::fabs(v - hi)));
}

// One output column's values v_jc over the keys j: contiguous (stride 1, a transposed copy) or read
// in place from the key-major RowTerms::v (stride = columns).
struct Column {
  const double* base = nullptr;
  std::size_t stride = 1;
  double operator[](std::size_t j) const { return base[j * stride]; }
};

// The partial-sum bounds of Steps S2 and S3 for one output column (ω units, `slack` applied).
struct ColumnSums {
  double prefix_spread = 0;   ///< W: half of Σ_t |Σ_{j in t} w_j (v_j - y)| (+ a cut tile)
  double H = 0, H_chunk = 0;  ///< |partial sums| of Σ ω_j v_j: any, and inside one tile
  double Z_chunk = 0;         ///< Σ ω_j inside one tile
  double product_blocks = 0;  ///< Σ over gap blocks of (Σ ω_j |v_j|)²
  double acc_squares = -1, sum_squares = -1;  ///< ordered: Σ of the squared partial sums (else -1)
  double repeated_sum = 0;  ///< Σ over gap blocks of (n² - n), n their size (ℓ's partials <= 1)
  double repeated_acc = 0;  ///< Σ over (gap block, v_jc) groups of (n² - n) H²
};

// Ordered (KernelStructure::ordered): Σ of the squared partial sums of the accumulator (terms
// ω_j v_j, or ω_j alone for the sum ℓ) over every addition and rescale product, for the direction
// given; |partial| <= |Σ w_j v_j| + Σ (w_j^hi + wm_j - w_j) |v_j| with w_j the enclosure's midpoint.
double ordered_squares(const RowTerms& t, Column values, const std::vector<double>& w_hi,
                       const std::vector<double>& wm, const Blocks& b, bool weights_only, bool descending) {
  double total = 0, run = 0, run_dev = 0, part = 0, part_dev = 0;
  const std::size_t k = t.keys;
  for (std::size_t n = 0; n < k; ++n) {
    const std::size_t j = descending ? k - 1 - n : n;
    const double mid = (t.weight_lo[j] + w_hi[j]) / 2, dev = w_hi[j] + wm[j] - mid;
    const double v = weights_only ? 1.0 : values[j];
    part += mid * v, part_dev += dev * std::fabs(v);
    total += (std::fabs(part) + part_dev) * (std::fabs(part) + part_dev);  // an addition inside the chunk
    const bool chunk_ends = n + 1 == k || b.chunk[descending ? j - 1 : j + 1] != b.chunk[j];
    if (chunk_ends) {
      run += part, run_dev += part_dev, part = part_dev = 0;
      const double bound = std::fabs(run) + run_dev;
      total += bound * bound;  // the join, and the rescale product at the next tile
      const bool tile_ends = n + 1 == k || b.tile[descending ? j - 1 : j + 1] != b.tile[j];
      if (tile_ends) total += bound * bound;
    }
  }
  return total;
}

void repeated_addends(Column values, const Blocks& b, ColumnSums& sums, double slack);

ColumnSums column_sums(const RowTerms& t, std::size_t c, Column values, const std::vector<double>& w_hi,
                       const std::vector<double>& wm, const Blocks& b, double slack) {
  struct Tile {
    double spread_lo = 0, spread_hi = 0, spread_abs = 0, plus = 0, minus = 0, signed_lo = 0, signed_hi = 0,
           weight = 0;
  };
  ColumnSums sums;
  double spread = 0, biggest_tile = 0, plus = 0, minus = 0, inside = 0, all_plus = 0, all_minus = 0;
  const auto flush = [&](const Tile& tile) {
    spread += std::max(std::fabs(tile.spread_lo), std::fabs(tile.spread_hi));
    biggest_tile = std::max(biggest_tile, tile.spread_abs);
    plus += std::max(tile.signed_hi, 0.0);
    minus += std::max(-tile.signed_lo, 0.0);
    inside = std::max(inside, std::max(tile.plus, tile.minus));
    all_plus += tile.plus, all_minus += tile.minus;
    sums.Z_chunk = std::max(sums.Z_chunk, tile.weight);
  };
  // Tiles are runs of keys (positions increase), so one running Tile suffices.
  const double y_lo = t.y_lo[c], y_hi = t.y_hi[c];
  Tile tile;
  for (std::size_t j = 0; j < t.keys; ++j) {
    if (j > 0 && b.tile[j] != b.tile[j - 1]) flush(tile), tile = Tile{};
    const double v = values[j], w_lo = t.weight_lo[j], w = w_hi[j], w_up = w_hi[j] + wm[j];
    // w_j (v_j - y) over w in [w_lo, w], y in [y_lo, y_hi]: the extremes are at the corners, and
    // with 0 <= w_lo <= w the sign of (v - y) picks them.
    // Written without branches (the signs are random: a branch per sign mispredicts half the time).
    const double d_lo = v - y_hi, d_hi = v - y_lo;
    tile.spread_lo += w_lo * std::max(d_lo, 0.0) + w * std::min(d_lo, 0.0);
    tile.spread_hi += w * std::max(d_hi, 0.0) + w_lo * std::min(d_hi, 0.0);
    tile.spread_abs += w * std::max(std::fabs(d_lo), std::fabs(d_hi));
    // ω_j v_j, computed weights anywhere in [w_lo, w + wm].
    const double v_plus = std::max(v, 0.0), v_minus = std::max(-v, 0.0);
    tile.plus += w_up * v_plus;
    tile.minus += w_up * v_minus;
    tile.signed_lo += w_lo * v_plus - w_up * v_minus;
    tile.signed_hi += w_up * v_plus - w_lo * v_minus;
    tile.weight += w_up;
  }
  if (t.keys > 0) flush(tile);
  // A split cuts up to two tiles of its own (its first and its last), either of which a prefix may hold.
  sums.prefix_spread = (spread / 2 + (b.cut ? 2 * biggest_tile : 0)) * slack;
  // Any subset: the positive or the negative parts of all terms; whole tiles plus part of one.
  sums.H = std::min(std::max(all_plus, all_minus), std::max(plus, minus) + (b.cut ? 2 : 1) * inside) * slack;
  sums.H_chunk = inside * slack;
  sums.Z_chunk *= slack;
  if (b.ordered) {
    sums.acc_squares = std::max(ordered_squares(t, values, w_hi, wm, b, false, false),
                                ordered_squares(t, values, w_hi, wm, b, false, true)) *
                       slack * slack;
    sums.sum_squares = std::max(ordered_squares(t, values, w_hi, wm, b, true, false),
                                ordered_squares(t, values, w_hi, wm, b, true, true)) *
                       slack * slack;
  }
  // Additions of a repeated addend into a running sum err alike within a binade (s + x, s + 2x, ...):
  // the n additions of such a group are one variable of coefficient n·(partial) instead of n
  // variables, which adds (n² - n)·partial² to V (partials at most 1 for ℓ, H for the accumulator).
  // Repeated addends: keys of one gap block (equal p) for ℓ, with equal v_jc too for the accumulator.
  repeated_addends(values, b, sums, slack);
  sums.product_blocks = block_square_sum(b.gap, b.gap_blocks, b.scratch,
                                        [&](std::size_t j) { return (w_hi[j] + wm[j]) * std::fabs(values[j]); }) *
                        slack * slack;
  return sums;
}

// The ordered pairs of keys of one block with equal v_jc: Σ over the groups of equal values of
// (m² - m), m their size.
double equal_pairs(Column v, const std::vector<std::size_t>& block) {
  double pairs = 0;
  if (block.size() <= 32) {
    for (std::size_t x = 0; x < block.size(); ++x)
      for (std::size_t y = 0; y < block.size(); ++y) pairs += x != y && v[block[x]] == v[block[y]] ? 1 : 0;
    return pairs;
  }
  std::vector<double> sorted(block.size());
  for (std::size_t x = 0; x < block.size(); ++x) sorted[x] = v[block[x]];
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t x = 0, run = 1; x < sorted.size(); ++x, ++run) {
    if (x + 1 == sorted.size() || sorted[x + 1] != sorted[x]) {
      const double m = static_cast<double>(run);
      pairs += m * m - m;
      run = 0;
    }
  }
  return pairs;
}

// Σ over the gap blocks of (n² - n), n their size: the keys of one gap block are repeated addends of ℓ.
double repeated_keys(const Blocks& b) {
  double total = 0;
  for (const std::vector<std::size_t>& block : b.shared_gap) {
    const double n = static_cast<double>(block.size());
    total += n * n - n;
  }
  return total;
}

void repeated_addends(Column v, const Blocks& b, ColumnSums& sums, double slack) {
  double excess_acc = 0;  // Σ over groups of equal v_jc in a block of (m² - m) = Σ_j (m_j - 1)
  for (const std::vector<std::size_t>& block : b.shared_gap) excess_acc += equal_pairs(v, block);
  sums.repeated_sum = repeated_keys(b) * slack * slack;
  sums.repeated_acc = excess_acc * sums.H * sums.H;
}

// Per-key quantities of the statistical tier, the same for every column of a row.
struct Pre {
  std::vector<double> w_up, G, sl2, M, a;     // w^hi + wm; gap^hi + 2e + |b| + max|b|; σ ℓ2; R + e + P; scratch
  std::vector<double> wG, wc, wl, wR2, wM2;   // w_up times G, curvature, σ ℓ2; (w_up R)², (w_up M)²
  double sum_w = 0, sum_wG = 0, sum_wc = 0, sum_wl = 0, sum_wR2 = 0, sum_wM2 = 0;
  double e_over_R = 0;  // max_j e_j / R_j
  bool simple = false;  // any tiling (every key its own tile), not ordered
};

// The column sums the simple path gathers in the certified band's pass over the keys.
struct Fused {
  double w = 0, wG = 0, wc = 0, wl = 0, wR2_d2 = 0, wR2_d = 0, wM2_d2 = 0, wM2_d = 0;
  double plus = 0, minus = 0, products = 0;
};

// One column's sums over the keys: the certified band's (spread, magnitude, subnormal) and, when
// fused, the statistical tier's (Fused).
struct ColumnPass {
  double spread = 0, magnitude = 0, subnormal = 0;
  Fused fused;
};

// The sums of every column in one pass over the keys, key-major as V is stored: key j's row of
// values is read once and each column's sums are SIMD lanes. Every term is >= 0, and "Evaluating
// the bound" counts the roundings of a chain, not an order, so the sums may be taken in any order.
// Compiled for the widest vectors the machine has.
enum PassSum : std::size_t {
  kSpread, kMagnitude, kSubnormal,                                          // certified
  kW, kWG, kWc, kWl, kWR2d2, kWR2d, kWM2d2, kWM2d, kPlus, kMinus, kProducts,  // fused
  kPassSums
};

struct PassInputs {
  std::size_t keys = 0, columns = 0;
  const double* v = nullptr;                                          // key-major, keys × columns
  const double *y_lo = nullptr, *y_hi = nullptr, *y = nullptr, *v_max = nullptr;  // per column
  const double *wm = nullptr, *up = nullptr, *share = nullptr;        // per key: w_j m_j, w^hi_j + w_j m_j, S_sub's
  const Pre* pre = nullptr;                                           // fused when given
};

#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define ATTN_VECTOR_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#endif
#endif
#ifndef ATTN_VECTOR_CLONES
#define ATTN_VECTOR_CLONES
#endif

// Keys j0 .. j0 + N - 1 into every column's sums: N keys per load and store of the sums, which
// stay in registers across them (the sums' traffic, not the arithmetic, bounds this loop).
template <bool kFused, std::size_t N>
[[gnu::always_inline]] inline void pass_keys(const PassInputs& in, std::size_t j0, double* __restrict sums) {
  const std::size_t C = in.columns;
  const double* __restrict v = in.v + j0 * C;
  const double *__restrict lo = in.y_lo, *__restrict hi = in.y_hi, *__restrict y = in.y, *__restrict v_max = in.v_max;
  double wm[N], up[N], share[N], pG[N], pc[N], pl[N], pR2[N], pM2[N];
  for (std::size_t b = 0; b < N; ++b) {
    wm[b] = in.wm[j0 + b], up[b] = in.up[j0 + b], share[b] = in.share[j0 + b];
    if constexpr (kFused) {
      const Pre& pre = *in.pre;
      pG[b] = pre.wG[j0 + b], pc[b] = pre.wc[j0 + b], pl[b] = pre.wl[j0 + b];
      pR2[b] = pre.wR2[j0 + b], pM2[b] = pre.wM2[j0 + b];
    }
  }
  double* __restrict s = sums;
#pragma omp simd
  for (std::size_t c = 0; c < C; ++c) {
    double spread = s[kSpread * C + c], magnitude = s[kMagnitude * C + c], subnormal = s[kSubnormal * C + c];
    double w = 0, wG = 0, wc = 0, wl = 0, wR2d2 = 0, wR2d = 0, wM2d2 = 0, wM2d = 0, plus = 0, minus = 0, products = 0;
    if constexpr (kFused) {
      w = s[kW * C + c], wG = s[kWG * C + c], wc = s[kWc * C + c], wl = s[kWl * C + c];
      wR2d2 = s[kWR2d2 * C + c], wR2d = s[kWR2d * C + c], wM2d2 = s[kWM2d2 * C + c], wM2d = s[kWM2d * C + c];
      plus = s[kPlus * C + c], minus = s[kMinus * C + c], products = s[kProducts * C + c];
    }
    for (std::size_t b = 0; b < N; ++b) {
      const double x = v[b * C + c], d = distance_of(x, lo[c], hi[c]);
      const double sum = d + y[c], a = sum < v_max[c] ? sum : v_max[c];  // |v_j| <= |v_j - y| + |y|
      spread += wm[b] * d;
      magnitude += up[b] * a;
      subnormal += share[b] * a;  // 0 when P is not rounded (share = 0)
      if constexpr (kFused) {
        w += up[b] * d, wG += pG[b] * d, wc += pc[b] * d, wl += pl[b] * d;
        wR2d += pR2[b] * d, wR2d2 += pR2[b] * d * d;
        wM2d += pM2[b] * d, wM2d2 += pM2[b] * d * d;
        plus += up[b] * (x > 0 ? x : 0.0), minus += up[b] * (x < 0 ? -x : 0.0);
        products += (up[b] * x) * (up[b] * x);
      }
    }
    s[kSpread * C + c] = spread, s[kMagnitude * C + c] = magnitude, s[kSubnormal * C + c] = subnormal;
    if constexpr (kFused) {
      s[kW * C + c] = w, s[kWG * C + c] = wG, s[kWc * C + c] = wc, s[kWl * C + c] = wl;
      s[kWR2d2 * C + c] = wR2d2, s[kWR2d * C + c] = wR2d, s[kWM2d2 * C + c] = wM2d2, s[kWM2d * C + c] = wM2d;
      s[kPlus * C + c] = plus, s[kMinus * C + c] = minus, s[kProducts * C + c] = products;
    }
  }
}

template <bool kFused> [[gnu::always_inline]] inline void pass_all_keys(const PassInputs& in, double* __restrict sums) {
  constexpr std::size_t kKeys = 4;
  std::size_t j = 0;
  for (; j + kKeys <= in.keys; j += kKeys) pass_keys<kFused, kKeys>(in, j, sums);
  for (; j < in.keys; ++j) pass_keys<kFused, 1>(in, j, sums);
}

// sums: kPassSums arrays of `columns` (kSpread..kSubnormal only when not fused), zeroed.
ATTN_VECTOR_CLONES void key_pass(const PassInputs& in, double* __restrict sums) {
  if (in.pre == nullptr) {
    pass_all_keys<false>(in, sums);
  } else {
    pass_all_keys<true>(in, sums);
  }
}

ColumnPass pass_of(const std::vector<double>& sums, std::size_t columns, std::size_t c) {
  const auto at = [&](PassSum sum) { return sums[sum * columns + c]; };
  return {at(kSpread), at(kMagnitude), at(kSubnormal),
          {at(kW), at(kWG), at(kWc), at(kWl), at(kWR2d2), at(kWR2d), at(kWM2d2), at(kWM2d), at(kPlus), at(kMinus),
           at(kProducts)}};
}

// The simple path's sums over the blocks of more than one key, for every column at once and
// key-major as key_pass: per column what the blocks add to Σ_j f_j² (f_j = a_j R_j over dot blocks;
// a_j M_j and ω_j |v_j| over gap blocks, a_j = ω_j (|v_j - y| + δ)(1 + ρ)/(1 - M̄)), and the
// ordered pairs of keys of a gap block with equal v_jc (the accumulator's repeated addends).
struct SharedSums {
  std::vector<double> dot, gap, products, equal;
};

// excess[c] += Σ over blocks of (Σ_{j in block} f(j, c))² - Σ_{j in block} f(j, c)².
template <typename F>
[[gnu::always_inline]] inline void add_shared_excess(const std::vector<std::vector<std::size_t>>& shared, std::size_t columns, const F& f,
                       std::vector<double>& excess) {
  std::vector<double> sum(columns), squares(columns);
  for (const std::vector<std::size_t>& block : shared) {
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(squares.begin(), squares.end(), 0.0);
    for (std::size_t j : block) {
#pragma omp simd
      for (std::size_t c = 0; c < columns; ++c) {
        const double x = f(j, c);
        sum[c] += x, squares[c] += x * x;
      }
    }
    for (std::size_t c = 0; c < columns; ++c) excess[c] += sum[c] * sum[c] - squares[c];
  }
}

ATTN_VECTOR_CLONES SharedSums shared_sums(const RowTerms& t, const Blocks& b, const Pre& pre, const std::vector<double>& R,
                       const std::vector<double>& delta, double slack) {
  const std::size_t C = t.abs_v_max.size();
  SharedSums out{std::vector<double>(C, 0.0), std::vector<double>(C, 0.0), std::vector<double>(C, 0.0),
                 std::vector<double>(C, 0.0)};
  const double* v = t.v.data();
  const auto a = [&](std::size_t j, std::size_t c) {
    return pre.w_up[j] * (distance_of(v[j * C + c], t.y_lo[c], t.y_hi[c]) + delta[c]) * slack;
  };
  add_shared_excess(b.shared_dot, C, [&](std::size_t j, std::size_t c) { return a(j, c) * R[j]; }, out.dot);
  add_shared_excess(b.shared_gap, C, [&](std::size_t j, std::size_t c) { return a(j, c) * pre.M[j]; }, out.gap);
  add_shared_excess(
      b.shared_gap, C, [&](std::size_t j, std::size_t c) { return pre.w_up[j] * std::fabs(v[j * C + c]); }, out.products);
  for (const std::vector<std::size_t>& block : b.shared_gap) {
    if (block.size() > 32) {  // per column, sorted (equal_pairs)
      for (std::size_t c = 0; c < C; ++c) out.equal[c] += equal_pairs(Column{v + c, C}, block);
      continue;
    }
    for (std::size_t x = 0; x < block.size(); ++x) {
      for (std::size_t y = x + 1; y < block.size(); ++y) {
        const double *row_x = v + block[x] * C, *row_y = v + block[y] * C;
        double* equal = out.equal.data();
#pragma omp simd
        for (std::size_t c = 0; c < C; ++c) equal[c] += row_x[c] == row_y[c] ? 2 : 0;
      }
    }
  }
  return out;
}

// The values column-major (each column's keys contiguous), for the per-column walks of the declared
// structures; copied in blocks of keys so that reads and writes both stay in cache.
void transpose_values(const RowTerms& t, std::size_t columns, std::vector<double>& out) {
  const std::size_t k = t.keys;
  out.resize(k * columns);
  constexpr std::size_t kBlock = 16;
  for (std::size_t first = 0; first < k; first += kBlock) {
    const std::size_t count = std::min(kBlock, k - first);
    for (std::size_t c = 0; c < columns; ++c) {
      double* column = out.data() + c * k + first;
      for (std::size_t b = 0; b < count; ++b) column[b] = t.v[(first + b) * columns + c];
    }
  }
}

}  // namespace

ScoreErrorModel::ScoreErrorModel(const Arithmetic& arithmetic, std::size_t E, double scale, bool scale_defaulted,
                                 bool computed_bias, double softcap)
    : arithmetic_(arithmetic), E_(static_cast<double>(E)), sigma_(scale), softcap_(softcap) {
  const Format compute = format_of(arithmetic.compute), storage = format_of(arithmetic.storage);
  const Format kv = format_of(arithmetic.kv_storage.value_or(arithmetic.storage));
  const double u = compute.unit;
  u_ = u;
  const bool converts = storage.unit < u || kv.unit < u;  // inputs finer than compute: one conversion each
  const double c_sigma = scale_defaulted ? 2 : 1;
  g_dot_ = gamma_of(E_ + c_sigma + 7 + (converts ? 2 : 0) + (computed_bias ? 2 : 0), u);
  flushed_ = (2 * E_ + 4) * compute.normal * (1 + 2 * sigma_);
  // Step 2': intermediates in storage. The scaled Q (or K) rounded to the key's format:
  // |Σ_c q_c σ δ_c k_jc| <= u_k R_j; the scores rounded to storage up to three times: roundings of
  // |ŝ| <= R_j + e_j, plus 3h for scores in storage's subnormal range. With key and value in a
  // format of their own (mixed), the query may be scaled in its own format and then converted to
  // K's, and P rounded to either format: the coarser unit, one more rounding, both h.
  const bool mixed = arithmetic.kv_storage.has_value() && *arithmetic.kv_storage != arithmetic.storage;
  const double u_k = mixed ? std::max(storage.unit, kv.unit) : kv.unit;
  h_k_ = mixed ? storage.half_spacing + kv.half_spacing : kv.half_spacing;
  gs2_ = gamma_of(mixed ? 3 : 2, u_k), gs3_ = gamma_of(3, storage.unit);
  h_storage_ = storage.half_spacing;
  side_scale_ = std::max({1.0, sigma_, std::sqrt(sigma_)});  // Q by σ, or Q and K by √σ each
}

ScoreErrorModel::Bound ScoreErrorModel::operator()(double abs_dot, double abs_bias, double abs_sides) const {
  Bound b;
  b.R = sigma_ * abs_dot + abs_bias;
  b.e = g_dot_ * b.R + flushed_;
  if (arithmetic_.query_in_storage) {
    // Both sides rounded: (1 + δ)(1 + δ') on every product; absolutely, h per subnormal component.
    b.absolute = h_k_ * (1 + gs2_) * (1 + g_dot_) * side_scale_ * abs_sides + E_ * h_k_ * h_k_;
    b.e += gs2_ * (1 + g_dot_) * sigma_ * abs_dot + b.absolute;
  }
  if (softcap_ > 0) {
    // Step 2 (softcap): c·tanh(x/c) is 1-Lipschitz and |c·tanh(x/c)| <= |x|, so R_j still bounds
    // the capped score plus the bias and the error so far passes through. The kernel's division by
    // c, its tanh (tanh_ulps relative plus (exp_ulps + 1.5) u absolute: 1 - 2/(e^{2y} + 1) cancels
    // near 0, 3.5u measured with a 2-ulp exp) and the product by c add
    // u|s| + c (tanh_ulps u |t| + (exp_ulps + 1.5) u) + u|ĉ t̂| <= (2 + tanh_ulps) u (1 + γ)² (R_j + e_j)
    // + (exp_ulps + 1.5) u c.
    const double g = gamma_of(2, u_);
    b.e += (2 + arithmetic_.tanh_ulps) * u_ * (1 + g) * (1 + g) * (b.R + b.e) +
           (arithmetic_.exp_ulps + 1.5) * u_ * softcap_;
    // In storage (the math path): the quotient, tanh and the product rounded to storage too; the
    // quotient's and tanh's subnormal roundings are in x/c units, c·h each.
    if (arithmetic_.scores_in_storage) b.e += gs3_ * (b.R + b.e) + (2 * softcap_ + 1) * h_storage_;
  }
  if (arithmetic_.scores_in_storage) b.e += gs3_ * (b.R + b.e) + 3 * h_storage_;
  return b;
}

double gamma_bound(double n, double u) { return gamma_of(n, u); }

std::string structure_error(const KernelStructure& s) {
  if (s.sum_chunk == 0) return "sum_chunk: must be at least 1";
  if (s.single_pass && s.key_tile != 0) return "key_tile: a single-pass kernel has no tiles (declare one or the other)";
  if (s.sum_chunk > 1 && s.key_tile == 0 && !s.single_pass)
    return "sum_chunk: needs key_tile or single_pass (in an undeclared tiling a tile may hold one key)";
  if (s.key_tile != 0 && s.sum_chunk > s.key_tile) return "sum_chunk: must not exceed key_tile";
  if (s.ordered && s.splits != 1) return "ordered: needs splits = 1 (the partitions' boundaries are not declared)";
  return "";
}

Result<Arithmetic, Error> arithmetic_profile(std::string_view name) {
  const auto profile = [](DType storage, DType compute, double exp_ulps, bool weights, bool intermediates) {
    return Arithmetic{.storage = storage,
                      .kv_storage = std::nullopt,
                      .compute = compute,
                      .exp_ulps = exp_ulps,
                      .weights_in_storage = weights,
                      .query_in_storage = intermediates,
                      .scores_in_storage = intermediates,
                      .structure = {},
                      .output_rounded = true,
                      .accumulator = std::nullopt};
  };
  if (name == "fp64") return profile(DType::fp64, DType::fp64, 1, false, false);
  if (name == "fp32") return profile(DType::fp32, DType::fp32, 2, false, false);
  if (name == "fp16") return profile(DType::fp16, DType::fp32, 2, true, false);
  if (name == "bf16") return profile(DType::bf16, DType::fp32, 2, true, false);
  if (name == "fp16-math") return profile(DType::fp16, DType::fp32, 2, true, true);
  if (name == "bf16-math") return profile(DType::bf16, DType::fp32, 2, true, true);
  return Error{"unknown arithmetic profile '" + std::string(name) +
               "' (expected fp64, fp32, fp16, bf16, fp16-math or bf16-math)"};
}

std::vector<std::string> profiles_for(DType dtype) {
  switch (dtype) {
    case DType::fp64: return {"fp64"};
    case DType::fp32: return {"fp32"};
    case DType::fp16: return {"fp16", "fp16-math"};
    case DType::bf16: return {"bf16", "bf16-math"};
  }
  return {};
}

double stored_lse_band(double lse_delta, double abs_lse, const LseFormat& format, DType compute) {
  if (lse_delta == 0) return 0;  // a row without keys: exactly -inf (or +inf)
  const Format storage = format_of(format.storage), inner = format_of(compute);
  double delta = lse_delta, magnitude = abs_lse;
  if (format.base2) {
    // δ and |λ| divide by ln 2 exactly; a kernel converting its natural LSE multiplies by a rounded
    // log2 e and rounds the product: γ_2 of |λ₂| + δ₂ in compute.
    delta = delta / std::numbers::ln2 * (1 + 0x1p-50);
    magnitude = magnitude / std::numbers::ln2 * (1 + 0x1p-50);
    delta += gamma_of(2, inner.unit) * (magnitude + delta);
  }
  if (storage.unit > inner.unit) delta += storage.unit * (magnitude + delta) + storage.half_spacing;
  return std::isnan(delta) ? kInfinity : delta * kSafety;
}

// A row without keys but with its sink z: λ = log e^{z} = z. A kernel returns m̂ + log ℓ̂ (natural
// units, or (m̂₂ + log2 ℓ̂)·ln 2 from log2 units) where ℓ̂ = e^{fl(z - m̂)}(1 + ε), |ε| <= η =
// 2·exp_ulps·u. The contract: m̂ is z through at most five roundings in compute (FlashAttention 4
// sets its row maximum to z·log2 e, or z·log2 e / scale_log2, then subtracts it from the rounded z
// with an FMA residual and converts back by ln 2), or m̂ = 0 (a maximum reset for a row with no key)
// while e^{z} is normal in compute; a maximum left at another row's value is outside it. Then
//  - m̂ = z(1 + θ_5): |m̂ - z| <= γ_5|z|, and the argument z - m̂ is formed within u|z - m̂| (or
//    exactly: m̂ = 0, or Sterbenz), so log ℓ̂ = (z - m̂)(1 + θ_1) + log(1 + ε);
//  - log(1 + ε) is within η' = -log1p(-η); log's own error is 2·exp_ulps·u·max(1, |log ℓ̂|) with
//    |log ℓ̂| <= |z| + γ_6|z| + η' (as in Step L); the add m̂ + log ℓ̂ rounds once, u(|z| + δ);
//  - in storage (the -math paths) z itself may be rounded to storage first: u_s|z| + h_s.
// So δ <= [γ_5|z| + u·γ_5|z| + η' + 2·exp_ulps·u·(max(1, |z|(1 + γ_6)) + η') + u|z| (+ u_s|z| + h_s)]
// / (1 - u), the base-2 conversion and a coarser LSE storage added by stored_lse_band.
double sink_only_lse_band(double z, const Arithmetic& arithmetic) {
  const double u = format_of(arithmetic.compute).unit, a = std::fabs(z);
  const double eta = 2 * arithmetic.exp_ulps * u, eta_prime = -std::log1p(-eta);
  const double g5 = gamma_of(5, u), g6 = gamma_of(6, u);
  double delta = g5 * a + u * g5 * a + eta_prime + 2 * arithmetic.exp_ulps * u * (std::max(1.0, a * (1 + g6)) + eta_prime) +
                 u * a;
  if (arithmetic.scores_in_storage || arithmetic.query_in_storage) {
    const Format storage = format_of(arithmetic.storage);
    delta += storage.unit * a + storage.half_spacing;
  }
  delta /= 1 - u;
  return std::isnan(delta) ? kInfinity : delta * kSafety;
}

std::vector<std::size_t> overlap_blocks(const std::vector<double>& lo, const std::vector<double>& hi) {
  if (lo.size() != hi.size()) throw ContractError("overlap_blocks: lo and hi differ in size");
  return link(lo, hi);
}

double statistical_lambda(double alpha, std::size_t elements) {
  if (!(alpha > 0 && alpha < 1)) throw ContractError("statistical_lambda: alpha must be in (0, 1)");
  const double n = static_cast<double>(std::max<std::size_t>(elements, 1));
  return std::sqrt(2 * std::log(2 * n / alpha)) * kSafety;
}

std::vector<double> tensor_row_bands(const RowTerms& t, const Arithmetic& arithmetic) {
  return tensor_row_tier_bands(t, arithmetic, std::nullopt).certified;
}

TierBands tensor_row_tier_bands(const RowTerms& t, const Arithmetic& arithmetic, std::optional<double> lambda_s) {
  check_sizes(t);
  if (const std::string error = structure_error(arithmetic.structure); !error.empty())
    throw ContractError("tensor_row_bands: " + error);
  if (lambda_s) check_statistical_sizes(t);
  const std::size_t columns = t.abs_v_max.size();
  TierBands out;
  out.certified.assign(columns, 0.0);
  if (lambda_s) out.statistical.assign(columns, 0.0);
  if (t.keys == 0) return out;
  const KernelStructure& structure = arithmetic.structure;
  const Format compute = format_of(arithmetic.compute), storage = format_of(arithmetic.storage);
  const Format kv = format_of(arithmetic.kv_storage.value_or(arithmetic.storage));  // key and value
  const double u = compute.unit, lambda = compute.normal;
  const double k = static_cast<double>(t.keys);
  const Walk walk = walk_of(t, structure);
  const double tiles = walk.tiles, splits = walk.splits;
  const double depth = walk.chunk_keys - 1 + walk.chunks + tiles;  // D of Step 6
  const double sigma = t.scale;
  const bool converts = storage.unit < u || kv.unit < u;  // inputs finer than compute: one conversion each
  const bool output_rounds = storage.unit > u && arithmetic.output_rounded;
  const double c_sigma = t.scale_defaulted ? 2 : 1;
  const double g2 = gamma_of(2, u);

  // Steps 1-2: score errors e_j; E and P.
  std::vector<double> R(t.keys), e(t.keys);
  double P = 0;
  const bool mixed = arithmetic.kv_storage.has_value() && *arithmetic.kv_storage != arithmetic.storage;
  const double u_s = storage.unit, u_k = mixed ? std::max(u_s, kv.unit) : kv.unit;
  const double h_k = mixed ? storage.half_spacing + kv.half_spacing : kv.half_spacing;
  double h_score = 0;  // max_j of the absolute (subnormal) part of e_j from Q's and K's rounding
  if (arithmetic.query_in_storage && t.abs_key.size() != t.keys)
    throw ContractError("tensor_row_bands: query_in_storage needs RowTerms::abs_key");
  const ScoreErrorModel score_error(arithmetic, t.E, sigma, t.scale_defaulted, t.computed_bias, t.softcap);
  for (std::size_t j = 0; j < t.keys; ++j) {
    const ScoreErrorModel::Bound b =
        score_error(t.abs_dot[j], t.abs_bias[j], arithmetic.query_in_storage ? t.abs_key[j] + t.abs_query : 0.0);
    R[j] = b.R, e[j] = b.e;
    h_score = std::max(h_score, b.absolute);
    P = std::max(P, R[j] + e[j]);
  }

  // Steps 3-5: argument bounds T_j, relative weight errors m_j, wm_j >= w_j m_j, M̄.
  const double eta = 2 * arithmetic.exp_ulps * u;
  const double eta_prime = -std::log1p(-eta);
  const double chain = tiles * eta_prime;  // T η'
  // Step 7: the split terms (zero without splits).
  const bool split = splits > 1;
  // With a sink, FlashAttention 4 adds e^{z - m} after the keys with m the keys' maximum, not the
  // sink's: ℓ may reach k·e^{z - m} <= k·e^{2P} (z <= P and m >= -P: the sink is one of the keys
  // P bounds), so every log ℓ the derivation bounds by Λ is bounded by Λ + P instead.
  const double Lambda = P + std::log(k) + 1 + g2 * P + chain + (t.sink ? P : 0.0);
  const double log_terms = (2 * arithmetic.exp_ulps + 5) * u;
  const double x_split = split ? eta_prime + log_terms * Lambda : 0.0;
  const double x_common =
      split ? eta_prime + gamma_of(splits, u) + log_terms * (Lambda + std::log(splits) + 1) : 0.0;
  const double g_piece = gamma_of(c_sigma + 4, u) + g2;
  std::vector<double> w_hi(t.keys), wm(t.keys), up(t.keys), x(t.keys);
  double M_bar = 0;
  for (std::size_t j = 0; j < t.keys; ++j) {
    const double T = e[j] + g_piece * (R[j] + e[j] + P) + x_split;
    x[j] = T + chain;
    const double m = std::expm1(x[j]);
    w_hi[j] = std::fmin(t.weight[j], std::exp(-t.gap[j]));
    wm[j] = std::fmin(w_hi[j] * m, std::exp(x[j] - t.gap[j]));  // fmin drops the NaN of 0·inf
    up[j] = w_hi[j] + wm[j];
    M_bar += wm[j];
  }
  const bool usable = M_bar < 0.5;  // NaN-safe: an infinite or NaN M̄ falls back to the caps
  // Per-key quantities of the statistical tier, the same for every column.
  std::vector<double> curvature;  // expm1(x_j) - x_j, Step S4
  Pre pre;
  const Blocks blocks = lambda_s && usable ? blocks_of(t, e, structure) : Blocks{};
  if (lambda_s && usable) {
    curvature.resize(t.keys);
    double b_max = 0;
    for (std::size_t j = 0; j < t.keys; ++j) b_max = std::max(b_max, t.abs_bias[j]);
    for (std::size_t j = 0; j < t.keys; ++j) {
      curvature[j] = std::expm1(x[j]) - x[j];
      pre.w_up.push_back(up[j]);
      pre.G.push_back(t.gap_hi[j] + 2 * e[j] + t.abs_bias[j] + b_max);
      pre.sl2.push_back(sigma * t.l2_dot[j]);
      pre.M.push_back(R[j] + e[j] + P);
    }
    pre.a.resize(t.keys);
    pre.simple = blocks.tiles == t.keys && !blocks.ordered;
    for (std::size_t j = 0; j < t.keys; ++j) {
      const double w = pre.w_up[j];
      pre.wG.push_back(w * pre.G[j]), pre.wc.push_back(w * curvature[j]), pre.wl.push_back(w * pre.sl2[j]);
      pre.wR2.push_back((w * R[j]) * (w * R[j])), pre.wM2.push_back((w * pre.M[j]) * (w * pre.M[j]));
      pre.sum_w += w, pre.sum_wG += pre.wG[j], pre.sum_wc += pre.wc[j], pre.sum_wl += pre.wl[j];
      pre.sum_wR2 += pre.wR2[j], pre.sum_wM2 += pre.wM2[j];
      if (R[j] > 0) pre.e_over_R = std::max(pre.e_over_R, e[j] / R[j]);
    }
  }
  const double low = std::exp(-g2 * P - chain - x_split - x_common);

  // Steps 6-7 and the result, per output column.
  const double depth_all = 2 * depth + 1 + (converts ? 1 : 0) + (split ? splits + 1 : 0);
  // Step 6': an accumulator coarser than compute rounds each of its D + 1 operations to u_a (counted
  // on top of compute's, conservatively), and flushes or rounds in its subnormals absolutely.
  const Format acc = format_of(arithmetic.accumulator.value_or(arithmetic.compute));
  const bool coarse_acc = acc.unit > u;
  // P rounded to V's format, or when mixed to the query's and then V's: (1 + u_s)(1 + u_v) - 1.
  const double u_P = !arithmetic.weights_in_storage ? 0.0 : mixed ? (1 + u_s) * (1 + kv.unit) - 1 : u_k;
  const double rho = (1 + gamma_of(depth_all, u)) * (1 + u_P) *
                         (coarse_acc ? 1 + gamma_of(depth + 1 + (split ? splits + 1 : 0), acc.unit) : 1.0) *
                         std::exp(split ? x_common + eta_prime : 0.0) - 1;
  const double flushes = k * (2 * tiles + 4) + 2 * tiles + (split ? 3 * splits : 0);
  // Carried through the later rescales (α <= 1 + η, at most e^{Tη'} in all) as sub_each is.
  const double acc_flushes =
      coarse_acc ? (k + 2 * tiles + 3 * splits) * acc.normal * std::exp(chain) * (1 + rho) / low : 0.0;
  const double sub_each =
      arithmetic.weights_in_storage ? h_k * std::exp(chain) * (1 + rho) / low : 0.0;

  // Step L (the log-sum-exp, natural units; see the derivation above).
  {
    double x_max = 0;
    for (std::size_t j = 0; j < t.keys; ++j) x_max = std::max(x_max, x[j]);
    const double mean = usable ? std::min(-std::log1p(-M_bar), x_max) : x_max;  // |log Σ w_j λ_j|
    const double g_depth = gamma_of(depth, u);
    const double flushed = flushes * lambda * std::exp(chain) / (low * (1 - g_depth));
    const double terms = mean - std::log1p(-g_depth) + (flushed < 0.5 ? -std::log1p(-flushed) : kInfinity);
    const double maximum = (gamma_of(c_sigma + 4, u) + g2) * P;  // M̂ against the maximum inside the exps
    // log within 2·exp_ulps·u·max(1, |log ℓ̂|) <= 2·exp_ulps·u·Λ (Λ >= 1), the add, and a conversion
    // of the whole l̂ from log2 units by a rounded ln 2 (γ_2 of |l̂| <= P + Λ).
    const double log_and_add = 2 * arithmetic.exp_ulps * u * Lambda + (u + g2) * (P + Lambda);
    const double lse = terms + maximum + log_and_add + (split ? x_split + x_common : 0.0);
    out.lse = std::isnan(lse) ? kInfinity : lse * kSafety;
  }
  // The sums over keys of every column in one pass (with the statistical tier's on the simple path:
  // each is Σ f_j (d_j + δ) or Σ g_j (d_j + δ)², d_j = |v_j - y|, split into the parts with d_j
  // (here) and with the certified δ (the per-row sums in `pre`, once δ is known)).
  const bool fuse = lambda_s && usable && pre.simple;
  std::vector<double> pass_sums;
  if (usable) {
    const double sub_factor = (1 + rho) / (1 - M_bar);
    std::vector<double> share(t.keys);
    for (std::size_t j = 0; j < t.keys; ++j) share[j] = std::min(up[j] * sub_factor, sub_each);
    pass_sums.assign((fuse ? kPassSums : kSubnormal + 1) * columns, 0.0);
    key_pass({.keys = t.keys, .columns = columns, .v = t.v.data(), .y_lo = t.y_lo.data(), .y_hi = t.y_hi.data(),
              .y = t.abs_y.data(), .v_max = t.abs_v_max.data(), .wm = wm.data(), .up = up.data(),
              .share = share.data(), .pre = fuse ? &pre : nullptr},
             pass_sums.data());
    if (!fuse) pass_sums.resize(kPassSums * columns, 0.0);  // pass_of reads every sum
  }
  // The declared structures walk each column's keys in turn: a column-major copy.
  std::vector<double> by_column;
  if (lambda_s && usable && !pre.simple) transpose_values(t, columns, by_column);
  // Per column: U and the certified δ before the output's rounding (the statistical tier's block
  // sums on the simple path need every column's δ, so it is a pass of its own).
  std::vector<double> U_of(columns), delta_of(columns);
  for (std::size_t c = 0; c < columns; ++c) {
    const double v_max = t.abs_v_max[c], y = t.abs_y[c];
    const double U = 2 * flushes * lambda * (1 + v_max) / low + acc_flushes;
    double delta = (1 + rho) * v_max + k * sub_each * v_max + U + y;  // the cap |ŷ| + |y|
    if (usable) {
      const ColumnPass pass = pass_of(pass_sums, columns, c);
      delta = std::min(delta, (pass.spread + rho * pass.magnitude) / (1 - M_bar) + pass.subnormal + U);
    }
    U_of[c] = U, delta_of[c] = delta;
  }
  const double slack = (1 + rho) / (1 - M_bar);
  const SharedSums shared = fuse ? shared_sums(t, blocks, pre, R, delta_of, slack) : SharedSums{};
  for (std::size_t c = 0; c < columns; ++c) {
    const double y = t.abs_y[c], U = U_of[c];
    double delta = delta_of[c];
    double statistical = delta;
    if (lambda_s && usable) {
      // Steps S1-S5 (tensor_band.cpp's derivation, "Statistical tier").
      const ColumnPass pass = pass_of(pass_sums, columns, c);
      const double spread = pass.spread, magnitude = pass.magnitude, subnormal = pass.subnormal;
      const Fused& fused = pass.fused;
      double A = 0, common = 0, second = 0, l2_sum = 0, v_dot = 0, v_gap = 0;
      ColumnSums sums;
      if (pre.simple) {
        // Any tiling (the default), not ordered: the sums of the fused pass, with H from the signs
        // of v (every key its own tile) and the blocks of more than one key added afterwards.
        A = slack * (fused.w + delta * pre.sum_w);
        common = slack * (fused.wG + delta * pre.sum_wG);
        second = slack * (fused.wc + delta * pre.sum_wc);
        l2_sum = slack * (fused.wl + delta * pre.sum_wl);
        v_dot = slack * slack * (fused.wR2_d2 + 2 * delta * fused.wR2_d + delta * delta * pre.sum_wR2);
        v_gap = slack * slack * (fused.wM2_d2 + 2 * delta * fused.wM2_d + delta * delta * pre.sum_wM2);
        v_dot += shared.dot[c];
        v_gap += shared.gap[c];
        sums.H = std::max(fused.plus, fused.minus) * slack;
        sums.prefix_spread = A / 2;
        sums.product_blocks = (fused.products + shared.products[c]) * slack * slack;
        sums.repeated_sum = repeated_keys(blocks) * slack * slack;
        sums.repeated_acc = shared.equal[c] * sums.H * sums.H;
      } else {
        const Column values{by_column.data() + c * t.keys, 1};
        std::vector<double>& a = pre.a;
        for (std::size_t j = 0; j < t.keys; ++j) {
          a[j] = pre.w_up[j] * (distance_of(values[j], t.y_lo[c], t.y_hi[c]) + delta) * slack;
          A += a[j], common += a[j] * pre.G[j], second += a[j] * curvature[j], l2_sum += a[j] * pre.sl2[j];
        }
        v_dot = block_square_sum(blocks.dot, blocks.dot_blocks, blocks.scratch, [&](std::size_t j) { return a[j] * R[j]; });
        v_gap = block_square_sum(blocks.gap, blocks.gap_blocks, blocks.scratch, [&](std::size_t j) { return a[j] * pre.M[j]; });
        sums = column_sums(t, c, values, w_hi, wm, blocks, slack);
      }
      // S1: the random parts of the scores and arguments, by block.
      const double n_s = 3 * static_cast<double>(t.E) + 2;
      // Intermediates in storage: Q's rounding (two when mixed) joins the common Q roundings, the
      // scores' three roundings (coefficient <= u_s (R_j + e_j)) the per-key dot-product block terms.
      const double q_storage = arithmetic.query_in_storage ? (mixed ? 2 : 1) * u_k * u_k : 0.0;
      // The scores' roundings: three, of coefficient <= u_s (R_j + e_j) <= u_s R_j (1 + max e/R); K's
      // rounding per key (to its format, u_k), coefficient <= u_k σ ℓ2_j <= u_k R_j.
      const double s_storage =
          (arithmetic.scores_in_storage ? 3 * u_s * u_s * (1 + pre.e_over_R) * (1 + pre.e_over_R) : 0.0) +
          (arithmetic.query_in_storage ? u_k * u_k : 0.0);
      double V = (3 * u * u + q_storage) * l2_sum * l2_sum + (n_s * u * u + s_storage) * v_dot + 3 * u * u * v_gap;
      // S2: the worst-case parts; W bounds every prefix a rescale can follow.
      const double W = std::min(A / 2, sums.prefix_spread);
      // Q's and K's roundings into the subnormals (Step 2', absolute) are not modelled as random:
      // at most h_score on every score; nor are the scores' own (3h when rounded to storage).
      const double worst = eta_prime * A + gamma_of(c_sigma + 4, u) * common + g2 * 2 * P * W +
                           (tiles - 1) * eta_prime * W + x_split * A + h_score * A +
                           (arithmetic.scores_in_storage ? 3 * storage.half_spacing * A : 0.0);
      // S3: the sums' roundings (the accumulator's also in its own format, Step 6').
      const double u_a2 = coarse_acc ? acc.unit * acc.unit : 0.0;
      const double inside = k - walk.chunks, joins = walk.chunks + tiles + 3 * splits;
      if (sums.acc_squares >= 0) {  // ordered: the partial sums themselves
        V += (u * u + u_a2) * sums.acc_squares + u * u * sums.sum_squares * y * y;
      } else {
        V += (u * u + u_a2) * (inside * sums.H_chunk * sums.H_chunk + joins * sums.H * sums.H);
        V += u * u * (inside * sums.Z_chunk * sums.Z_chunk + joins * slack * slack) * y * y;
      }
      // P rounded to V's format (when mixed, to the query's and then V's: two roundings).
      const double u_p2 = !arithmetic.weights_in_storage ? 0.0 : mixed ? u_s * u_s + kv.unit * kv.unit : u_k * u_k;
      V += (3 * u * u + u_p2) * sums.product_blocks;
      // S4: second order.
      second += (M_bar / (1 - M_bar) + rho) * spread + (gamma_of(depth_all, u) - depth_all * u) * magnitude;
      // Repeated addends (gap blocks for ℓ; equal v_jc too for the accumulator) share one error.
      V += u * u * sums.repeated_sum * y * y + (u * u + u_a2) * sums.repeated_acc;
      statistical = *lambda_s * std::sqrt(V) + worst + second + 2 * u * y +
                    (split ? x_common + eta_prime : 0.0) * (y + delta) + subnormal + U;
      statistical = std::min(statistical, delta);
    }
    if (output_rounds) {
      delta += storage.unit * (y + delta) + storage.half_spacing;
      statistical += storage.unit * (y + statistical) + storage.half_spacing;
    }
    out.certified[c] = std::isnan(delta) ? std::numeric_limits<double>::infinity() : delta * kSafety;
    if (lambda_s) {
      statistical = std::min(statistical * kSafety, out.certified[c]);
      out.statistical[c] = std::isnan(statistical) ? out.certified[c] : statistical;
    }
  }
  return out;
}

}  // namespace attn::verify
