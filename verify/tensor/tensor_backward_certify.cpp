#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "numeric/double_interval.hpp"
#include "numeric/formats.hpp"
#include "tensor/tensor_backward.hpp"
#include "tensor/tensor_report.hpp"

// Backward certification: the gradient band δ and the verdict on dQ, dK, dV.
//
// Exact (tensor_backward.cpp): for row i (b, h, i) with keys J_i, P_ij = e^{s_ij - ℓ_i} with
// ℓ_i = log Σ_j e^{s_ij}, dP_ij = dO_i · v_j, D_i = Σ_j P_ij dP_ij = dO_i · O_i,
// dS_ij = P_ij (dP_ij - D_i), dQ_i = σ Σ_j dS_ij k_j, dK_j = σ Σ_i dS_ij q_i, dV_j = Σ_i P_ij dO_i
// (the sums over i run over every query row of the kv head's group that sees key j).
//
// The algorithms (a correct backward in the declared arithmetic is either):
//  (FA) FlashAttention-2's backward (Dao 2023, Algorithm 2): P̃_ij = exp(ŝ_ij - ℓ̂_i) recomputed
//       from the stored LSE ℓ̂ (or exp2 of the log2-scaled pieces), D̃_i = fl(dO_i · Ô_i) from the
//       stored output, dS̃ = P̃ ∘ (dP̃ - D̃), dQ = σ dS̃ K, dK = σ dS̃ᵀ Q, dV = P̃ᵀ dO, any tiling, any
//       order of every sum (dQ accumulated by atomics), P and dS rounded to storage before their
//       products when weights_in_storage (FlashAttention fp16/bf16).
//  (M)  the autograd of the math path: P̃ the forward's softmax (one pass: the maximum, exps, the
//       sum, a division), saved; D̃_i = fl(Σ_j P̃_ij dP̃_ij) (softmax's backward); the same products;
//       with scores_in_storage (PyTorch's math path in fp16/bf16) every intermediate tensor is
//       rounded to storage: P̃, dP̃, dS̃, the products' results, the scaled query.
// Units as the forward's (tensor_band.cpp): u (compute), u_s and h_s (storage: the coarser unit of
// the query's and K/V's formats, and the sum of both half-subnormal spacings), λ the smallest normal
// of compute (a flush to zero errs by at most λ), θ_n and γ_n, η' = -log1p(-2·exp_ulps·u), c_σ = 2
// when the scale is defaulted (else 1), g_p = γ_{c_σ+4} + γ_2 (Step 3's argument roundings).
//
// Step B1 (scores). |ŝ_ij - s_ij| <= e_ij and |s_ij| <= R_ij: the forward's Steps 1, 2, 2'
// (ScoreErrorModel), the same routes (where the scale is applied, FMA, intermediates in storage).
// Step B2 (weights). P̃_ij = P_ij e^{θ_ij}, |θ_ij| <= Θ_ij := max(Θ^FA, Θ^M):
//   (FA) the argument deviates from s_ij - ℓ_i by the score's error, the stored LSE's Δ_i >= |ℓ̂_i - ℓ_i|
//        (measured from the given LSE, else the forward's LSE band, Step L, kept in compute: FlashAttention's
//        fp32), and
//        its formation's roundings (as Step 3, of |ŝ| + |ℓ̂|); exp adds η':
//        Θ^FA = e_ij + Δ_i + g_p (R_ij + e_ij + |ℓ_i| + Δ_i) + η'.
//   (M)  ê_ij = exp(fl(ŝ_ij - m̂_i))(1 + ε) with m̂ = max ŝ: the shift m̂ - m cancels in the
//        normalization, so ê_ij = e^{s_ij - m} λ_ij with |log λ_ij| <= x_ij := e_ij + g_p (R_ij + e_ij +
//        P_i) + η' (P_i := max_j (R_ij + e_ij) >= |m̂|); the sum of n_i positive terms and the
//        division are θ_{n_i}; the mean Σ_j P_ij λ_ij lies within e^{±max_j x_ij}:
//        Θ^M = x_ij + max_j x_ij - log1p(-γ_{n_i+1}).
//   Each bound is a bound for its algorithm; the band is monotone in Θ, so the larger holds for both
//   (GradientAlgorithm::either); a declared algorithm takes its own (flash: Θ^FA, math: Θ^M).
//   π_ij := P_ij expm1(Θ_ij) + λ >= |P̃ - P| (a flushed exp); P rounded to storage (weights or
//   scores in storage: the saved softmax of (M), P before dV in (FA)) adds u_s |P̃| + h_s. P̄_ij :=
//   P_ij + π_ij >= |P̃_ij|.
// Step B3 (dP). dP̃_ij = fl(dO_i · v_j): |dP̃ - dP| <= ε^P_ij := γ_{Ev+c_v} A_ij + 2 Ev λ, A_ij = Σ_c
//   |dO_ic v_jc| (c_v = 1 when inputs convert to compute); rounded to storage (M, intermediates):
//   + u_s (|dP| + ε^P) + h_s.
// Step B4 (D). Its error d_i >= |D̃_i - D_i| is the larger of
//   (FA) |dO · Ô - D| + γ_{Ev+c_v+1} Σ_c |dO_c Ô_c| + 2 Ev λ with the given output Ô (|dO · Ô - D|
//        from the enclosure of D and Ô's exact dot product), else Σ_c |dO_c| δ_c + γ_{Ev+c_v+1}
//        Σ_c |dO_c| (|O_c| + δ_c) + 2 Ev λ with δ the output's certified band;
//   (M)  Σ_j π_ij |dP_ij| + Σ_j P̄_ij ε^P_ij + γ_{n_i+1} Σ_j P̄_ij (|dP_ij| + ε^P_ij) + 2 n_i λ, and with
//        intermediates in storage Σ_j (u_s P̄_ij (|dP_ij| + ε^P_ij) + h_s) (PyTorch's CUDA softmax
//        backward rounds dO·P, i.e. P dP, to storage before the sum).
//   (Either algorithm: the larger; declared: its own.) A row that only feeds key rows may take
//   |dP_ij| <= A_ij <= ‖dO_i‖₁ max_c |v_jc| in (M) instead of computing dP (sums of magnitudes only:
//   nothing squared to underflow or overflow).
//   This is the term that does not average out: it enters every key of the row with one sign.
// Step B5 (dS). With a_ij = dP_ij - D_i and ε^a = ε^P_ij + d_i (the error of dP̃ - D̃), the
//   subtraction and the product rounding once each:
//   |dS̃ - dS| <= ε^S_ij := π_ij |a| + P̄_ij ε^a + γ_2 P̄_ij (|a| + ε^a) + λ,
//   with intermediates in storage the CUDA form fl(fl(P dP) - fl(P D)) adds u_s P̄_ij (|dP| + ε^P) + h_s
//   and u P̄_ij (|D_i| + d_i);
//   rounded to storage (weights or scores in storage) + u_s (P_ij |a| + ε^S) + h_s; and
//   |dS̃| <= μ_ij := P_ij |a| + ε^S.
// Step B6 (dQ, dK). dQ_ic = σ Σ_j dS_ij k_jc over n terms (dK: over the rows that see key j). The
//   kernel forms fl(σ̂ Σ̂ fl(dS̃ k)) in any order, σ̂ = σ θ_{c_σ} applied before or after the sum (or
//   to K, or to Q in the math path: one rounding either way): Higham's (3.5) gives
//   |dQ̃_c - dQ_c| <= |σ| [(1 + γ_{c_σ+2}) Σ_j ε^S_j |k_jc| + γ_{n+c_σ+2+c_v} Σ_j μ_j |k_jc|] + (n + 2) λ max(1, |σ|).
//   Intermediates in storage (M): the matrix product's result rounded, then the product by σ:
//   + γ_2(u_s) (that + |σ| Σ μ |k|) + 2 h_s. With query_in_storage the other side is read pre-scaled
//   and rounded to storage: dK the scaled query (the math path), dQ a pre-scaled key (the Triton
//   tutorial's k·(σ log2 e) in fp16, whose scores Step B1 covers only with query_in_storage):
//   + u_s |σ| Σ μ |f_c| (1 + γ_2) + h_s max(1, σ, √σ) Σ μ. Under GQA the G heads' results may each be
//   rounded to the gradient's storage before the group's sum (FlashAttention 2 writes dk_expanded in the
//   input dtype; the math path rounds twice per head): + γ_G(u_g) (that + |σ| Σ μ |q|) + G h_g (2G + 1
//   with intermediates in storage), whenever the storage is coarser than compute.
// Step B7 (dV). dV_jc = Σ_i P_ij dO_ic: |dṼ_c - dV_c| <= Σ_i π_i |dO_ic| + γ_{n+1+c_v} Σ_i P̄_i |dO_ic|
//   + (n + 1) λ; intermediates (and GQA) in storage as in B6 without σ.
// Step B10 (the additive mask's gradient). s_ij = σ q_i·k_j + β_ij, so dβ_ij = dS_ij; an element
//   broadcast over positions Π (dimensions of size 1 in the mask's shape) gets Σ_{Π} dS over its n
//   terms that take part (0 when none does: exactly zero). The kernel's dS̃ per term (Step B5, its
//   storage rounding included) summed in any order in compute: Σ ε^S + γ_{n+1+c_v} Σ μ + (n + 2) λ
//   (B7's form with the factor 1; n + 1 covers the n - 1 additions), with intermediates in storage the
//   sum's result rounded to storage; then Step B8 in the mask's format (the query's dtype).
// Step B11 (softcap). s_ij = c·t_ij + β_ij with t = tanh(x/c), x = σ q_i·k_j, so ∂s/∂x = f := 1 - t²
//   and dQ, dK take dS·f where dβ and dV keep dS. The score's error e (Step B1, met by c·t̂ before the
//   bias) bounds |t̂ - t| <= ε_t := e/c; the kernel's f̂ = 1 - t̂² (or (1 - t̂)(1 + t̂)) errs by at most
//   (2|t̄| + ε_t) ε_t from t̂ and γ_3 (f̄ + t̄²) + 3λ from its own roundings (in storage with
//   intermediates: autograd's saved tanh). fl(dS̃ f̂) and the scale's split (σ/c then c; autograd's
//   three roundings by c, by 1 - y², by 1/c in storage, whose flushes count (2 + max(1, 1/c)) h_s:
//   the middle one is scaled by 1/c after it) add γ_3 + γ_3(u_s) of |dS| F̄, F̄ = f̄ + ε_f;
//   so |dS̃ f̂ - dS f| <= ε^S F̄ + |dS| ε_f + rounding, which replaces dS's error in Step B6's terms.
//   The enclosure of t is tanh of the outward interval of x/c (tensor_oracle's rigorous tanh).
// Step B12 (sinks). A sink z_h joins the denominator: ℓ_i = log(Σ_j e^{s_ij} + e^{z_h}), P_iz =
//   e^{z_h - ℓ_i}, no value, so dP_iz = 0 and dS_iz = -P_iz D_i: dz_h = -Σ_i P_iz D_i over the head's
//   B·L rows (every query row of head h). P̃_iz is a weight as any other (Step B2 with R = |z| and e
//   the error of z as the kernel reads it: rounded to compute, and to storage too with intermediates,
//   the math path's concatenated logit column), and D̃_i's error d_i is Step B4's, so each term errs by
//   π_z |D_i| + P̄_z d_i, and with intermediates in storage (the math path's softmax backward
//   returns dS_iz rounded to storage before the sum over rows) u_s P̄_z (|D_i| + d_i) + h_s more; the
//   sum over rows is Step B7's form with factor -1 in fp32 (the sinks' format in FlashAttention and
//   gpt-oss; a kernel with bf16 sink parameters returning a bf16 dsinks is outside it), then Step B8
//   in fp32. Every row's total, its LSE (FA) and
//   its Θ (M) include the sink term, so P of the other keys carries it too.
// Step B8 (storage). Each gradient is stored in its tensor's format (dQ the query's, dK and dV K's and
//   V's: a kernel with an fp16 cache returns their gradients in fp16), unit u_g and half-spacing h_g;
//   rounded once more when coarser than compute: δ = δ' + u_g (|g| + δ') + h_g with |g| the
//   enclosure's upper end. Every bound is evaluated in round-to-nearest from non-negative terms and
//   multiplied by 1 + 2^-20 (fewer than 2^30 roundings of relative 2^-53).
// Step B9 (what it does not cover). Judgements, as the forward's: exp within exp_ulps; round-to-nearest
//   throughout (a tensor core's truncating MMA accumulation is outside these γ's, as in the forward);
//   the flushes of Σ̂ in Θ^M are left out (below λ n against a sum >= 1: negligible unless compute is
//   fp16); dout is read in the output's format (validate_backward refuses one that is not); the stored LSE
//   is read in the units it was written in (a kernel reading a log2 LSE as natural is a bug, and is
//   caught); a kernel that forms D_i from a coarser copy of O than the one it returned (FlashAttention
//   keeps O in storage: give that) is judged against the given one. Size: δ grows like n·u in the sums
//   (worst case, as the forward's certified tier), and (M)'s normalization adds n·u to every weight.
//
// Statistical tier. Model S of the forward (tensor_band.cpp): every rounding's relative error an
// independent mean-zero variable, |δ| <= u (u_s into storage), except that operations the analysis
// cannot tell apart repeat their error: a block of them is one variable. Blocks (single linkage of
// overlapping intervals, each widened by its certified error): a term's score roundings repeat across
// terms whose scaled dot products may be equal; its dP's across dP enclosures; its own roundings and
// its addition (a repeated addend) across terms whose computed weight and dP may both coincide
// (counted as the smaller of the two blocks, an upper bound; off SB5's route the weight's block
// alone). Stagnation is not mean-zero: an addend below kStagnation·u of its partial sum may round
// back every time, with one sign, so such terms count at their worst (SB1, SB3, SB4). Taken
// statistically: the parts of δ that grow with n (SB1-SB4), and for a declared FlashAttention
// backward the terms' own roundings (SB5); everything else stays at its worst case (the stored
// LSE's and D's errors, which do not average out, every exp, the argument's formation, the scale,
// the subnormal parts, the roundings a whole row or key shares):
// Step SB1 (a sum's additions). A sum of n terms x_j, computed in any order, has n - 1 additions,
//   each rounding its result s_r with |s_r| <= H: H := (1 + γ_F) max(Σ_j x_j^+, Σ_j x_j^-) over the
//   terms' bounds on the whole error cube (any subset is a partial sum), F the term's other
//   roundings. f(δ) is multilinear in the additions' δ: f - f(0) = Σ_r δ_r ∂_r f(0) + R₂ with
//   |R₂| <= (γ_{n-1} - (n-1)u) Σ_j |x_j| and |∂_r f| <= H (1 + γ_{n-1}) on the cube. McDiarmid's
//   inequality over the blocks B of the additions (n_B of them, one variable of bounded difference
//   2u n_B H (1 + γ_{n-1})) gives, with
//   probability >= 1 - 2 exp(-λ²/2),
//   |f - f(0)| <= λ u √(Σ_B n_B²) H (1 + γ_{n-1}) + (γ_{n-1} - (n-1)u) Σ_j |x_j|        (A_n)
//   (E f - f(0) = E R₂: the first order has mean zero). The terms' own errors are taken at f(0)
//   (conditionally on them the additions' δ are still independent and mean zero). Stagnation: a term
//   whose computed value may be below τ := kStagnation u H errs, when added, by at most itself (round
//   to nearest), with no mean-zero claim: + Σ_{such j} min(|x̃_j|, τ) at its worst.
// Step SB2 (the gradients, B6, B7, B10). γ_{n+F} Σ μ |f| becomes γ_F Σ μ |f| + A_n with x_j = μ_j f_j,
//   F = c_σ + 3 + c_v for dQ and dK (the product, the scale's c_σ + 2, a conversion), 2 + c_v for dV
//   and dβ. H: the terms' positive and negative parts from their enclosures ± (radius + certified error).
// Step SB3 (the math path's normalization, B2). ℓ̂ = Σ ê_j: -log1p(-γ_{n+1}) in Θ^M becomes
//   -log1p(-ν) - log1p(-γ_2) with ν the relative (A_n) for positive terms (H = Σ ê_j (1 + γ_{n-1}), so
//   ν = λ u √(Σ_B n_B²) (1 + γ_{n-1})² + γ_{n-1} - (n-1)u), the division and one more rounding at their
//   worst; blocks by the weights' enclosures widened by e^{±x_j} (keys whose exps may coincide); the
//   exps that may stagnate (P_j e^{±x_j} below 2.25 kStagnation u) add Σ min(P̄_j e^{x_j}, that) to ν.
// Step SB4 (the math path's D, B4). D̃ = fl(Σ_j P̃_j dP̃_j): γ_{n+1} Σ_j P̄_j (|dP_j| + ε^P_j) becomes
//   γ_2 times it plus (A_n) with H = (1 + γ_2) Σ_j P̄_j (|dP_j| + ε^P_j) (no sign taken; with
//   intermediates in storage (1 + u_s) times it plus n h_s), blocks and stagnation as SB3's.
// Step SB5 (GradientAlgorithm::flash, scores neither in storage nor read pre-scaled: the terms do
//   not share a normalization, and each P̃_ij = exp(ŝ_ij - ℓ̂_i), dP̃_ij and dS̃_ij is its own). For a
//   term x̃_j (dS, or P for dV) the worst case keeps θ^w = Δ_i + g_p (R + e + |ℓ| + Δ) + η' + h (h the
//   score error's subnormal part), π^w = P expm1(θ^w) + λ, and for dS ω = π^w â + P̄ (d + 2 Ev λ) + λ
//   (+ h_s (â + 1) with P and dS in storage), â := |dP - D| + ε^P + d >= |dP̃ - D̃|; the rest is
//   first order in its own roundings plus a second-order part: with ρ := e (bounding the score's own
//   shift z), η := ε^P / â, m := 4 own roundings (subtraction, product, P and dS to storage) of unit
//   u_m, the remainder of P e^{θ^w + z} (Y + y) Π(1 + δ) beyond its linear part is at most
//   P̄ â [(expm1(ρ) - ρ)(1 + γ_m) + ρ (η + γ_m)(1 + γ_m) + η γ_m + γ_m - m u_m] + P̄ (γ_{n_P} - n_P u) A^P
//   (dV: P̄ [(expm1(ρ) - ρ)(1 + u_s) + ρ u_s]). The bounded differences (over u, sup on the cube):
//   the score's n_s = 3E + 2 roundings (as the forward's S1: partial results <= R + e, ∂x̃/∂ŝ = x̃)
//   (R + e) μ each (exp's error a fixed unknown within η' of each term, as in the forward's Model S,
//   not a function of the δ's); dP's n_P = 2Ev - 1 + 2Ev c_v roundings A^P (1 + γ_Ev) P̄ (1 + u)² (1 + u_s)²;
//   the own ones P̄ â (1 + u)² (1 + u_s)² (two in u, two in u_s with storage); dV: (R + e) P̄ and
//   u_s P̄. Every difference times |f_j| and G = 1 + γ_{n-1+F} (the additions and roundings after the
//   term). A block's variable has difference at most Σ_{j in B} C_j, and (Σ_B C_j)² <= n_B Σ_B C_j²
//   (Cauchy-Schwarz), so V_c := Σ_j f_jc² G² (n^S_j s_j² + n^P_j p_j² + n^T_j o_j²) u². The roundings
//   of Q's or K's components that a whole sum shares (a side scaled or converted once: up to 3 per
//   component on each side) are one variable each, of difference Σ_j μ_j |f_j| σ |q_c k_jc|: by
//   Minkowski their squares sum to at most C_c := 6 (Σ_j μ_j |f_jc| σ ℓ2_j)², ℓ2_j := √Σ_c (q_c k_jc)².
//   With SB1's additions in the same McDiarmid sum and SB1's stagnation Σ_stag:
//   δ_S = σ [(1 + γ_{c_σ+2}) Σ_j (ω_j + R₂_j) |f_j| + γ_F Σ μ |f| + λ √(V_c + u² C_c + A_spread²)
//   + A_second + Σ_stag] + flush, then B6-B8's storage terms as the certified band's (the GQA heads'
//   roundings on the certified δ: the statistical event bounds only the group's total).
// SB3 and SB4 are one event per query row, SB2 and SB5 one per element: λ makes 2 N exp(-λ²/2) = α for N
// the elements of every gradient plus two per query row (a union bound over all of them, so each
// report's false alarm probability is at most α). A statistical δ above the certified one is cut
// to it. What the tier is worth: the sums' n u becomes about λ √n u; the math path's normalization
// and D likewise; with SB5 the terms' own errors add in quadrature. Still worst case: every addition's
// partial sum is bounded by H (any order), about half of Σ |x_j| where the exact sum cancels to √n of
// a term: a declared summation order (as the forward's KernelStructure) would narrow it further.
//
// The oracle. The enclosures come from the forward oracle's rows (enclose_row_fast, else MPFI at 64
// bits): ℓ_i and O_i enclosed, D_i = dO_i · O_i, P_ij (dQ: the row's weights; dK, dV: e^{s_ij - ℓ_i}
// from the score's enclosure and ℓ_i's), dP_ij and dS_ij = P_ij (dP_ij - D_i) in outward-rounded
// double intervals, the gradient sums as midpoint sums with ProductSumBound plus the radii. An
// element whose enclosure is wider than δ/1000 (fp64 kernels, always) is decided by the MPFI
// gradients (enclose_gradients) at 128 bits, doubling to 512, for problems up to kMpfiWork.

namespace attn::verify {
using detail::parallel_for;
using detail::report_of;
using detail::RowOutcome;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kSafety = 1 + 0x1p-20;
constexpr double kStagnation = 8;  // Step SB1: an addend below kStagnation·u of its partial sum may stagnate

Interval subtract(Interval a, Interval b) { return add(a, {-b.hi, -b.lo}); }
double magnitude(Interval a) { return std::max(std::fabs(a.lo), std::fabs(a.hi)); }
double mignitude(Interval a) { return a.lo > 0 ? a.lo : a.hi < 0 ? -a.hi : 0.0; }  // min |x| over a

// The arithmetic's constants (the derivation's units).
struct Units {
  double u = 0, lambda = 0, u_s = 0, h_s = 0, eta_prime = 0, g_piece = 0, c_sigma = 1, c_v = 0;
  double g2 = 0, g_dp = 0, g_d = 0;
  bool p_storage = false;  // P, and dS alike, rounded to storage before their products (weights or scores in storage)
  bool intermediates = false, q_storage = false;
  double side_scale = 1;  // max(1, σ, √σ): the factor on a pre-scaled side's subnormal roundings
  bool flash = true, math = true;  // the algorithms the band covers (GradientAlgorithm)
  double lambda_s = 0;             // the statistical tier's λ (Step SB1)
  bool random_terms = false;       // Step SB5's route: FlashAttention's backward declared, plain scores
  double softcap = 0;              // Step B11: c of c·tanh(x/c), 0 off
};

// Upper bounds of expm1(θ) and of expm1(θ) - θ for θ >= 0, without libm on the small arguments of
// the bands: for θ <= 1/2, Σ_{k>=2} θ^k/k! = θ²/2 (1 + θ/3 + θ²/12 + ...) <= θ²/2 (1 + θ) <= θ², so
// expm1(θ) <= θ (1 + θ); libm's expm1 (within an ulp, which kSafety covers) above.
double expm1_up(double theta) { return (theta <= 0.5 ? theta * (1 + theta) : std::expm1(theta)) * kSafety; }
double expm1_second_up(double theta) {
  return (theta <= 0.5 ? 0.5 * theta * theta * (1 + theta) : std::expm1(theta) - theta) * kSafety;
}

// γ_m - m u (the second-order part of m roundings), rounded up.
double second_order(double m, double unit) {
  const double x = m * unit;
  return x < 0.5 ? x * x / (1 - x) * kSafety : kInf;
}

// Step SB1 (A_n) in two parts: the additions' bounded difference u √(Σ_B n_B²) H (1 + γ_{n-1}) (under
// λ's square root with the other random variables) and the second-order part (γ_{n-1} - (n-1)u) mag,
// for a sum of n terms whose partial sums are at most H, Σ_B n_B² = `squares`, Σ |x_j| = `mag`.
struct Additions {
  double spread = 0, second = 0;
};
Additions additions_of(const Units& u, double n, double squares, double H, double mag) {
  if (n < 2) return {};
  return {u.u * std::sqrt(squares) * H * (1 + gamma_bound(n - 1, u.u)) * kSafety, second_order(n - 1, u.u) * mag};
}

// Step SB5 (FlashAttention's backward declared, the plain route): one term's parts. `worst` and
// `second` join the statistical error sum (times |f|); score, dp and own are the square roots of
// the sums of squared bounded differences (over u) of its score's, its dP's and its own roundings
// (times |f|, their blocks' sizes and G in finish: square roots, so that tiny values do not
// underflow when squared).
struct RandomTerm {
  double worst = 0, second = 0, score = 0, dp = 0, own = 0;
  double common = 0;  // the bounded difference of the shared side's roundings, per component (Minkowski)
};

// A term's Model S blocks: its score roundings' (the scaled dot product's enclosure widened by the
// score's error), its computed weight's (P's enclosure widened by its certified error π) and its dP's.
struct TermBlocks {
  Interval dot{0, 0}, weight{0, 0}, dp{0, 0};
};

// Model S's blocks: operations on equal operands repeat their errors, and so do operations on
// computed values that may coincide. An interval widened by its error covers every computed value.
Interval widened(Interval x, double e) { return {x.lo - e, x.hi + e}; }

// Each element's block size n_B from its block id (ids 0, 1, ..., as overlap_blocks numbers them).
std::vector<double> block_sizes(const std::vector<std::size_t>& id) {
  std::vector<double> count(id.size(), 0.0), size(id.size());
  for (std::size_t b : id) count[b] += 1;
  for (std::size_t k = 0; k < id.size(); ++k) size[k] = count[id[k]];
  return size;
}

// √(Σ_k x_k²) for non-negative x_k, rounded up, without the squares' underflow or overflow.
double root_sum_squares(std::initializer_list<double> xs) {
  double top = 0;
  for (double x : xs) {
    if (std::isnan(x)) return kInf;
    top = std::max(top, x);
  }
  if (!(top > 0) || !std::isfinite(top)) return top;
  double sum = 0;
  for (double x : xs) sum += (x / top) * (x / top);
  return top * std::sqrt((sum + 0x1p-1070) * kSafety) * kSafety;
}

// The format a gradient is stored in (dQ: the query's, dK and dV: K's and V's).
struct OutputFormat {
  double u = 0, h = 0;  // unit roundoff, half the smallest subnormal
  bool rounds = false;  // coarser than compute: the gradient is rounded once more
};
OutputFormat output_format(DType dtype, const Units& units) {
  return {unit_roundoff(dtype), half_smallest_subnormal(dtype), unit_roundoff(dtype) > units.u};
}

// The statistical tier's λ: one union bound over every gradient element (an additive mask's counted
// whether or not its gradient is given) and two events per query row (SB3, SB4).
double backward_lambda(const TensorProblem& p, double alpha) {
  const std::size_t rows = p.batch * p.q_heads * p.L, keys = p.batch * p.kv_heads * p.S;
  const std::size_t mask = p.mask_kind == TensorMask::additive ? p.mask.size() : 0;
  return statistical_lambda(alpha, rows * p.E + keys * (p.E + p.Ev) + mask + p.sinks.size() + 2 * rows);
}

Units units_of(const TensorProblem& p, const Arithmetic& a, GradientAlgorithm algorithm, double lambda) {
  Units u;
  u.lambda_s = lambda;
  const DType kv = a.kv_storage.value_or(a.storage);
  u.u = unit_roundoff(a.compute);
  u.lambda = smallest_normal(a.compute);
  u.u_s = std::max(unit_roundoff(a.storage), unit_roundoff(kv));
  u.h_s = half_smallest_subnormal(a.storage) + (kv != a.storage ? half_smallest_subnormal(kv) : 0.0);
  u.eta_prime = -std::log1p(-2 * a.exp_ulps * u.u);
  u.c_sigma = p.scale ? 1 : 2;
  u.g_piece = gamma_bound(u.c_sigma + 4, u.u) + gamma_bound(2, u.u);
  u.c_v = (unit_roundoff(a.storage) < u.u || unit_roundoff(kv) < u.u) ? 1 : 0;
  u.g2 = gamma_bound(2, u.u);
  u.g_dp = gamma_bound(static_cast<double>(p.Ev) + u.c_v, u.u);
  u.g_d = gamma_bound(static_cast<double>(p.Ev) + u.c_v + 1, u.u);
  u.p_storage = a.weights_in_storage || a.scores_in_storage;
  u.intermediates = a.scores_in_storage;
  u.q_storage = a.query_in_storage;
  const double sigma = p.scale ? std::fabs(*p.scale) : 1 / std::sqrt(static_cast<double>(p.E));
  u.side_scale = std::max({1.0, sigma, std::sqrt(sigma)});
  u.flash = algorithm != GradientAlgorithm::math;
  u.math = algorithm != GradientAlgorithm::flash;
  u.softcap = p.softcap;
  u.random_terms = !u.math && !u.intermediates && !u.q_storage && u.c_v == 0 && !(p.softcap > 0);
  return u;
}

// What Phase A keeps of one query row for the key rows' sums (Phase B).
struct RowStats {
  bool has_keys = false;
  Interval lse{0, 0};  // ℓ_i
  Interval D{0, 0};    // D_i
  double abs_lse = 0, delta = 0, d = 0;
  double P = 0, x_max = 0, log_norm = 0;  // (M): max_j (R + e), max_j x_j, -log1p(-γ_{n+1})
  double log_norm_s = 0, d_s = 0;         // the statistical tier's log_norm (SB3) and d (SB4)
  double abs_query = 0;                   // Σ_c |q_c| (query_in_storage)
  Interval sink{0, 0};                    // the sink's weight P_iz (Step B12), with a sink
};

// Step B2 for one key of a row.
struct Weight {
  double pi = 0;    // >= |P̃ - P|
  double used = 0;  // >= |P̃|
};
double theta_of(const Units& u, const RowStats& r, double R, double e, bool statistical = false) {
  const double fa = u.flash ? e + r.delta + u.g_piece * (R + e + r.abs_lse + r.delta) + u.eta_prime : 0.0;
  const double x = e + u.g_piece * (R + e + r.P) + u.eta_prime;
  const double math = u.math ? x + r.x_max + (statistical ? r.log_norm_s : r.log_norm) : 0.0;
  if (!(fa >= 0) || !(math >= 0)) return kInf;  // a NaN anywhere: no bound
  return std::max(fa, math);
}
// -log1p(-γ) for the normalization's γ: +inf once γ >= 1 (no bound; log1p would give NaN).
double log_norm_of(double g) { return g < 1 ? -std::log1p(-g) : kInf; }

// Step B4 (M): key j's share of d_math, from its weight's error, |dP_j| <= abs_dp and ε^P_j (and the
// product dO·P rounded to storage first, as PyTorch's CUDA softmax backward does, when intermediates
// are in storage).
double d_math_term(const Units& u, const Weight& w, double abs_dp, double e_p, double g_n) {
  double term = w.pi * abs_dp + w.used * e_p + g_n * w.used * (abs_dp + e_p);
  if (u.intermediates) term += u.u_s * w.used * (abs_dp + e_p) + u.h_s;
  return term;
}
// P's enclosure widened by e^{±x} (for x <= 1/2: e^{-x} >= 1 - x, e^{x} <= 1 + x (1 + x)); above, all.
Interval exp_widened(Interval P, double x) {
  if (!(x <= 0.5)) return {0, kInf};
  return {P.lo * (1 - x) * (1 - 0x1p-50), P.hi * (1 + x * (1 + x)) * (1 + 0x1p-50)};
}

// Step B4 (M) summed over a row's keys, in both tiers (SB4); SB3's blocks (each key's weight
// enclosure widened by e^{±x_j}: keys whose computed exps may coincide) and stagnation (the exps
// that may be below kStagnation u of the sum, relative to it: Σ min(P̄_j, τ)); SB4's terms' bounds.
struct MathRow {
  double d = 0, d_s = 0, mag = 0;  // Σ of B4's terms with γ_{n+1}, with γ_2 (SB4), Σ P̄ (|dP| + ε^P)
  double stagnant = 0;             // SB3: Σ over the exps that may stagnate of min(P̄_j e^{x_j}, τ)
  std::vector<double> lo, hi, term_lo, term_hi;
  void add(const Units& u, const Weight& w, double abs_dp, double abs_dp_lo, double e_p, double g_n, Interval P,
           double x) {
    d += d_math_term(u, w, abs_dp, e_p, g_n);
    if (!u.math) return;
    d_s += d_math_term(u, w, abs_dp, e_p, u.g2);
    mag += w.used * (abs_dp + e_p);
    const Interval block = exp_widened(P, x);
    lo.push_back(block.lo), hi.push_back(block.hi);
    const double tau = 2.25 * kStagnation * u.u;  // (1 + γ_{n-1})² <= 2.25 while ν < 1/2
    if (block.lo < tau) stagnant += std::min(block.hi, tau);
    term_lo.push_back(std::max(0.0, std::max(0.0, P.lo - w.pi) * (abs_dp_lo - e_p)));
    term_hi.push_back(w.used * (abs_dp + e_p));
  }
};

// From expm1(Θ) of the key (or a larger one).
Weight weight_of(const Units& u, double P_hi, double expm1_theta) {
  Weight w;
  w.pi = P_hi * expm1_theta + u.lambda;
  w.used = P_hi + w.pi;
  if (u.p_storage) w.pi += u.u_s * w.used + u.h_s, w.used = P_hi + w.pi;
  return w;
}

// Step B3: the error of dP̃ from |dP| <= abs_dp and A (upper bounds).
double dp_error(const Units& u, std::size_t Ev, double abs_dp, double A) {
  double e = u.g_dp * A + 2 * static_cast<double>(Ev) * u.lambda;
  if (u.intermediates) e += u.u_s * (abs_dp + e) + u.h_s;
  return e;
}
double dp_error(const Units& u, std::size_t Ev, const DotEnclosure& dp) {
  return dp_error(u, Ev, magnitude(dp.value), dp.abs_upper);
}

// Step B5: dS enclosed, its error (certified, and statistical from SB3-SB4's weight and d) and its
// magnitude bound.
struct Ds {
  Interval value;
  double err = 0, err_s = 0, mag = 0;
};
double ds_error(const Units& u, Interval P, double abs_a, const Weight& w, double abs_dp, double e_dp, Interval D,
                double d) {
  const double e_a = e_dp + d;
  double err = w.pi * abs_a + w.used * e_a + u.g2 * w.used * (abs_a + e_a) + u.lambda;
  // PyTorch's CUDA softmax backward rounds dP·P to storage before subtracting P·D (rounded in compute).
  if (u.intermediates) err += u.u_s * w.used * (abs_dp + e_dp) + u.h_s + u.u * w.used * (magnitude(D) + d);
  if (u.p_storage) err += u.u_s * (P.hi * abs_a + err) + u.h_s;
  return err;
}
Ds ds_of(const Units& u, Interval P, const Weight& w, const Weight& w_s, const DotEnclosure& dp, double e_dp,
         const RowStats& r) {
  const Interval a = subtract(dp.value, r.D);
  const double abs_a = magnitude(a), abs_dp = magnitude(dp.value);
  const double err = ds_error(u, P, abs_a, w, abs_dp, e_dp, r.D, r.d);
  const double err_s = std::min(err, ds_error(u, P, abs_a, w_s, abs_dp, e_dp, r.D, r.d_s));
  return {multiply(P, a), err, err_s, P.hi * abs_a + err};
}

#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define ATTN_BACKWARD_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#endif
#endif
#ifndef ATTN_BACKWARD_CLONES
#define ATTN_BACKWARD_CLONES
#endif

// GradientSums::add's columns: per column c, the term's midpoint m·f_c into mid and abs, its radius,
// errors and magnitude times |f_c|, and its positive and negative parts widened by its spread. SIMD
// across c (each column's sum keeps its order over the terms).
struct ColumnSums {
  double *mid, *abs, *rad, *err, *err_s, *mag, *pos, *neg;
};
ATTN_BACKWARD_CLONES void accumulate_columns(const ColumnSums& s, const double* __restrict f, std::size_t width,
                                             double m, double r, double x_err, double x_err_s, double x_mag,
                                             double spread) {
  double *__restrict mid = s.mid, *__restrict abs = s.abs, *__restrict rad = s.rad, *__restrict err = s.err;
  double *__restrict err_s = s.err_s, *__restrict mag = s.mag, *__restrict pos = s.pos, *__restrict neg = s.neg;
#pragma omp simd
  for (std::size_t c = 0; c < width; ++c) {
    const double fc = f[c], a = std::fabs(fc), t = m * fc;
    mid[c] += t;
    abs[c] += std::fabs(t);
    rad[c] += r * a;
    err[c] += x_err * a;
    err_s[c] += x_err_s * a;
    mag[c] += x_mag * a;
    pos[c] += std::max(0.0, t) + spread * a;
    neg[c] += std::max(0.0, -t) + spread * a;
  }
}

// One gradient row's sums over its terms x·f_c (x = dS or P, f = a key, query or dout row).
// Per column: the midpoint sum, Σ |mid·f|, the radii, the terms' certified and statistical errors,
// their magnitude bounds, and the positive and negative parts of the computed terms (Step SB1's H);
// per term, x's enclosure widened by its error (Model S's blocks).
struct GradientSums {
  std::vector<double> mid, abs, rad, err, err_s, mag, pos, neg;
  std::vector<double> common;                                          // Step SB5: Σ_j common_j |f_jc|
  std::vector<double> dot_lo, dot_hi, weight_lo, weight_hi, dp_lo, dp_hi;  // per term: its TermBlocks
  std::vector<const double*> term_f;                                    // per term: f, x's midpoint and
  std::vector<double> term_mid, term_spread;                            // spread (SB1's stagnation)
  double total_mag = 0;  // Σ of the terms' magnitude bounds μ
  std::size_t terms = 0;
  // Step SB5: per term, its RandomTerm (its f is term_f's; empty unless every term has one).
  std::vector<RandomTerm> own;
  explicit GradientSums(std::size_t width)
      : mid(width, 0.0), abs(width, 0.0), rad(width, 0.0), err(width, 0.0), err_s(width, 0.0), mag(width, 0.0),
        pos(width, 0.0), neg(width, 0.0), common(width, 0.0) {}
  void reserve(std::size_t n) {
    for (auto* v : {&dot_lo, &dot_hi, &weight_lo, &weight_hi, &dp_lo, &dp_hi, &term_mid, &term_spread}) v->reserve(n);
    term_f.reserve(n);
  }
  void add(const double* f, Interval x, double x_err, double x_err_s, double x_mag, const TermBlocks& blocks,
           const RandomTerm* random = nullptr) {
    if (random) {
      x_err_s = std::min(x_err, random->worst + random->second);
      own.push_back(*random);
    }
    const double m = std::clamp(0.5 * x.lo + 0.5 * x.hi, x.lo, x.hi);
    const double r = std::max(next_up(x.hi - m), next_up(m - x.lo));
    const double spread = r + x_err;  // the computed x lies within m ± spread
    accumulate_columns({mid.data(), abs.data(), rad.data(), err.data(), err_s.data(), mag.data(), pos.data(), neg.data()},
                       f, mid.size(), m, r, x_err, x_err_s, x_mag, spread);
    if (random)
      for (std::size_t c = 0; c < mid.size(); ++c) common[c] += random->common * std::fabs(f[c]);
    dot_lo.push_back(blocks.dot.lo), dot_hi.push_back(blocks.dot.hi);
    weight_lo.push_back(blocks.weight.lo), weight_hi.push_back(blocks.weight.hi);
    dp_lo.push_back(blocks.dp.lo), dp_hi.push_back(blocks.dp.hi);
    term_f.push_back(f), term_mid.push_back(m), term_spread.push_back(spread);
    total_mag += x_mag;
    ++terms;
  }
};

// What the band of a finished row adds beyond Steps B6/B7's sums.
struct Finish {
  bool scaled = true;      // dQ, dK: times σ
  bool q_storage = false;  // dQ, dK under query_in_storage: the other side read pre-scaled and rounded
  double group = 1;        // the heads whose results add (dK, dV under GQA)
  OutputFormat format;     // the gradient's storage
};

// One certified gradient row: the kernel's values, the enclosures, the band.
struct CertifiedRow {
  std::size_t row = 0;
  std::array<std::size_t, 3> index{};  // (b, head, position)
  std::vector<Interval> exact;
  std::vector<FineEnclosure> fine;
  std::vector<double> band, band_s;  // the certified δ and the statistical one (at most δ)
  bool fast = true;
};

// Step SB1's stagnation: an addition whose addend is below kStagnation·u of its partial sum is not
// mean-zero (its result may round back to the partial sum every time); it errs by at most the
// addend. Every term whose computed value may be that small adds min(|x̃_j|, kStagnation u H) at its
// worst case.
std::vector<double> stagnation(const GradientSums& s, const std::vector<double>& H, double g_fixed, const Units& u) {
  const std::size_t width = H.size();
  std::vector<double> tiny(width), total(width, 0.0);
  for (std::size_t c = 0; c < width; ++c) tiny[c] = kStagnation * u.u * H[c] * (1 + g_fixed);
  for (std::size_t j = 0; j < s.terms; ++j) {
    const double* f = s.term_f[j];
    const double m = std::fabs(s.term_mid[j]), w = s.term_spread[j];
    for (std::size_t c = 0; c < width; ++c) {
      const double a = std::fabs(f[c]);
      const double low = (m - w) * a * (1 - g_fixed), high = (m + w) * a * (1 + g_fixed);
      total[c] += low < tiny[c] ? std::min(high, tiny[c]) : 0.0;
    }
  }
  for (double& x : total) x *= kSafety;
  return total;
}

// Steps B6-B8 and the enclosures of one row's gradient from its sums.
void finish(const GradientSums& s, const Units& u, Interval sigma, const Finish& f, CertifiedRow& out) {
  const std::size_t width = s.mid.size();
  const double n = static_cast<double>(s.terms);
  const ProductSumBound bound(std::max<std::size_t>(s.terms, 1));
  const double rad_factor = 1 + 2 * gamma_of(n + 2);
  const double sigma_abs = f.scaled ? magnitude(sigma) : 1.0;
  const double g_depth = gamma_bound(n + (f.scaled ? u.c_sigma + 2 : 1) + u.c_v, u.u);
  const double g_sigma = f.scaled ? gamma_bound(u.c_sigma + 2, u.u) : 0.0;
  const double flush = (n + 2) * u.lambda * std::max(1.0, sigma_abs);
  const double gs2 = gamma_bound(f.scaled ? 2 : 1, u.u_s), g_group = gamma_bound(f.group, std::max(u.u_s, f.format.u));
  // Step SB2: the term's F roundings besides the additions, and the blocks of its additions.
  const double g_fixed = gamma_bound((f.scaled ? u.c_sigma + 3 : 2) + u.c_v, u.u);
  // A term's own block (its own roundings, its addition) lies in both its weight's and its dP's: at
  // most the smaller of the two (off SB5's route, where only the additions need it, the weight's: a
  // superset, one sort fewer).
  const bool with_own = !s.own.empty() && s.own.size() == s.terms;
  const std::vector<double> weight_blocks = block_sizes(overlap_blocks(s.weight_lo, s.weight_hi));
  std::vector<double> score_blocks, dp_blocks, term_blocks = weight_blocks;
  if (with_own) {
    score_blocks = block_sizes(overlap_blocks(s.dot_lo, s.dot_hi));
    dp_blocks = block_sizes(overlap_blocks(s.dp_lo, s.dp_hi));
    for (std::size_t j = 0; j < term_blocks.size(); ++j) term_blocks[j] = std::min(weight_blocks[j], dp_blocks[j]);
  }
  double squares = 0;
  for (double size : term_blocks) squares += size;
  // Step SB5: per column √(Σ_j f_jc² W_j), W_j the term's squared bounded differences times its
  // blocks' sizes and G² (Cauchy-Schwarz: (Σ_{j in B} C_j)² <= n_B Σ_{j in B} C_j²), evaluated as
  // K √(Σ_j (|f_jc| √W_j / K)²) with K the largest |f_jc| √W_j (no square underflows that matters: each
  // lost square is below 2^-1074 K², and n of them are added back).
  std::vector<double> spread(width, 0.0);
  if (with_own) {
    const double G = 1 + gamma_bound(n - 1 + ((f.scaled ? u.c_sigma + 3 : 2) + u.c_v), u.u);
    std::vector<double> root(s.own.size());
    for (std::size_t j = 0; j < s.own.size(); ++j) {
      const RandomTerm& t = s.own[j];
      root[j] = G * root_sum_squares({std::sqrt(score_blocks[j]) * t.score, std::sqrt(dp_blocks[j]) * t.dp,
                                      std::sqrt(term_blocks[j]) * t.own});
    }
    std::vector<double> top(width, 0.0), sum(width, 0.0);
    for (std::size_t j = 0; j < s.own.size(); ++j)
      for (std::size_t c = 0; c < width; ++c) top[c] = std::max(top[c], std::fabs(s.term_f[j][c]) * root[j]);
    for (std::size_t j = 0; j < s.own.size(); ++j)
      for (std::size_t c = 0; c < width; ++c)
        if (top[c] > 0) {
          const double x = std::fabs(s.term_f[j][c]) * root[j] / top[c];
          sum[c] += x * x;
        }
    for (std::size_t c = 0; c < width; ++c)
      spread[c] = top[c] * std::sqrt((sum[c] + n * 0x1p-1070) * kSafety) * kSafety;
  }
  std::vector<double> H(width);
  for (std::size_t c = 0; c < width; ++c) H[c] = (1 + g_fixed) * std::max(s.pos[c], s.neg[c]);
  const std::vector<double> stagnant = stagnation(s, H, g_fixed, u);
  out.exact.resize(width), out.fine.resize(width), out.band.resize(width), out.band_s.resize(width);
  for (std::size_t c = 0; c < width; ++c) {
    const double radius = next_up((bound.error(s.abs[c]) + up_bound(s.rad[c] * rad_factor)) * kRoundingSafety);
    Interval value{next_down(s.mid[c] - radius), next_up(s.mid[c] + radius)};
    if (f.scaled) value = multiply(sigma, value);
    out.exact[c] = value;
    const double head = std::clamp(0.5 * value.lo + 0.5 * value.hi, value.lo, value.hi);
    out.fine[c] = {head, 0, std::max(next_up(value.hi - head), next_up(head - value.lo))};
    const double mag = sigma_abs * s.mag[c];
    // Steps B6-B8 after the sum, for either tier's δ of the sum: the intermediates' and pre-scaled
    // side's roundings, then the GQA heads' (on the certified δ: the statistical event bounds only the
    // group's total, not each head's sum) and the gradient's storage.
    const auto before_group = [&](double delta) {
      if (u.intermediates) delta += gs2 * (delta + mag) + (f.scaled ? 2 : 1) * u.h_s;
      if (f.q_storage) delta += u.u_s * mag * (1 + u.g2) + u.h_s * u.side_scale * s.total_mag;
      return delta;
    };
    const auto after_group = [&](double delta, double certified) {
      // Under GQA each head's result may be rounded to storage before the group's sum (FlashAttention
      // 2 writes dk_expanded in the input dtype; the math path rounds twice per head).
      if ((u.intermediates || f.format.rounds) && f.group > 1)
        delta += g_group * (certified + mag) + (u.intermediates ? 2 * f.group + 1 : f.group) * f.format.h;
      if (f.format.rounds) delta += f.format.u * (magnitude(value) + delta) + f.format.h;
      delta *= kSafety;
      return std::isnan(delta) ? kInf : delta;
    };
    const double certified = before_group(sigma_abs * ((1 + g_sigma) * s.err[c] + g_depth * s.mag[c]) + flush);
    out.band[c] = after_group(certified, certified);
    const Additions add = additions_of(u, n, squares, H[c], (1 + g_fixed) * s.mag[c]);
    const double random = u.lambda_s * root_sum_squares({add.spread, u.u * spread[c], u.u * std::sqrt(6.0) * s.common[c]});
    const double sum_s = (1 + g_sigma) * s.err_s[c] + g_fixed * s.mag[c] + random + add.second + stagnant[c];
    out.band_s[c] = std::min(out.band[c], after_group(before_group(sigma_abs * sum_s + flush), certified));
  }
}

// The key rows certified: all of them when rows is nullopt or covers them; else `rows` key rows of
// ⌈rows / min(S, kKeysPerGroup)⌉ head groups (b, g), at least two (or all there are),
// the groups and then their keys drawn with `seed` (a partial Fisher-Yates shuffle with
// mt19937_64, as sample_rows). A key row needs the statistics of every query row of its group, so
// the groups drawn, not the keys, set the cost.
constexpr std::size_t kKeysPerGroup = 128;

std::vector<std::size_t> shuffled(std::size_t total, std::size_t count, std::mt19937_64& random) {
  std::vector<std::size_t> all(total);
  for (std::size_t k = 0; k < total; ++k) all[k] = k;
  for (std::size_t k = 0; k < std::min(count, total); ++k) std::swap(all[k], all[k + random() % (total - k)]);
  all.resize(std::min(count, total));
  return all;
}

std::vector<char> key_sample(std::size_t groups, std::size_t S, std::optional<std::size_t> rows, std::uint64_t seed) {
  const std::size_t total = groups * S;
  if (!rows || *rows >= total) return std::vector<char>(total, 1);
  std::vector<char> chosen(total, 0);
  std::mt19937_64 random(seed);
  const std::size_t per_group = std::min(S, kKeysPerGroup);
  const std::size_t wanted = std::max<std::size_t>(2, (*rows + per_group - 1) / per_group);
  std::vector<std::size_t> drawn = shuffled(groups, wanted, random);
  std::sort(drawn.begin(), drawn.end());
  const std::vector<std::size_t> keys = shuffled(drawn.size() * S, *rows, random);
  for (std::size_t k : keys) chosen[drawn[k / S] * S + k % S] = 1;
  return chosen;
}

// The additive mask's shape padded to rank 4 with leading 1s: [mB, mH, mL, mS].
std::array<std::size_t, 4> mask_dims(const TensorProblem& p) {
  std::array<std::size_t, 4> d{1, 1, 1, 1};
  const std::size_t rank = p.mask_shape.size();
  for (std::size_t k = 0; k < rank; ++k) d[4 - rank + k] = p.mask_shape[k];
  return d;
}
// The positions [first, last) of an axis of `size` that a mask dimension `dim` maps onto index `at`.
std::array<std::size_t, 2> broadcast_range(std::size_t dim, std::size_t at, std::size_t size) {
  return dim == 1 ? std::array<std::size_t, 2>{0, size} : std::array<std::size_t, 2>{at, at + 1};
}

// The cheap checks of one gradient row (finite; exactly zero when `zero`).
void cheap_checks(std::span<const double> grad, std::size_t first, std::size_t width, std::array<std::size_t, 3> at,
                  bool zero, DType dtype, const char* zero_reason, RowOutcome& outcome,
                  const char* zero_nan_reason = "NaN in a fully masked row") {
  for (std::size_t c = 0; c < width; ++c) {
    const double got = grad[first + c];
    const char* reason = std::isnan(got) ? (zero ? zero_nan_reason : "NaN")
                         : std::isinf(got) ? "Inf"
                         : zero && got != 0 ? zero_reason
                                            : nullptr;
    if (reason)
      outcome.failures.push_back(
          {{at[0], at[1], at[2], c}, got, {0, 0}, 0, 0, 0, std::fabs(got) / ulp_of(dtype, 0), kInf, reason});
  }
}

// Σ_c x_tc y_jc and Σ_c |x_tc y_jc| for the m rows t of X (`ldx` apart) and the n rows j of Y (`ldy`
// apart), into sums[t·n + j]: each row of Y read once for the block's m rows of X (which stay in L1),
// SIMD across c (the lanes reassociate the sums: ProductSumBound covers any order).
ATTN_BACKWARD_CLONES void block_dots(const double* __restrict X, std::size_t ldx, std::size_t m,
                                     const double* __restrict Y, std::size_t ldy, std::size_t n, std::size_t length,
                                     double* __restrict sums, double* __restrict abs_sums) {
  for (std::size_t j = 0; j < n; ++j) {
    const double* y = Y + j * ldy;
    for (std::size_t t = 0; t < m; ++t) {
      const double* x = X + t * ldx;
      double sum = 0, abs = 0;
#pragma omp simd reduction(+ : sum, abs)
      for (std::size_t c = 0; c < length; ++c) {
        const double term = x[c] * y[c];
        sum += term;
        abs += std::fabs(term);
      }
      sums[t * n + j] = sum, abs_sums[t * n + j] = abs;
    }
  }
}

// σ enclosed: the given scale exactly, else 1/√E (sqrt and the division, each <= 1/2 ulp).
Interval sigma_of(const TensorProblem& p) {
  if (p.scale) return {*p.scale, *p.scale};
  const double E = static_cast<double>(p.E);
  return {next_down(next_down(1 / std::sqrt(E))), next_up(next_up(1 / std::sqrt(E)))};
}
Arithmetic arithmetic_of(const CertifyOptions& options, const TensorProblem& p) {
  Arithmetic a = options.arithmetic;
  a.kv_storage = p.kv_dtype;
  return a;
}

class Backward {
 public:
  Backward(const TensorProblem& p, std::span<const double> dout, const CertifyOptions& options,
           const BackwardInputs& inputs)
      : p_(p),
        dout_(dout),
        inputs_(inputs),
        arithmetic_(arithmetic_of(options, p)),
        units_(units_of(p, arithmetic_, inputs.algorithm, backward_lambda(p, options.alpha))),
        sigma_(sigma_of(p)),
        e_bound_(p.E),
        ev_bound_(p.Ev),
        score_error_(arithmetic_, p.E, magnitude(sigma_), !p.scale.has_value(), !p.alibi_slopes.empty(), p.softcap) {
    q_format_ = output_format(p.dtype, units_);
    kv_format_ = output_format(kv_format(p), units_);
    // max_c |v_jc|: with ‖dO‖₁, a bound of Σ_c |dO_c v_jc| (no squares to underflow or overflow) for
    // Phase A's rows that feed only key rows when the kernel's forward is not given.
    value_max_.resize(p.batch * p.kv_heads * p.S);
    for (std::size_t b = 0; b < p.batch; ++b)
      for (std::size_t g = 0; g < p.kv_heads; ++g)
        for (std::size_t j = 0; j < p.S; ++j) {
          const double* v = value_row(b, g, j);
          double largest = 0;
          for (std::size_t c = 0; c < p.Ev; ++c) largest = std::max(largest, std::fabs(v[c]));
          value_max_[(b * p.kv_heads + g) * p.S + j] = largest;
        }
  }

  // Phase A's lean pass for a row that only feeds key rows, when the kernel's out and LSE are given:
  // ℓ_i and D_i = Σ_j e_j dP_j / Z enclosed directly (the oracle's Steps 1-4 and 7, each e_j from one
  // exp_enclosure at the upper end of its argument and e^{-w} >= 1 - w for the argument's width w),
  // and Steps B1-B4 with row-wide maxima. False when doubles cannot hold the row (the caller uses the
  // full enclosure).
  bool lean_row(std::size_t row, RowStats& stats, const double* dot_sum, const double* dot_abs, const double* dp_sum,
                const double* dp_abs) const {
    const RowIndex r = row_index(p_, row);
    const std::size_t g = kv_head_of(p_, r.h);
    const double* q = p_.query.data() + tensor_index(p_, p_.q_heads, p_.L, p_.E, r.b, r.h, r.i, 0);
    const double* d_out = dout_.data() + output_index(p_, row, 0);
    const double* given_out = inputs_.out.data() + output_index(p_, row, 0);
    const ProductSumBound &e_bound = e_bound_, &ev_bound = ev_bound_;
    thread_local std::vector<Interval> scores, dps;
    thread_local std::vector<double> abs_dp, R, err;
    thread_local std::vector<std::size_t> keys;
    scores.clear(), dps.clear(), abs_dp.clear(), keys.clear(), R.clear(), err.clear();
    const ScoreErrorModel& score_error = score_error_;
    double top = -kInf;
    for (std::size_t c = 0; c < p_.E; ++c) stats.abs_query += std::fabs(q[c]);
    stats.abs_query = up_bound(stats.abs_query * kSafety);
    for (std::size_t j = 0; j < p_.S; ++j)
      if (takes_part(p_, r.b, r.h, r.i, j)) keys.push_back(j);
    for (const std::size_t j : keys) {
      const double dot_error = e_bound.error(dot_abs[j]), dp_error_ = ev_bound.error(dp_abs[j]);
      const Interval dot{next_down(dot_sum[j] - dot_error), next_up(dot_sum[j] + dot_error)};
      const double bias = additive_bias(p_, r.b, r.h, r.i, j);
      const Interval score = add(capped(multiply(sigma_, dot)), {bias, bias});
      if (!std::isfinite(score.lo) || !std::isfinite(score.hi)) return false;
      scores.push_back(score);
      dps.push_back({next_down(dp_sum[j] - dp_error_), next_up(dp_sum[j] + dp_error_)});
      abs_dp.push_back(ev_bound.abs_upper(dp_abs[j]));
      top = std::max(top, score.hi);
      const auto b = score_error(e_bound.abs_upper(dot_abs[j]), std::fabs(bias),
                                 units_.q_storage ? key_abs(r.b, g, j) + stats.abs_query : 0.0);
      R.push_back(b.R), err.push_back(b.e);
      stats.P = std::max(stats.P, b.R + b.e);
    }
    const std::size_t n = scores.size();
    if (n == 0) return true;  // no keys: nothing to feed
    // A sink joins the denominator as one more term, of score z exactly (its error: z's rounding).
    const bool sink = has_sinks(p_);
    const double z = sink ? sink_of(p_, r.h) : 0.0;
    if (sink) {
      top = std::max(top, z);
      stats.P = std::max(stats.P, std::fabs(z) + sink_error(r.h));
    }
    const auto exp_of = [&](Interval score) {  // e^{s - top} from below (e^{-w} >= 1 - w) and above
      const double hi = std::min(0.0, next_up(score.hi - top)), lo = next_down(score.lo - top);
      const Interval upper = exp_enclosure(hi);
      return Interval{std::max(0.0, next_down(upper.lo * next_down(1 - (hi - lo)))), upper.hi};
    };
    thread_local std::vector<Interval> e;
    e.resize(n);
    double sum_lo = 0, sum_hi = 0;
    Interval numerator{0, 0};
    for (std::size_t t = 0; t < n; ++t) {
      e[t] = exp_of(scores[t]);
      sum_lo += e[t].lo, sum_hi += e[t].hi;
      numerator = add(numerator, multiply(e[t], dps[t]));
    }
    const Interval e_sink = sink ? exp_of({z, z}) : Interval{0, 0};
    sum_lo += e_sink.lo, sum_hi += e_sink.hi;
    const double count = static_cast<double>(n + (sink ? 1 : 0));
    const Interval total = nonnegative_sum(sum_lo, sum_hi, n + (sink ? 1 : 0));
    if (!(total.lo > 0) || !std::isfinite(total.hi) || !std::isfinite(numerator.lo) || !std::isfinite(numerator.hi))
      return false;
    stats.has_keys = true;
    stats.lse = add({top, top}, log_enclosure(total));
    stats.abs_lse = magnitude(stats.lse);
    stats.D = divide_by_positive(numerator, total);
    stats.delta = measured_lse_error(row, stats.lse);
    for (std::size_t t = 0; t < n; ++t) stats.x_max = std::max(stats.x_max, x_of(R[t], err[t], stats.P));
    if (sink) stats.x_max = std::max(stats.x_max, x_of(std::fabs(z), sink_error(r.h), stats.P));
    const double g_n = gamma_bound(count + 1, units_.u);
    stats.log_norm = log_norm_of(g_n);
    thread_local MathRow math;  // its vectors' storage kept across rows
    math.d = math.d_s = math.mag = math.stagnant = 0;
    math.lo.clear(), math.hi.clear(), math.term_lo.clear(), math.term_hi.clear();
    for (std::size_t t = 0; t < n; ++t) {
      const Interval P{next_down(e[t].lo / total.hi), next_up(e[t].hi / total.lo)};
      const Weight w = weight_of(units_, P.hi, expm1_up(theta_of(units_, stats, R[t], err[t])));
      const double A = abs_dp[t], e_p = dp_error(units_, p_.Ev, magnitude(dps[t]), A);
      math.add(units_, w, magnitude(dps[t]), mignitude(dps[t]), e_p, g_n, P, x_of(R[t], err[t], stats.P));
    }
    if (sink) {
      stats.sink = {next_down(e_sink.lo / total.hi), std::min(1.0, next_up(e_sink.hi / total.lo))};
      const Weight w = weight_of(units_, stats.sink.hi, expm1_up(theta_of(units_, stats, std::fabs(z), sink_error(r.h))));
      math.add(units_, w, 0.0, 0.0, 0.0, g_n, stats.sink, x_of(std::fabs(z), sink_error(r.h), stats.P));
    }
    close_row(stats, math, count, stored_d_error(d_out, given_out, stats.D));
    return true;
  }


  static constexpr std::size_t kBlockRows = 8;

  // Phase A's lean pass over rows [first, first + m) of one head (b, h): the block's q·k_j and dO·v_j
  // for every key at once (block_dots: K and V read once per block), then lean_row for each row not
  // in `skip`. Returns the rows the lean pass could not hold (for the full one).
  std::vector<std::size_t> lean_block(std::size_t first, std::size_t m, const std::vector<char>& skip,
                                      std::vector<RowStats>& stats) const {
    const RowIndex r = row_index(p_, first);
    const std::size_t g = kv_head_of(p_, r.h);
    const auto stride = [&](const double* row0, const double* row1, std::size_t width, std::size_t count) {
      return count > 1 ? static_cast<std::size_t>(row1 - row0) : width;
    };
    const double* q0 = p_.query.data() + tensor_index(p_, p_.q_heads, p_.L, p_.E, r.b, r.h, r.i, 0);
    const double* o0 = dout_.data() + output_index(p_, first, 0);
    const std::size_t ldq = stride(q0, p_.query.data() + (m > 1 ? tensor_index(p_, p_.q_heads, p_.L, p_.E, r.b, r.h, r.i + 1, 0) : 0), p_.E, m);
    const std::size_t ldo = stride(o0, dout_.data() + (m > 1 ? output_index(p_, first + 1, 0) : 0), p_.Ev, m);
    const double* k0 = key_row(r.b, g, 0);
    const double* v0 = value_row(r.b, g, 0);
    const std::size_t ldk = stride(k0, p_.S > 1 ? key_row(r.b, g, 1) : k0, p_.E, p_.S);
    const std::size_t ldv = stride(v0, p_.S > 1 ? value_row(r.b, g, 1) : v0, p_.Ev, p_.S);
    thread_local std::vector<double> dot_sum, dot_abs, dp_sum, dp_abs;
    for (auto* v : {&dot_sum, &dot_abs, &dp_sum, &dp_abs}) v->resize(m * p_.S);
    block_dots(q0, ldq, m, k0, ldk, p_.S, p_.E, dot_sum.data(), dot_abs.data());
    block_dots(o0, ldo, m, v0, ldv, p_.S, p_.Ev, dp_sum.data(), dp_abs.data());
    std::vector<std::size_t> failed;
    for (std::size_t t = 0; t < m; ++t) {
      const std::size_t row = first + t, at = t * p_.S;
      if (skip[row]) continue;
      if (!lean_row(row, stats[row], dot_sum.data() + at, dot_abs.data() + at, dp_sum.data() + at, dp_abs.data() + at)) {
        stats[row] = RowStats{};
        failed.push_back(row);
      }
    }
    if (m * p_.S > (std::size_t{1} << 20))  // a long row's buffers are not kept for later calls
      for (auto* v : {&dot_sum, &dot_abs, &dp_sum, &dp_abs}) std::vector<double>().swap(*v);
    return failed;
  }

  // Phase A: one query row's statistics, and its dQ when `certify`.
  void row(std::size_t row, bool certify, RowStats& stats, std::optional<CertifiedRow>& dq) const {
    const RowIndex r = row_index(p_, row);
    std::optional<RowEnclosure> fast = enclose_row_fast(p_, row);
    const RowEnclosure e = fast ? std::move(*fast) : enclose_row(p_, row, 64);
    if (e.empty) return;
    stats.has_keys = true;
    stats.lse = e.lse;
    stats.abs_lse = magnitude(e.lse);
    // With a sink the enclosure's last key is the sink (position S, score z, value 0): it joins the
    // normalization (n counts it) but has no dP and no dQ term.
    const bool sink = has_sinks(p_);
    const std::size_t g = kv_head_of(p_, r.h), n = e.keys.size(), n_keys = sink ? n - 1 : n;
    const double* q = p_.query.data() + tensor_index(p_, p_.q_heads, p_.L, p_.E, r.b, r.h, r.i, 0);
    const double* d_out = dout_.data() + output_index(p_, row, 0);
    for (std::size_t c = 0; c < p_.E; ++c) stats.abs_query += std::fabs(q[c]);
    stats.abs_query = up_bound(stats.abs_query * kSafety);
    // D_i = dO · O.
    double mid = 0, abs = 0, rad = 0;
    for (std::size_t c = 0; c < p_.Ev; ++c) {
      const FineEnclosure& o = e.fine[c];
      mid += d_out[c] * o.head;
      abs += std::fabs(d_out[c] * o.head);
      rad += std::fabs(d_out[c]) * (o.radius + std::fabs(o.tail));
    }
    const ProductSumBound& ev_bound = ev_bound_;
    const double D_radius = next_up((ev_bound.error(abs) + up_bound(rad * kSafety)) * kRoundingSafety);
    stats.D = {next_down(mid - D_radius), next_up(mid + D_radius)};
    // The forward's bands when the kernel's output or LSE is not given.
    // (A non-finite stored value is a failure of the forward's own report; the band takes the worst case.)
    const double* given_out = inputs_.out.empty() ? nullptr : inputs_.out.data() + output_index(p_, row, 0);
    for (std::size_t c = 0; given_out && c < p_.Ev; ++c)
      if (!std::isfinite(given_out[c])) given_out = nullptr;
    const bool given_lse = !inputs_.lse.empty() && std::isfinite(inputs_.lse[row]);
    std::vector<double> out_band;
    double lse_band = 0;
    if (!given_out || !given_lse) {
      RowTerms terms;
      band_terms(p_, row, e, terms);
      TierBands b = tensor_row_tier_bands(terms, arithmetic_, std::nullopt);
      out_band = std::move(b.certified);
      lse_band = stored_lse_band(b.lse, stats.abs_lse, LseFormat{.storage = arithmetic_.compute}, arithmetic_.compute);
    }
    if (!given_lse) {
      stats.delta = lse_band;
    } else {
      stats.delta = measured_lse_error(row, e.lse);
    }
    // Per key: the score's error (B1), x_j (B2, M), dP (B3), and D's error (B4, M). A row that only
    // feeds key rows spares the dP dot products: |dP_j| <= A_j <= ‖dO‖₁ max_c |v_jc|.
    const ScoreErrorModel& score_error = score_error_;
    const double g_n = gamma_bound(static_cast<double>(n) + 1, units_.u);
    stats.log_norm = log_norm_of(g_n);
    MathRow math;
    std::vector<double> R(n), err(n), absolute(n), e_dp;
    std::vector<DotEnclosure> dp;
    std::vector<Weight> w(n);
    for (std::size_t t = 0; t < n; ++t) {
      const std::size_t j = e.keys[t];
      if (t == n_keys) {  // the sink
        R[t] = std::fabs(sink_of(p_, r.h)), err[t] = sink_error(r.h);
        stats.P = std::max(stats.P, R[t] + err[t]);
        continue;
      }
      const double abs_sides = units_.q_storage ? key_abs(r.b, g, j) + stats.abs_query : 0.0;
      const auto b = score_error(e.abs_dots[t], std::fabs(additive_bias(p_, r.b, r.h, r.i, j)), abs_sides);
      R[t] = b.R, err[t] = b.e, absolute[t] = b.absolute;
      stats.P = std::max(stats.P, b.R + b.e);
    }
    for (std::size_t t = 0; t < n; ++t) stats.x_max = std::max(stats.x_max, x_of(R[t], err[t], stats.P));
    for (std::size_t t = 0; t < n; ++t)
      w[t] = weight_of(units_, e.weights[t].hi, expm1_up(theta_of(units_, stats, R[t], err[t])));
    if (!certify) {
      double l1 = 0;
      for (std::size_t c = 0; c < p_.Ev; ++c) l1 += std::fabs(d_out[c]);
      const double dout_l1 = up_bound(l1 * kSafety);
      const double* v_max = value_max_.data() + (r.b * p_.kv_heads + g) * p_.S;
      for (std::size_t t = 0; t < n_keys; ++t) {
        const double A = up_bound(dout_l1 * v_max[e.keys[t]] * kSafety), e_p = dp_error(units_, p_.Ev, A, A);
        math.add(units_, w[t], A, 0.0, e_p, g_n, e.weights[t], x_of(R[t], err[t], stats.P));
      }
    } else {
      e_dp.resize(n_keys), dp.resize(n_keys);
      for (std::size_t t = 0; t < n_keys; ++t) {
        dp[t] = dot_enclosure(d_out, value_row(r.b, g, e.keys[t]), p_.Ev, ev_bound_);
        e_dp[t] = dp_error(units_, p_.Ev, dp[t]);
        const double abs_dp = magnitude(dp[t].value);
        math.add(units_, w[t], abs_dp, mignitude(dp[t].value), e_dp[t], g_n, e.weights[t], x_of(R[t], err[t], stats.P));
      }
    }
    if (sink) {  // the sink's exp joins the normalization (SB3's blocks); with dP = 0 it adds nothing to D
      math.add(units_, w[n_keys], 0.0, 0.0, 0.0, g_n, e.weights[n_keys], x_of(R[n_keys], err[n_keys], stats.P));
      stats.sink = e.weights[n_keys];
    }
    double d_fa = 0;
    if (given_out) {
      d_fa = stored_d_error(d_out, given_out, stats.D);
    } else {
      d_fa = 2 * static_cast<double>(p_.Ev) * units_.lambda;
      for (std::size_t c = 0; c < p_.Ev; ++c)
        d_fa += std::fabs(d_out[c]) * out_band[c] * (1 + units_.g_d) +
                units_.g_d * std::fabs(d_out[c]) * magnitude(e.out[c]);
    }
    close_row(stats, math, static_cast<double>(n), d_fa);
    if (!certify) return;
    // Step B5 and B6: dQ_i = σ Σ_j dS_ij k_j.
    GradientSums sums(p_.E);
    sums.reserve(n_keys);
    for (std::size_t t = 0; t < n_keys; ++t) {
      const Weight w_s = statistical_weight(w[t], e.weights[t].hi, stats, R[t], err[t]);
      const Ds ds = through_softcap(ds_of(units_, e.weights[t], w[t], w_s, dp[t], e_dp[t], stats),
                                    multiply(sigma_, e.dots[t]), err[t]);
      const double* k = key_row(r.b, g, e.keys[t]);
      const std::optional<RandomTerm> random = random_term(stats, e.weights[t], {R[t], err[t], absolute[t]}, w[t],
                                                           &dp[t], e_dp[t], ds.mag, sigma_l2(q, k));
      const TermBlocks blocks{widened(multiply(sigma_, e.dots[t]), err[t]), widened(e.weights[t], w[t].pi),
                              widened(dp[t].value, e_dp[t])};
      sums.add(k, ds.value, ds.err, ds.err_s, ds.mag, blocks, random ? &*random : nullptr);
    }
    CertifiedRow out;
    out.row = row;
    out.index = {r.b, r.h, r.i};
    out.fast = e.fast;
    finish(sums, units_, sigma_, {.scaled = true, .q_storage = units_.q_storage, .format = q_format_}, out);
    dq = std::move(out);
  }

  // Steps B1-B5 for one term (b, h, i, j) of a key row or a mask row: P_ij, its weight's error, dS_ij.
  struct Term {
    Interval P;
    Weight w, w_s;
    Ds ds, ds_k;  // dS (dV's and dβ's), and dS (1 - t²) for dK (Step B11; dS itself without softcap)
    TermBlocks blocks;                              // Model S's
    std::optional<RandomTerm> random_ds, random_p;  // Step SB5
  };
  Term term_of(std::size_t b, std::size_t h, std::size_t i, std::size_t j, const RowStats& r, double abs_key) const {
    const std::size_t g = kv_head_of(p_, h), row = (b * p_.q_heads + h) * p_.L + i;
    const double* q = p_.query.data() + tensor_index(p_, p_.q_heads, p_.L, p_.E, b, h, i, 0);
    const DotEnclosure dot = dot_enclosure(q, key_row(b, g, j), p_.E, e_bound_);
    const double bias = additive_bias(p_, b, h, i, j);
    const Interval raw = multiply(sigma_, dot.value);
    const Interval score = add(capped(raw), {bias, bias});
    const Interval arg = subtract(score, r.lse);
    const Interval P{exp_enclosure(arg.lo).lo, std::min(1.0, exp_enclosure(std::min(arg.hi, 0.0)).hi)};
    const auto sb = score_error_(dot.abs_upper, std::fabs(bias), units_.q_storage ? abs_key + r.abs_query : 0.0);
    const Weight w = weight_of(units_, P.hi, expm1_up(theta_of(units_, r, sb.R, sb.e)));
    const Weight w_s = statistical_weight(w, P.hi, r, sb.R, sb.e);
    const DotEnclosure dp = dot_enclosure(dout_.data() + output_index(p_, row, 0), value_row(b, g, j), p_.Ev, ev_bound_);
    const double e_dp = dp_error(units_, p_.Ev, dp);
    const Ds ds = ds_of(units_, P, w, w_s, dp, e_dp, r);
    Term t{P, w, w_s, ds, through_softcap(ds, raw, sb.e),
           TermBlocks{widened(raw, sb.e), widened(P, w.pi), widened(dp.value, e_dp)},
           std::nullopt, std::nullopt};
    if (units_.random_terms) {
      const double l2 = sigma_l2(q, key_row(b, g, j));
      t.random_ds = random_term(r, P, sb, w, &dp, e_dp, t.ds.mag, l2);
      t.random_p = random_term(r, P, sb, w, nullptr, 0, 0, l2);
    }
    return t;
  }

  // |σ| √(Σ_c (q_c k_c)²), rounded up without the squares' underflow (Step SB5's shared side).
  double sigma_l2(const double* q, const double* k) const {
    double top = 0;
    for (std::size_t c = 0; c < p_.E; ++c) top = std::max(top, std::fabs(q[c] * k[c]));
    if (!(top > 0)) return 0;
    double sum = 0;
    for (std::size_t c = 0; c < p_.E; ++c) sum += (q[c] * k[c] / top) * (q[c] * k[c] / top);
    return magnitude(sigma_) * top * std::sqrt((sum + static_cast<double>(p_.E) * 0x1p-1070) * kSafety) * kSafety;
  }

  // Step SB5 for one term of row r: a dS term when dp is given (its certified magnitude bound mu), else
  // a P term; nullopt off SB5's route.
  std::optional<RandomTerm> random_term(const RowStats& r, Interval P, const ScoreErrorModel::Bound& sb, const Weight& w,
                                        const DotEnclosure* dp, double e_dp, double mu, double sigma_l2) const {
    if (!units_.random_terms) return std::nullopt;
    const Units& u = units_;
    RandomTerm t;
    // The worst-case part of P̃'s error: the stored LSE's, the argument's formation, exp, subnormal scores.
    const double theta_w = r.delta + u.g_piece * (sb.R + sb.e + r.abs_lse + r.delta) + u.eta_prime + sb.absolute;
    const double pi_w = P.hi * expm1_up(theta_w) + u.lambda, rho = sb.e, P_bar = w.used;
    const double n_s = 3.0 * static_cast<double>(p_.E) + 2;
    const double h_store = u.p_storage ? u.h_s : 0.0;
    if (!dp) {  // P̃ (rounded to storage before dV when p_storage)
      t.worst = pi_w + h_store;
      const double u_store = u.p_storage ? u.u_s : 0.0;
      t.second = P_bar * (expm1_second_up(rho) * (1 + u_store) + rho * u_store) * kSafety;
      t.score = std::sqrt(n_s) * (sb.R + sb.e) * P_bar * kSafety;
      t.own = u_store / u.u * P_bar;
      t.common = sigma_l2 * P_bar * kSafety;
      return t;
    }
    const double Ev = static_cast<double>(p_.Ev);
    const double abs_a = magnitude(subtract(dp->value, r.D)), a_hat = abs_a + e_dp + r.d;
    t.worst = pi_w * a_hat + P_bar * (r.d + 2 * Ev * u.lambda) + u.lambda + h_store * (a_hat + 1);
    // The term's own roundings: the subtraction and the product, and P and dS to storage.
    const double unit = u.p_storage ? u.u_s : u.u, g_m = gamma_bound(4, unit), s_m = second_order(4, unit);
    const double eta = a_hat > 0 ? std::min(1.0, e_dp / a_hat) : 0.0;
    const double n_p = 2 * Ev - 1 + 2 * Ev * u.c_v;
    t.second = (P_bar * a_hat * (expm1_second_up(rho) * (1 + g_m) + rho * (eta + g_m) * (1 + g_m) + eta * g_m + s_m) +
                P_bar * second_order(n_p, u.u) * dp->abs_upper) * kSafety;
    const double chain = (1 + u.u) * (1 + u.u) * (u.p_storage ? (1 + u.u_s) * (1 + u.u_s) : 1.0);
    t.score = std::sqrt(n_s) * (sb.R + sb.e) * mu * kSafety;
    t.common = sigma_l2 * mu * kSafety;
    t.dp = std::sqrt(n_p) * dp->abs_upper * (1 + gamma_bound(Ev, u.u)) * P_bar * chain * kSafety;
    t.own = std::sqrt(2.0) * root_sum_squares({1.0, u.p_storage ? u.u_s / u.u : 0.0}) * P_bar * a_hat * chain * kSafety;
    return t;
  }

  // The weight's error with SB3's normalization (the certified one when the math path is not covered).
  Weight statistical_weight(const Weight& w, double P_hi, const RowStats& r, double R, double e) const {
    if (!units_.math) return w;
    return weight_of(units_, P_hi, expm1_up(theta_of(units_, r, R, e, true)));
  }

  // Phase B: key row (b, g, j)'s dK and dV from every query row of the group that sees it.
  void key(std::size_t b, std::size_t g, std::size_t j, const std::vector<RowStats>& stats, CertifiedRow& dk,
           CertifiedRow& dv) const {
    const std::size_t group = p_.q_heads / p_.kv_heads;
    GradientSums k_sums(p_.E), v_sums(p_.Ev);
    k_sums.reserve(group * p_.L), v_sums.reserve(group * p_.L);
    const double abs_key = units_.q_storage ? key_abs(b, g, j) : 0.0;
    for (std::size_t h = g * group; h < (g + 1) * group; ++h) {
      for (std::size_t i = 0; i < p_.L; ++i) {
        if (!takes_part(p_, b, h, i, j)) continue;
        const std::size_t row = (b * p_.q_heads + h) * p_.L + i;
        const Term t = term_of(b, h, i, j, stats[row], abs_key);
        k_sums.add(p_.query.data() + tensor_index(p_, p_.q_heads, p_.L, p_.E, b, h, i, 0), t.ds_k.value, t.ds_k.err,
                   t.ds_k.err_s, t.ds_k.mag, t.blocks, t.random_ds ? &*t.random_ds : nullptr);
        v_sums.add(dout_.data() + output_index(p_, row, 0), t.P, t.w.pi, t.w_s.pi, t.w.used,
                   TermBlocks{t.blocks.dot, t.blocks.weight, {0, 0}}, t.random_p ? &*t.random_p : nullptr);
      }
    }
    const double heads = static_cast<double>(group);
    dk.index = dv.index = {b, g, j};
    finish(k_sums, units_, sigma_, {.scaled = true, .q_storage = units_.q_storage, .group = heads, .format = kv_format_},
           dk);
    finish(v_sums, units_, sigma_, {.scaled = false, .group = heads, .format = kv_format_}, dv);
  }

  // Phase C (Step B10): mask row `at` = (b', h', i')'s dβ, each element from dS at every position it
  // broadcasts to.
  void mask_row(std::array<std::size_t, 3> at, const std::vector<RowStats>& stats, CertifiedRow& out) const {
    const std::array<std::size_t, 4> d = mask_dims(p_);
    std::vector<GradientSums> sums(d[3], GradientSums(1));
    const double one = 1;
    const auto [b0, b1] = broadcast_range(d[0], at[0], p_.batch);
    const auto [h0, h1] = broadcast_range(d[1], at[1], p_.q_heads);
    const auto [i0, i1] = broadcast_range(d[2], at[2], p_.L);
    for (std::size_t b = b0; b < b1; ++b)
      for (std::size_t h = h0; h < h1; ++h)
        for (std::size_t i = i0; i < i1; ++i) {
          const RowStats& r = stats[(b * p_.q_heads + h) * p_.L + i];
          for (std::size_t j = 0; j < p_.S; ++j) {
            if (!takes_part(p_, b, h, i, j)) continue;
            const Term t = term_of(b, h, i, j, r, units_.q_storage ? key_abs(b, kv_head_of(p_, h), j) : 0.0);
            sums[d[3] == 1 ? 0 : j].add(&one, t.ds.value, t.ds.err, t.ds.err_s, t.ds.mag, t.blocks,
                                        t.random_ds ? &*t.random_ds : nullptr);
          }
        }
    out.index = at;
    out.exact.resize(d[3]), out.fine.resize(d[3]), out.band.resize(d[3]), out.band_s.resize(d[3]);
    CertifiedRow element;
    for (std::size_t e = 0; e < d[3]; ++e) {
      finish(sums[e], units_, sigma_, {.scaled = false, .format = q_format_}, element);
      out.exact[e] = element.exact[0], out.fine[e] = element.fine[0], out.band[e] = element.band[0];
      out.band_s[e] = element.band_s[0];
    }
  }

  // Step B11 (softcap): c·tanh(x/c) of the raw score x = σ q·k, enclosed outwards (x itself without softcap).
  Interval capped(Interval raw) const {
    if (!(p_.softcap > 0)) return raw;
    const double c = p_.softcap;
    return multiply({c, c}, tanh_enclosure({next_down(raw.lo / c), next_up(raw.hi / c)}));
  }

  // Step B11: dS times the cap's derivative f = 1 - t², t = tanh(x/c), for dQ and dK. |t̂ - t| <= e/c
  // (e the score's error bound, which the capped score's c·t̂ meets before the bias); f̂ formed as
  // 1 - t̂² or (1 - t̂)(1 + t̂) errs by (2|t| + ε_t) ε_t + γ_3 (f̄ + t̄²) + 3 flushes; the product fl(dS̃ f̂)
  // with the scale's two extra roundings (σ/c, then c) and, with intermediates in storage, autograd's
  // three (by c, by 1 - y², by 1/c): γ_3 + γ_3(u_s) of μ F̄, F̄ = f_hi + ε_f; dS to storage after
  // the product (FlashAttention) its half-spacing once more.
  Ds through_softcap(const Ds& ds, Interval raw, double e) const {
    if (!(p_.softcap > 0)) return ds;
    const Units& u = units_;
    const double c = p_.softcap;
    const Interval t = tanh_enclosure({next_down(raw.lo / c), next_up(raw.hi / c)});
    const double t_hi = magnitude(t), t_lo = mignitude(t), e_t = up_bound(e / c * kSafety);
    const Interval f{std::max(0.0, next_down(1 - next_up(t_hi * t_hi))), std::min(1.0, next_up(1 - next_down(t_lo * t_lo)))};
    const double d_t2 = (2 * t_hi + e_t) * e_t, t_bar = t_hi + e_t;
    const double u_f = u.intermediates ? u.u_s : u.u, h_f = u.intermediates ? u.h_s : u.lambda;
    const double e_f = (d_t2 + gamma_bound(3, u_f) * (f.hi + d_t2 + t_bar * t_bar) + 3 * h_f) * kSafety;
    const double F = f.hi + e_f, abs_ds = magnitude(ds.value);
    const double g_r = gamma_bound(3, u.u) + (u.intermediates ? gamma_bound(3, u.u_s) : 0.0);
    // Autograd's chain ·c → ·(1 - y²) → /c: the middle rounding's flush is scaled by 1/c afterwards.
    const double flushes = u.intermediates ? (2 + std::max(1.0, 1 / c)) * u.h_s : u.lambda;
    const double round = g_r * ds.mag * F + flushes + (u.p_storage ? u.h_s : 0.0);
    const auto through = [&](double err) { return up_bound((err * F + abs_ds * e_f + round) * kSafety); };
    return {multiply(ds.value, f), through(ds.err), through(ds.err_s), up_bound((ds.mag * F + round) * kSafety)};
  }

  // Step B12 (sinks): z_h's error as the kernel reads it, in compute (or, with intermediates, in storage
  // too: the math path's concatenated logits).
  double sink_error(std::size_t h) const {
    const double z = sink_of(p_, h);
    double e = std::fabs(round_to(arithmetic_.compute, z) - z);
    if (units_.intermediates) e = std::max(e, std::fabs(round_to(arithmetic_.storage, z) - z) * (1 + units_.u) + e);
    return up_bound(e * kSafety);
  }

  // Step B12: row `row`'s term of dz_h = -Σ P_iz D_i: P̃_iz = exp(z - ℓ̂) (FA) or the saved softmax's
  // (M), its error π_z (Step B2 with R = |z|, e = z's error), and D̃'s d: |P̃ D̃ - P D| <= π_z |D| +
  // P̄_z d (the product's rounding is B7's, in finish), |P̃ D̃| <= P̄_z (|D| + d).
  void add_sink_term(const RowStats& r, std::size_t h, GradientSums& sums) const {
    static constexpr double kMinusOne = -1;
    const double R = std::fabs(sink_of(p_, h)), e = sink_error(h);
    const Weight w = weight_of(units_, r.sink.hi, expm1_up(theta_of(units_, r, R, e)));
    const Weight w_s = statistical_weight(w, r.sink.hi, r, R, e);
    const double abs_D = magnitude(r.D);
    // With intermediates in storage (the math path) the softmax backward rounds each dS_iz = -P_iz D_i
    // to storage before the sum over rows: u_s of its magnitude and a flush per term.
    const double stored = units_.intermediates ? units_.u_s * w.used * (abs_D + r.d) + units_.h_s : 0.0;
    const auto err = [&](const Weight& x, double d) {
      return up_bound((x.pi * abs_D + x.used * d + stored) * kSafety);
    };
    sums.add(&kMinusOne, multiply(r.sink, r.D), err(w, r.d), std::min(err(w, r.d), err(w_s, r.d_s)),
             up_bound(w.used * (abs_D + r.d) * kSafety),
             TermBlocks{{R, R}, widened(r.sink, w.pi), widened(r.D, r.d)});
  }

  // Step B2 (M): x_j of a key from its score's R_j and e_j and the row's P.
  double x_of(double R, double e, double P) const { return e + units_.g_piece * (R + e + P) + units_.eta_prime; }

  // Step B2 (FA): Δ_i >= |ℓ̂_i - ℓ_i| from the kernel's LSE of the row (in natural units; ln 2's
  // rounding covered) and the exact one's enclosure.
  double measured_lse_error(std::size_t row, Interval lse) const {
    const double got = inputs_.lse[row];
    const double natural = inputs_.lse_format.base2 ? got * std::numbers::ln2 : got;
    return up_bound(std::max(std::fabs(natural - lse.lo), std::fabs(natural - lse.hi)) + std::fabs(natural) * 0x1p-50);
  }

  // Step B4 (FA) with the kernel's stored output Ô: |dO · Ô - D| + γ Σ |dO_c Ô_c| + flushes.
  double stored_d_error(const double* d_out, const double* given_out, Interval D) const {
    const DotEnclosure stored = dot_enclosure(d_out, given_out, p_.Ev, ProductSumBound(p_.Ev));
    return 2 * static_cast<double>(p_.Ev) * units_.lambda + magnitude(subtract(stored.value, D)) +
           units_.g_d * stored.abs_upper;
  }

  // Steps B4, SB3 and SB4 closing a row of n keys: d (and d_s) from the math path's sums and the
  // FlashAttention one's d_fa, and SB3's log_norm_s.
  void close_row(RowStats& stats, const MathRow& math, double n, double d_fa) const {
    stats.d = d_of(2 * n * units_.lambda + math.d, d_fa);
    stats.log_norm_s = stats.log_norm, stats.d_s = stats.d;
    if (!units_.math || n < 2) return;
    double squares = 0;
    for (double size : block_sizes(overlap_blocks(math.lo, math.hi))) squares += size;
    const double m = (n - 1) * units_.u;
    const double g = gamma_bound(n - 1, units_.u);
    const double nu =
        (units_.lambda_s * units_.u * std::sqrt(squares) * (1 + g) * (1 + g) + m * m / (1 - m) + math.stagnant) * kSafety;
    if (m < 0.5 && nu < 0.5)
      stats.log_norm_s = std::min(stats.log_norm, (-std::log1p(-nu) - std::log1p(-units_.g2)) * kSafety);
    // The addends fl(P̃ dP̃), rounded to storage first with intermediates (PyTorch's CUDA form).
    const double H = (1 + units_.g2) * (units_.intermediates ? (1 + units_.u_s) * math.mag + n * units_.h_s : math.mag);
    const Additions add = additions_of(units_, n, squares, H, H);
    const double tiny = kStagnation * units_.u * H * (1 + units_.g2);
    double stagnant = 0;
    for (std::size_t t = 0; t < math.term_lo.size(); ++t)
      if (math.term_lo[t] < tiny) stagnant += std::min(math.term_hi[t] * (1 + units_.g2), tiny);
    const double d_math_s = 2 * n * units_.lambda + math.d_s + units_.lambda_s * add.spread + add.second + stagnant * kSafety;
    stats.d_s = std::min(stats.d, d_of(d_math_s, d_fa));
  }

  // Step B4: d_i, the algorithms' bounds combined (the larger, or the declared one's).
  double d_of(double d_math, double d_fa) const {
    if (std::isnan(d_math) || std::isnan(d_fa)) return kInf;
    const double d = std::max(units_.math ? d_math : 0.0, units_.flash ? d_fa : 0.0) * kSafety;
    return std::isfinite(d) ? d : kInf;
  }

  const double* key_row(std::size_t b, std::size_t g, std::size_t j) const {
    return p_.key.data() + tensor_index(p_, p_.kv_heads, p_.S, p_.E, b, g, j, 0);
  }
  const double* value_row(std::size_t b, std::size_t g, std::size_t j) const {
    return p_.value.data() + tensor_index(p_, p_.kv_heads, p_.S, p_.Ev, b, g, j, 0);
  }
  double key_abs(std::size_t b, std::size_t g, std::size_t j) const {
    const double* k = key_row(b, g, j);
    double sum = 0;
    for (std::size_t c = 0; c < p_.E; ++c) sum += std::fabs(k[c]);
    return up_bound(sum * kSafety);
  }

  const Units& units() const { return units_; }
  // The sinks' gradient is stored in their format, fp32.
  OutputFormat sink_format() const { return output_format(DType::fp32, units_); }

 private:
  const TensorProblem& p_;
  std::span<const double> dout_;
  const BackwardInputs& inputs_;
  Arithmetic arithmetic_;
  Units units_;
  OutputFormat q_format_, kv_format_;
  Interval sigma_;
  std::vector<double> value_max_;
  ProductSumBound e_bound_, ev_bound_;
  ScoreErrorModel score_error_;
};

// Judges a certified row (its enclosures possibly replaced by the MPFI ones).
void judge_row(const CertifiedRow& row, std::span<const double> grad, std::size_t first, DType dtype, Tier tier,
               RowOutcome& outcome) {
  outcome.certified = true;
  outcome.fast = row.fast;
  for (std::size_t c = 0; c < row.band.size(); ++c) {
    const double got = grad[first + c];
    if (!std::isfinite(got)) continue;  // failed in the cheap checks
    if (!std::isfinite(row.band[c])) ++outcome.unbounded;
    const double certified = row.band[c], statistical = row.band_s[c];
    const bool by_certified = tier == Tier::certified;
    detail::judge(outcome, {row.index[0], row.index[1], row.index[2], c}, got, row.fine[c],
                  by_certified ? certified : statistical, by_certified ? statistical : certified, certified, statistical,
                  dtype);
  }
  for (std::size_t c = 0; c < row.band.size(); ++c)
    outcome.capped = outcome.capped || !(2 * row.fine[c].radius <= row.band_s[c] / 1000);
}

// Some element's enclosure is wider than a thousandth of its smaller (statistical) band.
bool undecided(const CertifiedRow& row) {
  for (std::size_t c = 0; c < row.band.size(); ++c)
    if (std::isfinite(row.band_s[c]) && !(2 * row.fine[c].radius <= row.band_s[c] / 1000)) return true;
  return false;
}

}  // namespace

Result<Ok, Error> validate_backward(const TensorProblem& p, std::span<const double> dout, const BackwardInputs& inputs) {
  if (auto ok = validate_dout(p, dout); !ok) return ok;
  for (std::size_t n = 0; n < dout.size(); ++n)
    if (round_to(p.dtype, dout[n]) != dout[n])
      return Error{"dout: element " + element_name(stored_dims(p, p.q_heads, p.L, p.Ev), n) + " is not representable in " + std::string(dtype_name(p.dtype)) +
                   " (a kernel reads dout in its output's format)"};
  const std::size_t rows = p.batch * p.q_heads * p.L;
  if (!inputs.out.empty() && inputs.out.size() != rows * p.Ev)
    return Error{"out: expected " + std::to_string(rows * p.Ev) + " values (the output's [B, Hq, L, Ev]), got " +
                 std::to_string(inputs.out.size())};
  if (!inputs.lse.empty() && inputs.lse.size() != rows)
    return Error{"lse: expected " + std::to_string(rows) + " values ([B, Hq, L]), got " +
                 std::to_string(inputs.lse.size())};
  return Ok{};
}

BackwardReport certify_backward(const TensorProblem& p, std::span<const double> dout, std::span<const double> dq,
                                std::span<const double> dk, std::span<const double> dv, const CertifyOptions& options,
                                const BackwardInputs& inputs, std::span<const double> dmask,
                                std::span<const double> dsinks) {
  if (auto ok = validate(p); !ok) throw ContractError("certify_backward: " + ok.error().message);
  if (auto ok = validate_backward(p, dout, inputs); !ok) throw ContractError("certify_backward: " + ok.error().message);
  if (const std::string error = structure_error(options.arithmetic.structure); !error.empty())
    throw ContractError("certify_backward: " + error);
  if (!(options.alpha > 0 && options.alpha < 1)) throw ContractError("certify_backward: alpha must be in (0, 1)");
  const std::size_t rows = p.batch * p.q_heads * p.L, keys = p.batch * p.kv_heads * p.S;
  if (dq.size() != rows * p.E) throw ContractError("certify_backward: dq size is not B·Hq·L·E");
  if (dk.size() != keys * p.E) throw ContractError("certify_backward: dk size is not B·Hkv·S·E");
  if (dv.size() != keys * p.Ev) throw ContractError("certify_backward: dv size is not B·Hkv·S·Ev");
  const bool with_mask = !dmask.empty();
  if (with_mask && p.mask_kind != TensorMask::additive)
    throw ContractError("certify_backward: dmask given but the problem has no additive mask");
  if (with_mask && dmask.size() != p.mask.size())
    throw ContractError("certify_backward: dmask size is not the mask's");
  const bool with_sinks = !dsinks.empty();
  if (with_sinks && !has_sinks(p)) throw ContractError("certify_backward: dsinks given but the problem has no sinks");
  if (with_sinks && dsinks.size() != p.q_heads) throw ContractError("certify_backward: dsinks size is not Hq");
  const std::size_t group = p.q_heads / p.kv_heads;
  const Backward backward(p, dout, options, inputs);
  const auto key_at = [&](std::size_t key) {
    return std::array<std::size_t, 3>{key / (p.kv_heads * p.S), key / p.S % p.kv_heads, key % p.S};
  };
  const auto key_first = [&](std::size_t key, std::size_t width) {
    const auto [b, g, j] = key_at(key);
    return tensor_index(p, p.kv_heads, p.S, width, b, g, j, 0);
  };
  const auto q_first = [&](std::size_t row) {
    const RowIndex r = row_index(p, row);
    return tensor_index(p, p.q_heads, p.L, p.E, r.b, r.h, r.i, 0);
  };

  // What is certified: sampled query rows (every row without keys is checked zero anyway) and key rows.
  std::vector<char> certify_q(rows, 0);
  for (std::size_t row : sample_rows(p, options.rows, options.seed)) certify_q[row] = 1;
  const std::vector<char> certify_k =
      key_sample(p.batch * p.kv_heads, p.S, options.rows, options.seed ^ 0x9e3779b97f4a7c15ULL);
  // Phase A runs on the certified query rows and on every row of a group holding a certified key.
  std::vector<char> needed = certify_q, group_needed(p.batch * p.kv_heads, 0);
  for (std::size_t key = 0; key < keys; ++key)
    if (certify_k[key]) group_needed[key / p.S] = 1;
  for (std::size_t row = 0; row < rows; ++row) {
    const RowIndex r = row_index(p, row);
    if (group_needed[r.b * p.kv_heads + kv_head_of(p, r.h)]) needed[row] = 1;
  }
  // The mask rows (b', h', i') certified, and every query row they sum over.
  const std::array<std::size_t, 4> md = mask_dims(p);
  const std::size_t mask_rows = with_mask ? md[0] * md[1] * md[2] : 0;
  const auto mask_at = [&](std::size_t m) { return std::array<std::size_t, 3>{m / (md[1] * md[2]), m / md[2] % md[1], m % md[2]}; };
  std::vector<char> certify_m(mask_rows, 0);
  if (with_mask) {
    const std::size_t fan = rows / mask_rows;  // the query rows each mask row sums over
    const std::size_t wanted = options.rows ? std::max<std::size_t>(2, (*options.rows + fan - 1) / fan) : mask_rows;
    std::mt19937_64 random(options.seed ^ 0x5851f42d4c957f2dULL);
    for (std::size_t m : shuffled(mask_rows, wanted, random)) certify_m[m] = 1;
    for (std::size_t row = 0; row < rows; ++row) {
      const RowIndex r = row_index(p, row);
      const std::size_t m = ((md[0] == 1 ? 0 : r.b) * md[1] + (md[1] == 1 ? 0 : r.h)) * md[2] + (md[2] == 1 ? 0 : r.i);
      if (certify_m[m]) needed[row] = 1;
    }
  }
  // The sink heads certified (Step B12): each sums over the B·L rows of its head, so with options.rows
  // max(1, ⌈rows / (B·L)⌉) of them, drawn with the seed; all of them otherwise.
  std::vector<char> certify_s(with_sinks ? p.q_heads : 0, 0);
  if (with_sinks) {
    const std::size_t fan = std::max<std::size_t>(1, p.batch * p.L);
    const std::size_t wanted = options.rows ? std::max<std::size_t>(1, (*options.rows + fan - 1) / fan) : p.q_heads;
    std::mt19937_64 random(options.seed ^ 0x2545f4914f6cdd1dULL);
    for (std::size_t h : shuffled(p.q_heads, wanted, random)) certify_s[h] = 1;
    for (std::size_t row = 0; row < rows; ++row)
      if (certify_s[row_index(p, row).h]) needed[row] = 1;
  }
  std::vector<RowOutcome> q_outcomes(rows), k_outcomes(keys), v_outcomes(keys);
  std::vector<RowStats> stats(rows);
  std::vector<std::optional<CertifiedRow>> q_rows(rows);
  // The lean pass (blocks of rows) for the rows that only feed key rows, when the kernel's forward is
  // given and every stored value is finite; the full pass for the certified dQ rows and the rest.
  std::vector<char> lean(rows, 0);
  bool forward_given = !inputs.out.empty() && !inputs.lse.empty();
  for (std::size_t n = 0; forward_given && n < inputs.out.size(); ++n) forward_given = std::isfinite(inputs.out[n]);
  for (std::size_t row = 0; forward_given && row < rows; ++row)
    forward_given = std::isfinite(inputs.lse[row]) || !row_has_keys(p, row);
  if (forward_given) {
    std::vector<std::size_t> blocks;  // first rows of the blocks of every head of a needed group
    for (std::size_t bh = 0; bh < p.batch * p.q_heads; ++bh) {
      if (!group_needed[bh / p.q_heads * p.kv_heads + kv_head_of(p, bh % p.q_heads)]) continue;
      for (std::size_t i = 0; i < p.L; i += Backward::kBlockRows) blocks.push_back(bh * p.L + i);
      for (std::size_t i = 0; i < p.L; ++i) lean[bh * p.L + i] = !certify_q[bh * p.L + i];
    }
    std::vector<std::vector<std::size_t>> failed(blocks.size());
    parallel_for(blocks.size(), options.threads, [&](std::size_t n) {
      const std::size_t first = blocks[n], m = std::min(Backward::kBlockRows, p.L - first % p.L);
      failed[n] = backward.lean_block(first, m, certify_q, stats);
    });
    for (const auto& rows_failed : failed)
      for (std::size_t row : rows_failed) lean[row] = 0;
  }
  parallel_for(rows, options.threads, [&](std::size_t row) {
    const RowIndex r = row_index(p, row);
    const bool empty = !row_has_keys(p, row);
    cheap_checks(dq, q_first(row), p.E, {r.b, r.h, r.i}, empty, p.dtype, "masked row not zero", q_outcomes[row]);
    if (needed[row] && !empty && !lean[row]) backward.row(row, certify_q[row] != 0, stats[row], q_rows[row]);
  });
  std::vector<CertifiedRow> k_rows(keys), v_rows(keys);
  parallel_for(keys, options.threads, [&](std::size_t key) {
    const auto [b, g, j] = key_at(key);
    bool seen = false;
    for (std::size_t h = g * group; h < (g + 1) * group && !seen; ++h)
      for (std::size_t i = 0; i < p.L && !seen; ++i) seen = takes_part(p, b, h, i, j);
    cheap_checks(dk, key_first(key, p.E), p.E, {b, g, j}, !seen, kv_format(p), "unseen key's gradient not zero",
                 k_outcomes[key]);
    cheap_checks(dv, key_first(key, p.Ev), p.Ev, {b, g, j}, !seen, kv_format(p), "unseen key's gradient not zero",
                 v_outcomes[key]);
    if (certify_k[key] && seen) {
      k_rows[key].row = v_rows[key].row = key;
      backward.key(b, g, j, stats, k_rows[key], v_rows[key]);
    }
  });

  // Phase C: the mask rows, after the cheap checks of every element (finite; zero where no key takes part:
  // a -inf element always, and with causal, key lengths or a window every element whose positions are all excluded).
  std::vector<RowOutcome> m_outcomes(mask_rows);
  std::vector<CertifiedRow> m_rows(mask_rows);
  parallel_for(mask_rows, options.threads, [&](std::size_t m) {
    const std::array<std::size_t, 3> at = mask_at(m);
    std::vector<char> zero(md[3], 0);
    for (std::size_t e = 0; e < md[3]; ++e) zero[e] = p.mask[m * md[3] + e] == -kInf;
    if (p.causal != Causal::none || !p.key_lengths.empty() || has_window(p)) {
      std::fill(zero.begin(), zero.end(), 1);
      const auto [b0, b1] = broadcast_range(md[0], at[0], p.batch);
      const auto [h0, h1] = broadcast_range(md[1], at[1], p.q_heads);
      const auto [i0, i1] = broadcast_range(md[2], at[2], p.L);
      for (std::size_t b = b0; b < b1; ++b)
        for (std::size_t h = h0; h < h1; ++h)
          for (std::size_t i = i0; i < i1; ++i)
            for (std::size_t j = 0; j < p.S; ++j)
              if (takes_part(p, b, h, i, j)) zero[md[3] == 1 ? 0 : j] = 0;
    }
    for (std::size_t e = 0; e < md[3]; ++e) {
      std::vector<TensorFailure>& failures = m_outcomes[m].failures;
      const std::size_t before = failures.size();
      cheap_checks(dmask, m * md[3] + e, 1, at, zero[e] != 0, p.dtype, "masked element's gradient not zero",
                   m_outcomes[m], "NaN where no key takes part");
      for (std::size_t f = before; f < failures.size(); ++f) failures[f].index[3] = e;
    }
    if (certify_m[m]) {
      m_rows[m].row = m;
      backward.mask_row(at, stats, m_rows[m]);
    }
  });

  // Phase D (Step B12): the sinks' gradients, after the cheap checks (finite; every head's, certified or not).
  std::vector<RowOutcome> s_outcomes(certify_s.size());
  std::vector<CertifiedRow> s_rows(certify_s.size());
  for (std::size_t h = 0; h < certify_s.size(); ++h) {
    cheap_checks(dsinks, h, 1, {0, h, 0}, false, DType::fp32, "", s_outcomes[h]);
    if (!certify_s[h]) continue;
    GradientSums sums(1);
    for (std::size_t b = 0; b < p.batch; ++b)
      for (std::size_t i = 0; i < p.L; ++i) {
        const RowStats& r = stats[(b * p.q_heads + h) * p.L + i];
        if (r.has_keys) backward.add_sink_term(r, h, sums);  // a row without keys: O = 0, no term
      }
    s_rows[h].row = h;
    s_rows[h].index = {0, h, 0};
    finish(sums, backward.units(), sigma_of(p), {.scaled = false, .format = backward.sink_format()}, s_rows[h]);
  }

  // MPFI where the fast enclosures do not decide (fp64 kernels).
  bool refine = false;
  for (const auto& row : q_rows) refine = refine || (row && undecided(*row));
  for (std::size_t key = 0; key < keys; ++key)
    refine = refine || (!k_rows[key].band.empty() && (undecided(k_rows[key]) || undecided(v_rows[key])));
  for (const CertifiedRow& row : m_rows) refine = refine || (!row.band.empty() && undecided(row));
  for (const CertifiedRow& row : s_rows) refine = refine || (!row.band.empty() && undecided(row));
  const double work = static_cast<double>(rows) * static_cast<double>(p.S) * static_cast<double>(p.E + p.Ev);
  for (int bits = 128; refine && work <= kMpfiWork && bits <= 512; bits *= 2) {
    const GradientEnclosure exact = enclose_gradients(p, dout, bits);
    refine = false;
    const auto replace = [&](CertifiedRow& row, const std::vector<FineEnclosure>& all, std::size_t first) {
      for (std::size_t c = 0; c < row.fine.size(); ++c) row.fine[c] = all[first + c];
      row.fast = false;
      refine = refine || undecided(row);
    };
    for (std::size_t row = 0; row < rows; ++row)
      if (q_rows[row]) replace(*q_rows[row], exact.dq, q_first(row));
    for (std::size_t key = 0; key < keys; ++key) {
      if (k_rows[key].band.empty()) continue;
      replace(k_rows[key], exact.dk, key_first(key, p.E));
      replace(v_rows[key], exact.dv, key_first(key, p.Ev));
    }
    for (std::size_t m = 0; m < mask_rows; ++m)
      if (!m_rows[m].band.empty()) replace(m_rows[m], exact.dmask, m * md[3]);
    for (std::size_t h = 0; h < s_rows.size(); ++h)
      if (!s_rows[h].band.empty()) replace(s_rows[h], exact.dsinks, h);
  }
  std::vector<char> certified_k(keys, 0);
  for (std::size_t row = 0; row < rows; ++row)
    if (q_rows[row]) judge_row(*q_rows[row], dq, q_first(row), p.dtype, options.tier, q_outcomes[row]);
  for (std::size_t key = 0; key < keys; ++key) {
    if (k_rows[key].band.empty()) continue;
    certified_k[key] = 1;
    judge_row(k_rows[key], dk, key_first(key, p.E), kv_format(p), options.tier, k_outcomes[key]);
    judge_row(v_rows[key], dv, key_first(key, p.Ev), kv_format(p), options.tier, v_outcomes[key]);
  }
  std::vector<char> certified_m(mask_rows, 0);
  for (std::size_t m = 0; m < mask_rows; ++m) {
    if (m_rows[m].band.empty()) continue;
    certified_m[m] = 1;
    judge_row(m_rows[m], dmask, m * md[3], p.dtype, options.tier, m_outcomes[m]);
  }
  std::vector<char> certified_s(s_rows.size(), 0);
  for (std::size_t h = 0; h < s_rows.size(); ++h) {
    if (s_rows[h].band.empty()) continue;
    certified_s[h] = 1;
    judge_row(s_rows[h], dsinks, h, DType::fp32, options.tier, s_outcomes[h]);
  }
  std::vector<char> certified_q(rows, 0);
  for (std::size_t row = 0; row < rows; ++row) certified_q[row] = q_rows[row] ? 1 : 0;

  BackwardReport report;
  const double lambda = backward_lambda(p, options.alpha);
  report.dq = report_of(q_outcomes, certified_q, options, lambda);
  report.dk = report_of(k_outcomes, certified_k, options, lambda);
  report.dv = report_of(v_outcomes, certified_k, options, lambda);
  if (with_mask) {
    report.dmask = report_of(m_outcomes, certified_m, options, lambda);
    report.dmask->plain = false;
  }
  if (with_sinks) {
    report.dsinks = report_of(s_outcomes, certified_s, options, lambda);
    report.dsinks->plain = false;
  }
  for (TensorReport* r : {&report.dq, &report.dk, &report.dv}) r->plain = false;
  CertifyOptions forward = options;
  forward.diagnose = false;
  if (!inputs.out.empty() && !inputs.lse.empty()) {
    auto both = certify_tensor_and_lse(p, inputs.out, inputs.lse, forward, inputs.lse_format);
    report.out = std::move(both.first), report.lse = std::move(both.second);
  } else if (!inputs.out.empty()) {
    report.out = certify_tensor(p, inputs.out, forward);
  } else if (!inputs.lse.empty()) {
    report.lse = certify_lse(p, inputs.lse, forward, inputs.lse_format);
  }
  report.passed = report.dq.passed && report.dk.passed && report.dv.passed && (!report.dmask || report.dmask->passed) &&
                  (!report.dsinks || report.dsinks->passed) &&
                  (!report.out || report.out->passed) &&
                  (!report.lse || report.lse->passed);
  return report;
}

std::string BackwardReport::summary() const {
  std::string text = passed ? "passed" : "FAILED";
  text += "\n  dq: " + dq.summary() + "\n  dk: " + dk.summary() + "\n  dv: " + dv.summary();
  if (dmask) text += "\n  dmask: " + dmask->summary();
  if (dsinks) text += "\n  dsinks: " + dsinks->summary();
  if (out) text += "\n  out: " + out->summary();
  if (lse) text += "\n  lse: " + lse->summary();
  return text;
}

}  // namespace attn::verify
