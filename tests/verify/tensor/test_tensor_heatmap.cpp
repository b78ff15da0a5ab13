// The report's usage heatmap: a planted failure shows in its cell above 1 (max-pooled over batch items
// and over the queries and columns a cell holds), a row not certified is kNone, a NaN in it +inf, and
// the cells' edges cover every query and column once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor/tensor_heatmap.hpp"
#include "tensor/tensor_oracle.hpp"
#include "certify_test_support.hpp"

namespace attn::verify {
namespace {

// B = 2, Hq = Hkv = 2, L queries, S = 4 keys, E = 4, Ev = 3; values k/8, exact in fp32.
TensorProblem problem(std::size_t L, Causal causal = Causal::none) {
  TensorProblem p;
  p.batch = 2, p.q_heads = 2, p.kv_heads = 2, p.L = L, p.S = 4, p.E = 4, p.Ev = 3, p.dtype = DType::fp32;
  p.causal = causal;
  std::mt19937_64 random(7);
  const auto fill = [&](std::vector<double>& v, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) v.push_back(static_cast<double>(static_cast<int>(random() % 33) - 16) / 8);
  };
  fill(p.query, p.batch * p.q_heads * L * p.E);
  fill(p.key, p.batch * p.kv_heads * p.S * p.E);
  fill(p.value, p.batch * p.kv_heads * p.S * p.Ev);
  return p;
}

using test::at;
using test::kFixedBand;
using test::rounded_exact;

TEST(UsageHeatmap, EdgesCoverEveryQueryAndColumnOnce) {
  const UsageHeatmap grid(3, 70, 100);
  EXPECT_EQ(grid.cell_rows, 64u);
  EXPECT_EQ(grid.cell_columns, 64u);
  EXPECT_EQ(grid.cells.size(), 3u * 64 * 64);
  EXPECT_EQ(grid.first_query(0), 0u);
  EXPECT_EQ(grid.first_query(64), 70u);
  EXPECT_EQ(grid.first_column(64), 100u);
  for (std::size_t i = 0; i < 70; ++i) {
    const std::size_t k = grid.cell_row(i);
    EXPECT_LE(grid.first_query(k), i);
    EXPECT_LT(i, grid.first_query(k + 1));
  }
  for (std::size_t c = 0; c < 100; ++c) {
    const std::size_t k = grid.cell_column(c);
    EXPECT_LE(grid.first_column(k), c);
    EXPECT_LT(c, grid.first_column(k + 1));
  }
  const UsageHeatmap small(1, 5, 3);  // fewer queries and columns than 64: a cell each
  EXPECT_EQ(small.cell_rows, 5u);
  EXPECT_EQ(small.cell_columns, 3u);
  EXPECT_TRUE(std::all_of(small.cells.begin(), small.cells.end(), [](double x) { return x == UsageHeatmap::kNone; }));
}

TEST(UsageHeatmap, PlantedFailureShowsInItsCellAboveOne) {
  const TensorProblem p = problem(70);  // 70 queries in 64 cell rows: query 40 in cell row 36
  std::vector<double> output = rounded_exact(p);
  output[at(p, 1, 1, 40, 2)] += 0.25;
  const TensorReport report = certify_tensor(p, output, {}, kFixedBand);
  ASSERT_FALSE(report.passed);
  const UsageHeatmap& grid = report.heatmap;
  ASSERT_EQ(grid.heads, 2u);
  ASSERT_EQ(grid.cell_rows, 64u);
  ASSERT_EQ(grid.cell_columns, 3u);
  ASSERT_EQ(grid.cell_row(40), 36u);
  const auto worst = std::max_element(grid.cells.begin(), grid.cells.end());
  EXPECT_EQ(static_cast<std::size_t>(worst - grid.cells.begin()), (1 * 64 + 36) * 3 + 2u);
  EXPECT_GT(grid.at(1, 36, 2), 1);
  EXPECT_EQ(grid.at(1, 36, 2), report.max_band_usage);
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t r = 0; r < 64; ++r)
      for (std::size_t c = 0; c < 3; ++c) {
        if (h == 1 && r == 36 && c == 2) continue;
        EXPECT_GE(grid.at(h, r, c), 0) << h << " " << r << " " << c;  // every row certified
        EXPECT_LT(grid.at(h, r, c), 1) << h << " " << r << " " << c;
      }
}

TEST(UsageHeatmap, UncertifiedRowIsNoneAndItsNanIsInfinite) {
  const TensorProblem p = problem(5);
  std::vector<double> output = rounded_exact(p);
  CertifyOptions options;
  options.rows = 4, options.seed = 3;
  std::vector<char> certified(p.batch * p.q_heads * p.L, 0);
  for (std::size_t row : sample_rows(p, options.rows, options.seed)) certified[row] = 1;
  // A (head, query) none of whose batch items' rows is certified: its cells hold nothing.
  std::size_t none_h = 2, none_i = 0;
  for (std::size_t h = 0; h < p.q_heads && none_h == 2; ++h)
    for (std::size_t i = 0; i < p.L && none_h == 2; ++i)
      if (!certified[h * p.L + i] && !certified[(p.q_heads + h) * p.L + i]) none_h = h, none_i = i;
  ASSERT_LT(none_h, 2u) << "the sample certifies every (head, query)";
  // Another uncertified row (b, h, i) gets a NaN: the cheap check fails it, +inf in its cell.
  std::size_t nan_row = 0;
  while (certified[nan_row] || (nan_row % (p.q_heads * p.L)) == none_h * p.L + none_i) ++nan_row;
  const RowIndex n = row_index(p, nan_row);
  output[at(p, n.b, n.h, n.i, 1)] = std::nan("");
  const TensorReport report = certify_tensor(p, output, options, kFixedBand);
  const UsageHeatmap& grid = report.heatmap;
  for (std::size_t c = 0; c < p.Ev; ++c) EXPECT_EQ(grid.at(none_h, none_i, c), UsageHeatmap::kNone) << c;
  EXPECT_TRUE(std::isinf(grid.at(n.h, n.i, 1)));
  for (std::size_t row = 0; row < certified.size(); ++row) {
    if (!certified[row]) continue;
    const RowIndex r = row_index(p, row);
    for (std::size_t c = 0; c < p.Ev; ++c) EXPECT_GE(grid.at(r.h, r.i, c), 0);  // certified: a usage
  }
}

TEST(UsageHeatmap, LseHasOneColumn) {
  const TensorProblem p = problem(5);
  std::vector<double> lse(p.batch * p.q_heads * p.L, 0.0);  // wrong everywhere
  const TensorReport report = certify_lse(p, lse, {});
  EXPECT_EQ(report.heatmap.heads, 2u);
  EXPECT_EQ(report.heatmap.cell_columns, 1u);
  EXPECT_TRUE(std::all_of(report.heatmap.cells.begin(), report.heatmap.cells.end(), [](double x) { return x > 1; }));
}

}  // namespace
}  // namespace attn::verify
