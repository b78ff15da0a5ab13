// Tensors read in place: a rank-4 strided view of fp64, fp32, fp16 or bf16 values (a numpy array, a
// torch tensor's storage, a .npy file's bytes), and the forward certification of out, query, key
// and value given as views (certify_views). Shared by the Python module and `attncheck tensor check`.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_certify.hpp"

namespace attn::verify {

/// A rank-4 tensor read in place, any strides (in bytes, possibly 0 or negative): float64, float32,
/// float16, or bfloat16 as its bit patterns. Values are little-endian (the host's order).
struct StridedView {
  enum class Kind { f64, f32, f16, bf16 };
  const char* data = nullptr;
  Kind kind = Kind::f64;
  std::array<std::ptrdiff_t, 4> strides{};
  std::vector<std::size_t> shape;  ///< four dimensions

  /// Row (b, h, i)'s shape[3] values, as the doubles they equal, into `to`.
  void read_row(std::size_t b, std::size_t h, std::size_t i, double* to) const;
  /// Is every value of this kind representable in `format`?
  [[nodiscard]] bool within(DType format) const;
  /// Every value, row-major in the shape.
  [[nodiscard]] std::vector<double> values() const;
};

/// The double an IEEE binary16 bit pattern equals, exactly.
[[nodiscard]] double half_value(std::uint16_t bits);

/// validate's check of a tensor's values, streamed over the view: std::invalid_argument naming
/// `name` and the first element (its index in [B, H, rows, width]) that is not finite or not
/// representable in `format`. With `nonfinite`, NaN and ±inf are admitted (IEEE inputs) and
/// *nonfinite set when one is met.
void check_values(const StridedView& view, const char* name, DType format, bool* nonfinite = nullptr);

/// The options of a certification by their names, as the Python keywords and the CLI's flags give
/// them; each throws std::invalid_argument naming the argument at fault.
/// A storage format by its profile name (fp64, fp32, fp16, bf16).
[[nodiscard]] DType format_named(const std::string& name, const char* what);
/// The declared kernel structure (structure_error's rules).
[[nodiscard]] KernelStructure structure_of(std::optional<std::size_t> key_tile, std::optional<std::size_t> sum_chunk,
                                           bool single_pass, std::optional<std::size_t> splits, bool ordered);
/// The options every certification shares: the arithmetic profile `precision` (arithmetic_profile's
/// names) refined by exp_ulps and the two storage flags, the sample, the tier and its alpha.
[[nodiscard]] CertifyOptions options_of(const std::string& precision, std::optional<double> exp_ulps,
                                        std::optional<bool> weights_in_storage, std::optional<bool> query_in_storage,
                                        std::optional<std::size_t> rows, std::uint64_t seed, const std::string& tier,
                                        double alpha, std::size_t max_failures);
/// The LSE's storage (default fp32), base and masked-row convention.
[[nodiscard]] LseFormat lse_format_of(std::optional<std::string> lse_precision, bool lse_base2, bool lse_masked_plus_inf);

/// The problem of query, key and value of rank-4 shapes q, k, v ([B, Hq, L, E], [B, Hkv, S, E],
/// [B, Hkv, S, Ev]) without their values; mask_kind "none", "boolean" (1 = takes part) or "additive"
/// with `mask` row-major in mask_shape; causal "none", "top-left" or "bottom-right". Checks that the
/// shapes agree (std::invalid_argument); validate_without_values checks the rest.
[[nodiscard]] TensorProblem problem_without_values(
    const std::vector<std::size_t>& q, const std::vector<std::size_t>& k, const std::vector<std::size_t>& v,
    const std::string& mask_kind, const std::vector<std::size_t>& mask_shape, std::vector<double> mask,
    const std::string& causal, std::pair<std::int64_t, std::int64_t> window, const std::vector<double>& alibi_slopes,
    double softcap, const std::vector<double>& sinks, std::optional<double> scale,
    const std::vector<std::size_t>& key_lengths, DType dtype, std::optional<DType> kv_dtype);

/// The forward certification of `out` ([B, Hq, L, Ev]) for query, key and value given as views:
/// `problem` holds everything else (shapes, mask, causal rule, ...; problem_without_values-style, its
/// query/key/value empty). Checks the values (check_values; NaN and ±inf admitted), validates the
/// problem (std::invalid_argument with validate's message), and certifies one (batch item, kv head)
/// group at a time (certify_in_groups), or the whole problem as doubles when the inputs hold NaN or
/// infinity, the problem is empty, or `in_groups` is false (the same report). `lse` ([B, Hq, L]) is
/// certified too when given (not for NaN/inf or empty inputs: std::invalid_argument).
[[nodiscard]] std::pair<TensorReport, std::optional<TensorReport>> certify_views(
    const TensorProblem& problem, const StridedView& out, const StridedView& query, const StridedView& key,
    const StridedView& value, const CertifyOptions& options, std::optional<std::span<const double>> lse = std::nullopt,
    const LseFormat& format = {}, bool in_groups = true);

}  // namespace attn::verify
