// AI031 reference solution in C++ (what a contestant would submit): masked multi-head attention.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <vector>

int main() {
  int n = 0, d = 0, h = 0;
  if (std::scanf("%d %d %d", &n, &d, &h) != 3) return 1;
  std::vector<double> Q(n * d), K(n * d), V(n * d);
  for (auto* matrix : {&Q, &K, &V}) {
    for (double& x : *matrix) {
      if (std::scanf("%lf", &x) != 1) return 1;
    }
  }
  std::vector<int> mask(n * n);
  for (int& m : mask) {
    if (std::scanf("%d", &m) != 1) return 1;
  }
  const int hd = d / h;
  const double scale = std::sqrt(static_cast<double>(hd));
  std::vector<double> out(n * d, 0.0), e(n);
  for (int i = 0; i < n; ++i) {
    for (int g = 0; g < h; ++g) {
      double top = -INFINITY;
      for (int j = 0; j < n; ++j) {
        if (!mask[i * n + j]) continue;
        double dot = 0;
        for (int c = g * hd; c < (g + 1) * hd; ++c) dot += Q[i * d + c] * K[j * d + c];
        e[j] = dot / scale;
        top = std::max(top, e[j]);
      }
      if (top == -INFINITY) continue;  // no visible key: zeros
      double total = 0;
      for (int j = 0; j < n; ++j) {
        if (mask[i * n + j]) total += (e[j] = std::exp(e[j] - top));
      }
      for (int j = 0; j < n; ++j) {
        if (!mask[i * n + j]) continue;
        for (int c = g * hd; c < (g + 1) * hd; ++c) out[i * d + c] += e[j] / total * V[j * d + c];
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < d; ++c) {
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "%.2f", out[i * d + c]);
      const bool negative_zero = std::string_view(buffer) == "-0.00";
      std::printf("%s%c", negative_zero ? "0.00" : buffer, c + 1 == d ? '\n' : ' ');
    }
  }
}
