// Internal to the property suite (properties*.cpp): the helpers the property files share and the
// two halves of the registry that properties.cpp joins.
#pragma once

#include <rapidcheck.h>

#include <cstddef>
#include <string>
#include <vector>

#include "campaign/properties.hpp"
#include "judge/rules.hpp"

namespace attn::verify::detail {

/// Fails the current RapidCheck case with `message` unless `ok`.
inline void require(bool ok, const std::string& message) {
  if (!ok) RC_FAIL(message);
}

/// "output[row][col]": how failure messages name an output cell.
inline std::string cell_name(std::size_t row, std::size_t col) {
  return "output[" + std::to_string(row) + "][" + std::to_string(col) + "]";
}

/// Runs the implementation and fails the case unless the outputs (and the weights, when it
/// provides them) have the instance's shape, so the properties may index them freely.
inline Solution run_checked(const Implementation& implementation, const Instance& instance) {
  Solution solution = implementation.run(instance);
  require(solution.values.size() == instance.batch.size() * instance.n * instance.d_v,
          "run() returned " + std::to_string(solution.values.size()) + " values");
  if (implementation.provides_weights()) {
    require(solution.weights.size() == instance.batch.size() * instance.heads * instance.n * instance.m,
            "run() returned " + std::to_string(solution.weights.size()) + " weights");
  }
  return solution;
}

/// How many keys query i of batch item b sees.
inline std::size_t visible_count(const Instance& instance, std::size_t b, std::size_t i) {
  std::size_t count = 0;
  for (std::size_t j = 0; j < instance.m; ++j) count += key_visible(instance, b, i, j) ? 1 : 0;
  return count;
}

/// The properties whose expectation needs no oracle (exact values, bit-for-bit metamorphic
/// relations, an a priori bound), cheapest first (properties_exact.cpp).
[[nodiscard]] std::vector<Property> exact_properties();

/// The properties checked against the oracle's band δ, cheapest first (properties_banded.cpp).
[[nodiscard]] std::vector<Property> banded_properties();

}  // namespace attn::verify::detail
