// The mutant zoo: small wrong attention implementations, one per classic bug. The property suite
// must catch every one of them (test_mutants.cpp).
#pragma once

#include <string>
#include <vector>

#include "campaign/implementation.hpp"

namespace attn::verify {

/// The classic bugs, each a one-line departure from the textbook algorithm.
enum class Bug {
  no_max_subtraction,       ///< exp(s) without subtracting the row maximum: overflows at 4e6
  sqrt_d_not_sqrt_hd,       ///< divides by √d_k instead of √(d_k/h)
  interleaved_heads,        ///< head g takes columns g, g+h, g+2h, ... instead of a block
  reversed_head_concat,     ///< head g's output written to block h-1-g
  mask_after_softmax,       ///< softmax over every key, masked weights zeroed afterwards
  masked_row_uniform,       ///< an all-masked row gets uniform weights over every key
  causal_off_by_one,        ///< causal row i sees j < i instead of j <= i
  normalize_over_all_keys,  ///< the denominator sums exp over masked keys too
  float_accumulation,       ///< scores, exps and sums in float
  negative_zero_printed,    ///< prints "-0.00" for tiny negatives
  double_rounding,          ///< rounds to k+2 decimals, then to k
};

/// A textbook kernel with one bug.
class Mutant final : public Implementation {
 public:
  explicit Mutant(Bug bug) : bug_(bug) {}
  [[nodiscard]] std::string name() const override;
  [[nodiscard]] Solution run(const Instance& instance) const override;
  [[nodiscard]] std::string format(const Instance& instance, const Solution& solution) const override;

 private:
  Bug bug_;
};

/// Every bug, in declaration order.
[[nodiscard]] std::vector<Bug> all_bugs();

}  // namespace attn::verify
