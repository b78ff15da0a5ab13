#include "campaign/shrink.hpp"

#include <vector>

#include "campaign/transforms.hpp"

namespace attn::verify {
namespace {

// The rows of a matrix for which keep(r) holds.
Matrix keep_rows(const Matrix& matrix, const std::function<bool(std::size_t)>& keep) {
  Matrix out;
  out.cols = matrix.cols;
  for (std::size_t r = 0; r < matrix.rows; ++r) {
    if (!keep(r)) continue;
    ++out.rows;
    for (std::size_t c = 0; c < matrix.cols; ++c) {
      out.values.push_back(matrix.at(r, c));
      out.text.push_back(matrix.text_at(r, c));
    }
  }
  return out;
}

// The columns of a matrix for which keep(c) holds.
Matrix keep_columns(const Matrix& matrix, const std::function<bool(std::size_t)>& keep) {
  Matrix out;
  out.rows = matrix.rows;
  for (std::size_t r = 0; r < matrix.rows; ++r) {
    for (std::size_t c = 0; c < matrix.cols; ++c) {
      if (!keep(c)) continue;
      out.values.push_back(matrix.at(r, c));
      out.text.push_back(matrix.text_at(r, c));
    }
  }
  std::size_t kept = 0;
  for (std::size_t c = 0; c < matrix.cols; ++c) kept += keep(c) ? 1 : 0;
  out.cols = kept;
  return out;
}

// Keeps queries with keep_query(i) and keys with keep_key(j). ai006/ai031 keep them square.
Instance keep_indices(const Instance& instance, const std::function<bool(std::size_t)>& keep_query,
                      const std::function<bool(std::size_t)>& keep_key) {
  Instance out = instance;
  for (BatchItem& item : out.batch) {
    std::vector<std::uint8_t> mask;
    for (std::size_t i = 0; i < instance.n && !item.mask.empty(); ++i) {
      for (std::size_t j = 0; j < instance.m; ++j) {
        if (keep_query(i) && keep_key(j)) mask.push_back(item.mask[i * instance.m + j]);
      }
    }
    item.mask = std::move(mask);
    item.Q = keep_rows(item.Q, keep_query);
    item.K = keep_rows(item.K, keep_key);
    item.V = keep_rows(item.V, keep_key);
  }
  out.n = out.batch[0].Q.rows;
  out.m = out.batch[0].K.rows;
  return out;
}

// Keeps the columns of every head block for which keep(g, c) holds (c within the block).
Instance keep_head_columns(const Instance& instance, std::size_t heads,
                           const std::function<bool(std::size_t, std::size_t)>& keep_k,
                           const std::function<bool(std::size_t, std::size_t)>& keep_v) {
  Instance out = instance;
  const std::size_t head_k = instance.d_k / instance.heads, head_v = instance.d_v / instance.heads;
  for (BatchItem& item : out.batch) {
    item.Q = keep_columns(item.Q, [&](std::size_t c) { return keep_k(c / head_k, c % head_k); });
    item.K = keep_columns(item.K, [&](std::size_t c) { return keep_k(c / head_k, c % head_k); });
    item.V = keep_columns(item.V, [&](std::size_t c) { return keep_v(c / head_v, c % head_v); });
  }
  out.heads = heads;
  out.d_k = out.batch[0].Q.cols;
  out.d_v = out.batch[0].V.cols;
  return out;
}

// Simpler texts for one value: 0, the integer part, one fraction digit less.
std::vector<std::string> simpler_texts(const std::string& text) {
  std::vector<std::string> out;
  if (text == "0") return out;
  out.emplace_back("0");
  const std::size_t point = text.find('.');
  if (point == std::string::npos) return out;
  const std::string integer = text.substr(0, point);
  if (integer != "-0" && integer != "0") out.push_back(integer);
  if (text.size() - point > 2) out.push_back(text.substr(0, text.size() - 1));
  return out;
}

}  // namespace

void for_each_shrink(const Instance& instance, const std::function<bool(const Instance&)>& try_candidate) {
  const bool square = instance.problem != Problem::general || instance.self_form;
  // Fewer batch items.
  for (std::size_t b = instance.batch.size(); b-- > 0 && instance.batch.size() > 1;) {
    Instance out = instance;
    out.batch.erase(out.batch.begin() + static_cast<std::ptrdiff_t>(b));
    if (try_candidate(out)) return;
  }
  // Fewer rows: the first half, then one index less (query and key together when square).
  auto all = [](std::size_t) { return true; };
  if (instance.n > 1 && square) {
    const std::size_t half = instance.n / 2;
    if (try_candidate(keep_indices(
            instance, [half](std::size_t i) { return i < half; }, [half](std::size_t j) { return j < half; }))) {
      return;
    }
  }
  for (std::size_t r = instance.n; r-- > 0 && instance.n > 1;) {
    auto drop = [r](std::size_t i) { return i != r; };
    if (try_candidate(square ? keep_indices(instance, drop, drop) : keep_indices(instance, drop, all))) return;
  }
  for (std::size_t r = instance.m; r-- > 0 && !square && instance.m > 1;) {
    if (try_candidate(keep_indices(instance, all, [r](std::size_t j) { return j != r; }))) return;
  }
  // One head less, then one column less in every head.
  const std::size_t head_k = instance.d_k / instance.heads, head_v = instance.d_v / instance.heads;
  for (std::size_t g = instance.heads; g-- > 0 && instance.heads > 1;) {
    auto keep = [g](std::size_t head, std::size_t) { return head != g; };
    if (try_candidate(keep_head_columns(instance, instance.heads - 1, keep, keep))) return;
  }
  // One column less in every head: column p of each Q/K block (and of each V block when Q, K and
  // V must stay equally wide), or of each V block alone.
  const bool same_width = instance.problem != Problem::general || instance.self_form;
  auto keep_all = [](std::size_t, std::size_t) { return true; };
  for (std::size_t p = head_k; p-- > 0 && head_k > 1 && (!same_width || head_v > 1);) {
    auto keep = [p](std::size_t, std::size_t c) { return c != p; };
    const std::function<bool(std::size_t, std::size_t)> keep_v =
        same_width ? std::function<bool(std::size_t, std::size_t)>(keep) : keep_all;
    if (try_candidate(keep_head_columns(instance, instance.heads, keep, keep_v))) return;
  }
  for (std::size_t p = head_v; p-- > 0 && head_v > 1 && !same_width;) {
    if (try_candidate(keep_head_columns(instance, instance.heads, keep_all,
                                        [p](std::size_t, std::size_t c) { return c != p; }))) {
      return;
    }
  }
  // Shorter numbers.
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (Matrix BatchItem::*field : {&BatchItem::Q, &BatchItem::K, &BatchItem::V}) {
      const Matrix& matrix = instance.batch[b].*field;
      for (std::size_t k = 0; k < matrix.text.size(); ++k) {
        for (const std::string& text : simpler_texts(matrix.text[k])) {
          Instance out = instance;
          set_text(out.batch[b].*field, k, text);
          if (instance.self_form) out.batch[b].Q = out.batch[b].K = out.batch[b].V = out.batch[b].*field;
          if (try_candidate(out)) return;
        }
      }
      if (instance.self_form) break;  // Q, K and V are one matrix
    }
  }
  // Fewer mask ones.
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t k = 0; k < instance.batch[b].mask.size(); ++k) {
      if (!instance.batch[b].mask[k]) continue;
      Instance out = instance;
      out.batch[b].mask[k] = 0;
      if (try_candidate(out)) return;
    }
  }
}

}  // namespace attn::verify
