// Where in a tensor the band usage sits: a bounded, max-pooled grid per query head over (query,
// output column), filled from the certified elements and the failures (TensorReport::heatmap). A
// kernel's bug at a tile boundary, in one head or in the last rows shows as a stripe of cells above 1.
#pragma once

#include <cstddef>
#include <vector>

namespace attn::verify {

/// Per query head h (the max over batch items), a grid of R × C cells, R = min(L, 64) and
/// C = min(Ev, 64): query i falls in cell row i·R/L, output column c in cell column c·C/Ev. A cell
/// holds the largest band usage |got - exact| / δ (deciding tier) of the certified elements in it, or
/// +inf where an element failed a check decided without a band (NaN, Inf, a masked row not zero);
/// kNone where nothing was certified and nothing failed. Memory: Hq·R·C doubles, whatever B, L, Ev.
struct UsageHeatmap {
  static constexpr std::size_t kMaxCells = 64;  ///< cells along each axis at most
  static constexpr double kNone = -1;           ///< a cell without a certified or failed element

  std::size_t heads = 0;                       ///< Hq (0: no grid)
  std::size_t queries = 0, columns = 0;        ///< L and Ev
  std::size_t cell_rows = 0, cell_columns = 0; ///< R and C
  std::vector<double> cells;                   ///< [heads, R, C], row-major

  UsageHeatmap() = default;
  /// The empty grid (every cell kNone) of `heads` heads over `queries` × `columns` elements.
  UsageHeatmap(std::size_t heads, std::size_t queries, std::size_t columns);

  /// The cell row of query i and the cell column of output column c.
  [[nodiscard]] std::size_t cell_row(std::size_t query) const { return query * cell_rows / queries; }
  [[nodiscard]] std::size_t cell_column(std::size_t column) const { return column * cell_columns / columns; }
  /// The first query of cell row k, ⌈k·L/R⌉ (L for k = R): cell row k holds queries
  /// first_query(k) .. first_query(k + 1) - 1.
  [[nodiscard]] std::size_t first_query(std::size_t k) const { return (k * queries + cell_rows - 1) / cell_rows; }
  /// The first output column of cell column k, ⌈k·Ev/C⌉ (Ev for k = C).
  [[nodiscard]] std::size_t first_column(std::size_t k) const {
    return (k * columns + cell_columns - 1) / cell_columns;
  }
  /// The cell of head h, cell row r, cell column c.
  [[nodiscard]] double at(std::size_t head, std::size_t row, std::size_t column) const {
    return cells[(head * cell_rows + row) * cell_columns + column];
  }
  /// Pools `usage` (NaN counts as +inf) into the cell of element (head, query, column); nothing
  /// without a grid. Throws ContractError for an element outside the grid's shape.
  void add(std::size_t head, std::size_t query, std::size_t column, double usage);
};

}  // namespace attn::verify
