// The problems' rules as the verification side reads them: which keys a query sees, which
// columns a head takes, the scale divisor. Written from the problem statements (README,
// "Problems") and deliberately not from src/: the production kernels decide the same things
// with code of their own, so a wrong rule on either side shows up as a disagreement instead of
// being shared by the kernel and the oracle that judges it (README, "What verify/ may import").
#pragma once

#include <cstddef>

#include "problem.hpp"

namespace attn::verify {

/// Does query i of batch item b see key j? ai006: j <= i (causal). ai031: mask[i][j] = 1.
/// general: every key (none), j <= i aligned at the top-left (causal), or mask[i][j] = 1 (explicit).
[[nodiscard]] bool key_visible(const Instance& instance, std::size_t b, std::size_t i, std::size_t j);

/// The columns head g takes: [k_first, k_first + k_count) of Q and K, [v_first, v_first + v_count)
/// of V and of the output. Heads are contiguous blocks of d_k / h and d_v / h columns, in order.
struct HeadColumns {
  std::size_t k_first = 0, k_count = 0;
  std::size_t v_first = 0, v_count = 0;
};

/// Head g's columns.
[[nodiscard]] HeadColumns head_columns(const Instance& instance, std::size_t g);

/// The scores are Q·Kᵀ divided by: 1 (general `none`), √radicand (ai006: √d; ai031: √hd, not
/// √d; general `sqrt`: √(d_k/h)), or the explicit decimal (general). Which of the three applies.
[[nodiscard]] ScaleKind scale_rule(const Instance& instance);

/// The radicand of the √ rule: d_k / h.
[[nodiscard]] std::size_t sqrt_radicand(const Instance& instance);

/// The divisor as the double nearest to it (√ and the decimal are each rounded once), for the
/// double-precision reference implementations and the properties' expectations.
[[nodiscard]] double divisor_as_double(const Instance& instance);

}  // namespace attn::verify
