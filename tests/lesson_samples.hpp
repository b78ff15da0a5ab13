// The lessons' worked examples, shared by the tests that check them.
#pragma once

#include <string>

namespace attn::testing_support {

/// The AI031 lesson's sample input (n = 2, d = 4, h = 2) and its answer.
inline const std::string kAi031Sample = "2 4 2\n1 0 1 1\n0 1 0 0\n1 0 0 0\n0 1 0 0\n2 0 0 4\n0 2 4 0\n1 1\n0 1\n";
inline const std::string kAi031Answer = "1.34 0.66 2.00 2.00\n0.00 2.00 4.00 0.00\n";

}  // namespace attn::testing_support
