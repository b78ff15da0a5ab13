// Shrinking a failing instance: smaller valid instances to try, simplest reductions first.
#pragma once

#include <functional>

#include "problem.hpp"

namespace attn::verify {

/// Calls `try_candidate` on smaller valid variants of `instance`, in this order, until it returns
/// true: half the batch or rows, one batch item or row (query and key) less, one head less, one
/// column per head less, a value set to 0, a value without its fraction, one fraction digit less,
/// a mask one set to 0. Every candidate stays within the limits `instance` satisfied.
void for_each_shrink(const Instance& instance, const std::function<bool(const Instance&)>& try_candidate);

}  // namespace attn::verify
