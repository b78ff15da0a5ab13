// The closed interval of doubles every enclosure in verify/ is reported as: the judge oracle's
// cells and weights, the tensor oracle's outputs, the fast passes' arithmetic (double_interval.hpp)
// and MPFI's enclosures rounded outwards (mpfr.hpp).
#pragma once

namespace attn::verify {

/// A closed interval of doubles, rounded outwards from the exact enclosure: lo <= exact <= hi.
struct Interval {
  double lo = 0;
  double hi = 0;
};

}  // namespace attn::verify
