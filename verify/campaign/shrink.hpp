// Shrinking a failing instance: smaller valid instances to try, simplest reductions first.
#pragma once

#include <functional>

#include "problem.hpp"

namespace attn::verify {

/// Calls `try_candidate` on smaller valid variants of `instance`, in this order, until it returns
/// true: one batch item less; the first half of the rows (square instances: ai006, ai031,
/// general with n = m in self form); one row less (query and key together when square, else one
/// query, then one key); one head less; one column per head less; a value set to 0, without its
/// fraction, or with one fraction digit less; a mask one set to 0. Every candidate stays within
/// the limits `instance` satisfied.
void for_each_shrink(const Instance& instance, const std::function<bool(const Instance&)>& try_candidate);

}  // namespace attn::verify
