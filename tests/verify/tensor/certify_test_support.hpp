// Helpers of the certification tests on hand-made outputs (test_tensor_certify, test_tensor_heatmap).
#pragma once

#include <cstddef>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor/tensor_oracle.hpp"

namespace attn::verify::test {

/// The exact output rounded to the storage format: what a perfect kernel writes.
inline std::vector<double> rounded_exact(const TensorProblem& p) {
  std::vector<double> out(p.batch * p.q_heads * p.L * p.Ev);
  for (std::size_t row = 0; row < p.batch * p.q_heads * p.L; ++row) {
    const RowEnclosure e = enclose_row(p, row, 128);
    const RowIndex r = row_index(p, row);
    for (std::size_t c = 0; c < p.Ev; ++c)
      out[tensor_index(p, p.q_heads, p.L, p.Ev, r.b, r.h, r.i, c)] = round_to(p.dtype, e.fine[c].head);
  }
  return out;
}

/// Where output element (b, h, i, c) is stored.
inline std::size_t at(const TensorProblem& p, std::size_t b, std::size_t h, std::size_t i, std::size_t c) {
  return tensor_index(p, p.q_heads, p.L, p.Ev, b, h, i, c);
}

/// A fixed band (1e-6 for every element), so verdicts do not depend on the band's derivation.
inline const RowBands kFixedBand = [](std::size_t, const RowEnclosure& e, double) {
  return TierBands{std::vector<double>(e.out.size(), 1e-6), {}};
};

}  // namespace attn::verify::test
