// The campaign's picture: a histogram of |kernel - exact| / δ, written as a standalone SVG file.
#pragma once

#include <string>
#include <vector>

namespace attn::verify {

/// An SVG histogram of |kernel - exact| / δ on a log scale: a bin for 0, one per decade from 1e-12
/// to 1, and one (red) for values outside the band.
[[nodiscard]] std::string error_histogram_svg(const std::vector<double>& ratios);

}  // namespace attn::verify
