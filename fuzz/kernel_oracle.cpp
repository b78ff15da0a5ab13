// Differential target: the production kernel against the certified oracle on small instances
// built from the fuzz bytes (any shape, mask, scale and batch the general problem allows).
// Properties: every output value and weight lies within its ambiguity band δ of the oracle's
// enclosure of the exact value; an all-masked row is exactly +0 with zero weights; each row's
// weights sum to 1 within the sum of their bands; the kernel's formatted answer gets the verdict
// ok or acceptable from the checker.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "byte_source.hpp"
#include "campaign/generators.hpp"
#include "fuzz_check.hpp"
#include "instance_io.hpp"
#include "judge/checker.hpp"
#include "judge/rules.hpp"
#include "solve.hpp"

namespace {

using attn::fuzz::require;

/// Small on purpose: the oracle is slow (MPFI, Ziv's loop) and small shapes reach every branch.
/// n, m <= 4 as build_input draws them; its other sizes (d <= 6, h <= 3) are within the cut.
attn::Limits small_limits() { return attn::verify::judge_sized_limits(4); }

/// A general-problem input text chosen by the bytes; valid by construction.
std::string build_input(attn::fuzz::ByteSource& bytes) {
  const std::size_t batch = bytes.in_range(1, 2), n = bytes.in_range(1, 4), m = bytes.in_range(1, 4);
  const std::size_t heads = bytes.in_range(1, 3);
  const std::size_t d_k = heads * bytes.in_range(1, 2), d_v = heads * bytes.in_range(1, 2);
  const std::size_t decimals = bytes.in_range(0, 6);
  const std::size_t mask = bytes.in_range(0, 2);
  const bool self_form = n == m && d_k == d_v && bytes.flag();
  std::string scale = bytes.in_range(0, 2) == 0 ? "none" : "sqrt";
  if (bytes.flag()) {
    scale = bytes.decimal(2, 3);
    if (scale[0] == '-') scale.erase(0, 1);
    if (scale.find_first_of("123456789") == std::string::npos) scale = "1";
  }
  const attn::MaskKind mask_kind = mask == 0   ? attn::MaskKind::none
                                   : mask == 1 ? attn::MaskKind::causal
                                               : attn::MaskKind::explicit_mask;
  std::string text = attn::write_header(
      {attn::Problem::general, batch, n, m, d_k, d_v, heads, static_cast<int>(decimals), mask_kind, scale, self_form});
  // |x| < 1000 (3 integer digits): scores reach 6·10^6 without a divisor, as in AI006.
  auto matrix = [&](std::size_t rows, std::size_t cols) {
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < cols; ++c) text += bytes.decimal(3, 4) + (c + 1 == cols ? '\n' : ' ');
    }
  };
  for (std::size_t b = 0; b < batch; ++b) {
    matrix(n, d_k);
    if (!self_form) {
      matrix(m, d_k);
      matrix(m, d_v);
    }
    for (std::size_t i = 0; mask == 2 && i < n; ++i) {
      for (std::size_t j = 0; j < m; ++j) text += std::string(bytes.flag() ? "1" : "0") + (j + 1 == m ? '\n' : ' ');
    }
  }
  return text;
}

/// |computed - exact| <= band, with exact somewhere in [lo, hi]. The slack of 2^-50 relative
/// absorbs the rounding of the subtraction itself.
bool within_band(double computed, const attn::verify::Interval& exact, double band) {
  const double allowed = band * (1 + 0x1p-50);
  return !(exact.lo - computed > allowed) && !(computed - exact.hi > allowed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  attn::fuzz::ByteSource bytes(data, size);
  const std::string input = build_input(bytes);
  const auto read = attn::read_instance(input, attn::Problem::general, small_limits());
  if (!read) attn::fuzz::property_failed("built input is valid", read.error().to_string() + "\n" + input);
  const attn::Instance& instance = read.value();
  const attn::Solution solution = attn::solve(instance, true);
  const attn::verify::Certificate certificate = attn::verify::certify(instance);

  for (std::size_t k = 0; k < solution.values.size(); ++k) {
    const auto& cell = certificate.cells[k];
    require(within_band(solution.values[k], cell.value, cell.band), "kernel value within δ of the oracle", input);
  }
  const std::size_t n = instance.n, m = instance.m, heads = instance.heads;
  for (std::size_t b = 0; b < instance.batch.size(); ++b) {
    for (std::size_t i = 0; i < n; ++i) {
      bool any_visible = false;
      for (std::size_t j = 0; j < m; ++j) any_visible = any_visible || attn::verify::key_visible(instance, b, i, j);
      for (std::size_t c = 0; !any_visible && c < instance.d_v; ++c) {
        const double value = solution.values[(b * n + i) * instance.d_v + c];
        require(value == 0 && !std::signbit(value), "an all-masked row is exactly +0", input);
      }
      for (std::size_t g = 0; g < heads; ++g) {
        double sum = 0, tolerance = 0;
        for (std::size_t j = 0; j < m; ++j) {
          const std::size_t k = ((b * heads + g) * n + i) * m + j;
          const double weight = solution.weights[k];
          const auto& exact = certificate.weights[k];
          if (!attn::verify::key_visible(instance, b, i, j)) {
            require(weight == 0, "a masked weight is 0", input);
            continue;
          }
          require(within_band(weight, exact.value, exact.band), "kernel weight within δ of the oracle", input);
          sum += weight;
          tolerance += exact.band + (exact.value.hi - exact.value.lo) + 0x1p-52;
        }
        if (any_visible) require(std::fabs(sum - 1) <= tolerance, "a row's weights sum to 1", input);
      }
    }
  }
  const auto verdict = attn::verify::check_output(certificate, attn::format_solution(instance, solution));
  require(verdict.kind == attn::verify::VerdictKind::ok || verdict.kind == attn::verify::VerdictKind::acceptable,
          "the kernel's answer is ok or acceptable", verdict.message + "\n" + input);
  return 0;
}
