// The implementation under test: an interface the production kernel implements and that a user
// implements for their own kernel, so the property suites can run against it.
#pragma once

#include <memory>
#include <string>

#include "problem.hpp"
#include "solve.hpp"

namespace attn::verify {

/// An attention implementation to verify. run() computes the outputs (B·n x d_v, batch items
/// stacked) and, when provides_weights(), the weights (B x h x n x m, 0 where masked).
class Implementation {
 public:
  virtual ~Implementation() = default;
  /// A short name for reports ("production", "online-softmax", ...).
  [[nodiscard]] virtual std::string name() const = 0;
  /// The answer for a valid instance.
  [[nodiscard]] virtual Solution run(const Instance& instance) const = 0;
  /// Whether run() fills Solution::weights.
  [[nodiscard]] virtual bool provides_weights() const { return true; }
  /// The judge output text of a solution (default: attn::format_solution).
  [[nodiscard]] virtual std::string format(const Instance& instance, const Solution& solution) const {
    return format_solution(instance, solution);
  }
};

/// The production double kernel (attn::solve).
class ProductionKernel final : public Implementation {
 public:
  [[nodiscard]] std::string name() const override { return "production"; }
  [[nodiscard]] Solution run(const Instance& instance) const override { return solve(instance, true); }
};

/// A second, independent correct implementation: one pass per row with an online softmax
/// (running maximum and rescaled sums, as FlashAttention merges tiles).
class OnlineSoftmaxKernel final : public Implementation {
 public:
  [[nodiscard]] std::string name() const override { return "online-softmax"; }
  [[nodiscard]] Solution run(const Instance& instance) const override;
};

/// The fast tiled kernel (attn::flash_attention, fp64, layout [B, n, H, d]) with small tiles so
/// that every instance crosses tile boundaries and exercises the online merge. No weights.
class FlashKernel final : public Implementation {
 public:
  explicit FlashKernel(std::size_t key_tile = 3, std::size_t query_tile = 2)
      : key_tile_(key_tile), query_tile_(query_tile) {}
  [[nodiscard]] std::string name() const override { return "flash-fp64"; }
  /// The outputs for a valid instance; throws attn::ContractError when flash_attention refuses it.
  [[nodiscard]] Solution run(const Instance& instance) const override;
  [[nodiscard]] bool provides_weights() const override { return false; }

 private:
  std::size_t key_tile_;
  std::size_t query_tile_;
};

}  // namespace attn::verify
