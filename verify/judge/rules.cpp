#include "judge/rules.hpp"

#include <cmath>
#include <cstdlib>
#include <string>

namespace attn::verify {

bool key_visible(const Instance& instance, std::size_t b, std::size_t i, std::size_t j) {
  const auto mask_bit = [&] { return instance.batch[b].mask[i * instance.m + j] != 0; };
  switch (instance.problem) {
    case Problem::ai006:
      return j <= i;  // AI006: "row i attends to rows 0..i"
    case Problem::ai031:
      return mask_bit();  // AI031: the same n x n mask for every head
    case Problem::general:
      break;
  }
  switch (instance.mask) {
    case MaskKind::none:
      return true;
    case MaskKind::causal:
      return j <= i;  // aligned at the top-left, as PyTorch's is_causal
    case MaskKind::explicit_mask:
      return mask_bit();
  }
  return false;
}

HeadColumns head_columns(const Instance& instance, std::size_t g) {
  const std::size_t k_count = instance.d_k / instance.heads, v_count = instance.d_v / instance.heads;
  return {g * k_count, k_count, g * v_count, v_count};
}

ScaleKind scale_rule(const Instance& instance) {
  // AI006 and AI031 always divide by the square root of the head width.
  return instance.problem == Problem::general ? instance.scale : ScaleKind::sqrt_head_dim;
}

std::size_t sqrt_radicand(const Instance& instance) { return instance.d_k / instance.heads; }

double divisor_as_double(const Instance& instance) {
  switch (scale_rule(instance)) {
    case ScaleKind::none:
      return 1.0;
    case ScaleKind::sqrt_head_dim:
      return std::sqrt(static_cast<double>(sqrt_radicand(instance)));
    // strtod rounds the decimal correctly (C17 7.22.1.3 with glibc), independently of the reader.
    case ScaleKind::explicit_value:
      return std::strtod(instance.scale_text.c_str(), nullptr);
  }
  return 1.0;
}

}  // namespace attn::verify
