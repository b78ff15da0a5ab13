#include "tensor/tensor_heatmap.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "result.hpp"

namespace attn::verify {

UsageHeatmap::UsageHeatmap(std::size_t heads_, std::size_t queries_, std::size_t columns_)
    : heads(heads_), queries(queries_), columns(columns_), cell_rows(std::min(queries_, kMaxCells)),
      cell_columns(std::min(columns_, kMaxCells)), cells(heads_ * cell_rows * cell_columns, kNone) {}

void UsageHeatmap::add(std::size_t head, std::size_t query, std::size_t column, double usage) {
  if (cells.empty()) return;
  if (head >= heads || query >= queries || column >= columns)
    throw ContractError("UsageHeatmap::add: element outside the grid's shape");
  double& cell = cells[(head * cell_rows + cell_row(query)) * cell_columns + cell_column(column)];
  cell = std::max(cell, std::isnan(usage) ? std::numeric_limits<double>::infinity() : usage);
}

}  // namespace attn::verify
