#include "campaign/report_svg.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace attn::verify {

std::string error_histogram_svg(const std::vector<double>& ratios) {
  // Bins: exactly 0, then one per decade from 1e-12 to 1, then > 1 (outside the band: a failure).
  constexpr int kDecades = 12;
  std::vector<std::size_t> bins(kDecades + 2, 0);
  for (double r : ratios) {
    if (r == 0) {
      ++bins[0];
    } else if (r > 1) {
      ++bins[kDecades + 1];
    } else {
      const int decade = std::clamp(static_cast<int>(std::floor(std::log10(r))) + kDecades, 0, kDecades - 1);
      ++bins[static_cast<std::size_t>(decade) + 1];
    }
  }
  const std::size_t tallest = std::max<std::size_t>(1, *std::max_element(bins.begin(), bins.end()));
  const int width = 760, height = 360, left = 60, bottom = 300,
            bar = (width - left - 20) / static_cast<int>(bins.size());
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
      << "' font-family='sans-serif' font-size='11'>\n<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='" << left << "' y='20' font-size='14'>|kernel - exact| / band, " << ratios.size()
      << " output values (bar height: log count)</text>\n";
  for (std::size_t b = 0; b < bins.size(); ++b) {
    const double fraction = bins[b] ? std::log10(1.0 + bins[b]) / std::log10(1.0 + tallest) : 0.0;
    const int h = static_cast<int>(fraction * (bottom - 40));
    const int x = left + static_cast<int>(b) * bar;
    const char* colour = b == bins.size() - 1 ? "#c0392b" : "#2e86c1";
    svg << "<rect x='" << x + 2 << "' y='" << bottom - h << "' width='" << bar - 4 << "' height='" << h << "' fill='"
        << colour << "'/>\n<text x='" << x + bar / 2 << "' y='" << bottom - h - 4 << "' text-anchor='middle'>"
        << bins[b] << "</text>\n";
    std::string label = b == 0                 ? "0"
                        : b == bins.size() - 1 ? "> 1"
                                               : "1e" + std::to_string(static_cast<int>(b) - 1 - kDecades);
    svg << "<text x='" << x + bar / 2 << "' y='" << bottom + 16 << "' text-anchor='middle'>" << label << "</text>\n";
  }
  svg << "<line x1='" << left << "' y1='" << bottom << "' x2='" << width - 20 << "' y2='" << bottom
      << "' stroke='black'/>\n<text x='" << left << "' y='" << bottom + 40
      << "'>bins: 0 = inside the oracle's enclosure of the exact value, then decades [1e-k, 1e-k+1); red: outside the "
         "band</text>\n</svg>\n";
  return svg.str();
}

}  // namespace attn::verify
