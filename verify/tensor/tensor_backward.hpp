// The backward pass of scaled_dot_product_attention, exactly: for a forward TensorProblem and an
// upstream gradient dout (the shape of the output), enclosures of the exact gradients dQ, dK, dV of
// Σ dout ∘ O with respect to the exact inputs. The derivation is in tensor_backward.cpp. This is the
// oracle of backward certification; the band of a finite-precision backward kernel builds on it.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "result.hpp"
#include "tensor/tensor.hpp"
#include "tensor/tensor_oracle.hpp"

namespace attn::verify {

/// Enclosures of the exact gradients, each in its tensor's layout (problem.layout): dq as the
/// query [B, Hq, L, E], dk as the key [B, Hkv, S, E], dv as the value [B, Hkv, S, Ev]. Under GQA a
/// kv head's dK and dV sum over the query heads of its group. A row without keys contributes
/// nothing and its dQ row is exactly zero; a key no query sees has dK = dV = 0 exactly.
struct GradientEnclosure {
  std::vector<FineEnclosure> dq, dk, dv;
  int bits = 0;  ///< the working precision
};

/// Ok when dout fits the problem (B·Hq·L·Ev finite doubles), else what is wrong, naming dout.
[[nodiscard]] Result<Ok, Error> validate_dout(const TensorProblem& problem, std::span<const double> dout);

/// The exact gradients at `bits` bits of working precision (at least 64): each enclosure's radius is
/// about 2^-bits times the scale of its sums. Throws ContractError when validate(problem) or
/// validate_dout fails.
[[nodiscard]] GradientEnclosure enclose_gradients(const TensorProblem& problem, std::span<const double> dout,
                                                  int bits = 128);

}  // namespace attn::verify
