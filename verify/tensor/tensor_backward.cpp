#include "tensor/tensor_backward.hpp"

#include <mpfi.h>

#include <cmath>
#include <string>

#include "numeric/mpfr.hpp"

// The exact gradients, and how they are enclosed.
//
// Semantics. For row (b, h, i) with keys J taking part (takes_part), scores s_j = σ q·k_j + β_j,
// weights P_j = e^{s_j} / Σ_{l in J} e^{s_l} and output O = Σ_j P_j v_j (tensor_oracle.cpp). The loss
// is Σ dout ∘ O over every row; its gradients for the exact inputs (PyTorch's autograd of the math
// path and FlashAttention-2's backward compute them, Dao 2023, Algorithm 2):
//   dV_j = Σ_i P_ij dO_i                          (rows i reading key j's kv head, j in J_i)
//   dP_ij = dO_i · v_j,  D_i = Σ_j P_ij dP_ij (= dO_i · O_i),  dS_ij = P_ij (dP_ij - D_i)
//   dQ_i = σ Σ_j dS_ij k_j,  dK_j = σ Σ_i dS_ij q_i.
// The softmax Jacobian ∂P_j/∂s_l = P_j (δ_jl - P_l) gives dS; s is linear in q and k. Under GQA the
// query heads h of kv head g = h / G all read k_j, v_j, so their terms add into g's dK and dV. A
// row without keys has O = 0 whatever its inputs: it contributes nothing, and its dQ is zero. The
// scale σ is a constant. An additive mask β enters as s_ij = σ q_i·k_j + β_ij, so its gradient is
// dβ_ij = dS_ij at every position (b, h, i, j), and a mask element broadcast over several positions
// gets the sum of theirs (0 where no key takes part: a -inf element, a causal or key-length
// exclusion, a row without keys).
// Softcap. s_ij = c·tanh(σ q_i·k_j / c) + β_ij, so ∂s_ij/∂(q_i·k_j) = σ (1 - t_ij²) with
// t_ij = tanh(σ q_i·k_j / c): dQ_i = σ Σ_j dS_ij (1 - t_ij²) k_j and dK_j = σ Σ_i dS_ij (1 - t_ij²) q_i,
// while dV and dβ (the bias is added after the cap) are unchanged.
// Sinks. The sink z_h joins the denominator as a key of value 0: P_ij = e^{s_ij} / (Σ_l e^{s_il} + e^{z_h})
// and P_iz = e^{z_h} / (the same). O_i = Σ_j P_ij v_j, so ∂O_i/∂s_l = P_il (v_l - O_i) as before (the
// sink's value 0 enters only through O_i): dS_ij = P_ij (dP_ij - D_i) with D_i = dO_i · O_i, unchanged.
// ∂O_i/∂z = P_iz (0 - O_i), so dz_h = -Σ_{b, i} P_iz D_i over every row of head h (a row without keys
// has O = 0: it contributes nothing).
// Evaluation. Every quantity in MPFI at `bits` bits, each operation rounded outwards, so each
// result encloses the exact value: products of two doubles are exact, the dot products and sums
// round outwards, σ = 1/√E is enclosed by MPFI's sqrt and division, e^{s_j - c} with c the largest
// upper end of the score enclosures (shift invariance, as in the forward oracle). D_i is formed as
// Σ_j P_ij dP_ij; its enclosure and dP_ij's overlap in P_ij (the dependency problem), which widens
// dS_ij by about 2^-bits of |dP| + |D|, no more. σ multiplies the sums of dQ and dK once at the end.

namespace attn::verify {

Result<Ok, Error> validate_dout(const TensorProblem& p, std::span<const double> dout) {
  const std::size_t expected = p.batch * p.q_heads * p.L * p.Ev;
  if (dout.size() != expected)
    return Error{"dout: expected " + std::to_string(expected) + " values (the output's [B, Hq, L, Ev]), got " +
                 std::to_string(dout.size())};
  for (std::size_t n = 0; n < dout.size(); ++n) {
    if (!std::isfinite(dout[n]))
      return Error{"dout: element " + element_name(stored_dims(p, p.q_heads, p.L, p.Ev), n) + " is " +
                   nonfinite_name(dout[n]) + " (it must be finite)"};
  }
  return Ok{};
}

GradientEnclosure enclose_gradients(const TensorProblem& p, std::span<const double> dout, int bits) {
  if (auto ok = validate(p); !ok) throw ContractError("enclose_gradients: " + ok.error().message);
  if (auto ok = validate_dout(p, dout); !ok) throw ContractError("enclose_gradients: " + ok.error().message);
  const mpfr_prec_t prec = std::max(bits, 64);
  const auto zeros = [prec](std::size_t n) {
    std::vector<MpfiInterval> v;
    v.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      v.emplace_back(prec);
      mpfi_set_ui(v.back().get(), 0);
    }
    return v;
  };
  // Sums of dS q (dK) and dS k (dQ) before σ, and of P dO (dV), in each tensor's layout.
  std::vector<MpfiInterval> dq = zeros(p.batch * p.q_heads * p.L * p.E), dk = zeros(p.batch * p.kv_heads * p.S * p.E),
                            dv = zeros(p.batch * p.kv_heads * p.S * p.Ev),
                            dmask = zeros(p.mask_kind == TensorMask::additive ? p.mask.size() : 0),
                            dsinks = zeros(p.sinks.size());
  MpfiInterval sigma(prec), term(prec), total(prec), D(prec), sink(prec);
  if (p.scale) {
    mpfi_set_d(sigma.get(), *p.scale);  // exact
  } else {
    mpfi_set_ui(sigma.get(), p.E);
    mpfi_sqrt(sigma.get(), sigma.get());
    mpfi_ui_div(sigma.get(), 1, sigma.get());
  }
  std::vector<MpfiInterval> P, dP, slope;  // slope: 1 - t² under softcap (the score's derivative over σ q·k)
  MpfrFloat shift(prec), z(prec);
  for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
    const RowIndex r = row_index(p, row);
    const std::size_t g = kv_head_of(p, r.h);
    std::vector<std::size_t> keys;
    for (std::size_t j = 0; j < p.S; ++j) {
      if (takes_part(p, r.b, r.h, r.i, j)) keys.push_back(j);
    }
    if (keys.empty()) continue;  // O = 0 whatever the inputs: no contribution, dQ stays zero
    const double* q = p.query.data() + tensor_index(p, p.q_heads, p.L, p.E, r.b, r.h, r.i, 0);
    const double* d_out = dout.data() + tensor_index(p, p.q_heads, p.L, p.Ev, r.b, r.h, r.i, 0);
    const auto key_row = [&](std::size_t j) { return p.key.data() + tensor_index(p, p.kv_heads, p.S, p.E, r.b, g, j, 0); };
    const auto value_row = [&](std::size_t j) {
      return p.value.data() + tensor_index(p, p.kv_heads, p.S, p.Ev, r.b, g, j, 0);
    };
    while (P.size() < keys.size()) P.emplace_back(prec), dP.emplace_back(prec), slope.emplace_back(prec);
    // Scores into P, then e^{s_j - c}, then the weights.
    mpfr_set_inf(shift.get(), -1);
    for (std::size_t t = 0; t < keys.size(); ++t) {
      const double* k = key_row(keys[t]);
      mpfi_set_ui(P[t].get(), 0);
      for (std::size_t c = 0; c < p.E; ++c) {
        mpfi_set_d(term.get(), q[c]);
        mpfi_mul_d(term.get(), term.get(), k[c]);
        mpfi_add(P[t].get(), P[t].get(), term.get());
      }
      mpfi_mul(P[t].get(), P[t].get(), sigma.get());
      if (p.softcap > 0) {  // c·tanh(σ q·k / c), and 1 - tanh² for the gradients of q and k
        mpfi_div_d(P[t].get(), P[t].get(), p.softcap);
        mpfi_tanh(P[t].get(), P[t].get());
        mpfi_sqr(slope[t].get(), P[t].get());
        mpfi_ui_sub(slope[t].get(), 1, slope[t].get());
        mpfi_mul_d(P[t].get(), P[t].get(), p.softcap);
      }
      mpfi_add_d(P[t].get(), P[t].get(), additive_bias(p, r.b, r.h, r.i, keys[t]));
      mpfr_max(shift.get(), shift.get(), &P[t].get()[0].right, MPFR_RNDU);  // exact: a copy of an end
    }
    const bool with_sink = has_sinks(p);
    if (with_sink) {  // the shift covers z as well (e^{z - c} <= 1)
      mpfr_set_d(z.get(), sink_of(p, r.h), MPFR_RNDN);  // exact
      mpfr_max(shift.get(), shift.get(), z.get(), MPFR_RNDU);
    }
    mpfi_set_ui(total.get(), 0);
    for (std::size_t t = 0; t < keys.size(); ++t) {
      mpfi_sub_fr(P[t].get(), P[t].get(), shift.get());
      mpfi_exp(P[t].get(), P[t].get());
      mpfi_add(total.get(), total.get(), P[t].get());
    }
    if (with_sink) {  // e^{z - c} joins the denominator
      mpfi_set_d(sink.get(), sink_of(p, r.h));
      mpfi_sub_fr(sink.get(), sink.get(), shift.get());
      mpfi_exp(sink.get(), sink.get());
      mpfi_add(total.get(), total.get(), sink.get());
      mpfi_div(sink.get(), sink.get(), total.get());
    }
    mpfi_set_ui(D.get(), 0);
    for (std::size_t t = 0; t < keys.size(); ++t) {
      mpfi_div(P[t].get(), P[t].get(), total.get());
      const double* v = value_row(keys[t]);
      mpfi_set_ui(dP[t].get(), 0);
      for (std::size_t c = 0; c < p.Ev; ++c) {
        mpfi_set_d(term.get(), d_out[c]);
        mpfi_mul_d(term.get(), term.get(), v[c]);
        mpfi_add(dP[t].get(), dP[t].get(), term.get());
      }
      mpfi_mul(term.get(), P[t].get(), dP[t].get());
      mpfi_add(D.get(), D.get(), term.get());
    }
    if (with_sink) {  // dz_h -= P_iz D_i
      mpfi_mul(term.get(), sink.get(), D.get());
      mpfi_sub(dsinks[r.h].get(), dsinks[r.h].get(), term.get());
    }
    for (std::size_t t = 0; t < keys.size(); ++t) {
      const std::size_t j = keys[t];
      // dV_j += P_j dO
      for (std::size_t c = 0; c < p.Ev; ++c) {
        mpfi_mul_d(term.get(), P[t].get(), d_out[c]);
        MpfiInterval& sum = dv[tensor_index(p, p.kv_heads, p.S, p.Ev, r.b, g, j, c)];
        mpfi_add(sum.get(), sum.get(), term.get());
      }
      // dS_j = P_j (dP_j - D), into dP_j
      mpfi_sub(dP[t].get(), dP[t].get(), D.get());
      mpfi_mul(dP[t].get(), dP[t].get(), P[t].get());
      if (!dmask.empty()) {
        MpfiInterval& m_sum = dmask[mask_offset(p, r.b, r.h, r.i, j)];
        mpfi_add(m_sum.get(), m_sum.get(), dP[t].get());
      }
      if (p.softcap > 0) mpfi_mul(dP[t].get(), dP[t].get(), slope[t].get());  // q and k see dS (1 - t²)
      const double* k = key_row(j);
      for (std::size_t c = 0; c < p.E; ++c) {
        mpfi_mul_d(term.get(), dP[t].get(), k[c]);
        MpfiInterval& q_sum = dq[tensor_index(p, p.q_heads, p.L, p.E, r.b, r.h, r.i, c)];
        mpfi_add(q_sum.get(), q_sum.get(), term.get());
        mpfi_mul_d(term.get(), dP[t].get(), q[c]);
        MpfiInterval& k_sum = dk[tensor_index(p, p.kv_heads, p.S, p.E, r.b, g, j, c)];
        mpfi_add(k_sum.get(), k_sum.get(), term.get());
      }
    }
  }
  GradientEnclosure out;
  out.bits = static_cast<int>(prec);
  for (MpfiInterval& x : dq) mpfi_mul(x.get(), x.get(), sigma.get()), out.dq.push_back(fine_enclosure(x));
  for (MpfiInterval& x : dk) mpfi_mul(x.get(), x.get(), sigma.get()), out.dk.push_back(fine_enclosure(x));
  for (const MpfiInterval& x : dv) out.dv.push_back(fine_enclosure(x));
  for (const MpfiInterval& x : dmask) out.dmask.push_back(fine_enclosure(x));
  for (const MpfiInterval& x : dsinks) out.dsinks.push_back(fine_enclosure(x));
  return out;
}

}  // namespace attn::verify
