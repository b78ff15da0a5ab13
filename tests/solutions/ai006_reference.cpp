// AI006 reference solution in C++ (what a contestant would submit): causal single-head attention.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <vector>

int main() {
  int n = 0, d = 0;
  if (std::scanf("%d %d", &n, &d) != 2) return 1;
  std::vector<double> Q(n * d), K(n * d), V(n * d);
  for (auto* matrix : {&Q, &K, &V}) {
    for (double& x : *matrix) {
      if (std::scanf("%lf", &x) != 1) return 1;
    }
  }
  const double scale = std::sqrt(static_cast<double>(d));
  std::vector<double> e(n);
  for (int i = 0; i < n; ++i) {
    double top = -INFINITY;
    for (int j = 0; j <= i; ++j) {  // causal: row i sees keys j <= i
      double dot = 0;
      for (int c = 0; c < d; ++c) dot += Q[i * d + c] * K[j * d + c];
      e[j] = dot / scale;
      top = std::max(top, e[j]);
    }
    double total = 0;
    for (int j = 0; j <= i; ++j) total += (e[j] = std::exp(e[j] - top));  // shifted: never overflows
    for (int c = 0; c < d; ++c) {
      double y = 0;
      for (int j = 0; j <= i; ++j) y += e[j] / total * V[j * d + c];
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "%.4f", y);
      const bool negative_zero = std::string_view(buffer) == "-0.0000";
      std::printf("%s%c", negative_zero ? "0.0000" : buffer, c + 1 == d ? '\n' : ' ');
    }
  }
}
