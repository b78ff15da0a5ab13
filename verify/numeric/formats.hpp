// Binary floating-point formats as verify/ models them: fp64, fp32, fp16 and bf16, their unit
// roundoff, normal and subnormal ranges and spacing, and correct rounding (ties to even) of a
// double to each. Every value of each format is exactly a double, so values are held as doubles.
#pragma once

#include <optional>
#include <string_view>

namespace attn::verify {

/// Storage (and compute) formats. Every value of each is exactly a double.
enum class DType { fp64, fp32, fp16, bf16 };

/// "fp64" | "fp32" | "fp16" | "bf16".
[[nodiscard]] std::string_view dtype_name(DType dtype);
[[nodiscard]] std::optional<DType> dtype_from_name(std::string_view name);

/// Unit roundoff of a format: 2^-53, 2^-24, 2^-11, 2^-8.
[[nodiscard]] double unit_roundoff(DType dtype);

/// The smallest positive normal value of a format: 2^-1022, 2^-126, 2^-14, 2^-126.
[[nodiscard]] double smallest_normal(DType dtype);

/// Half the smallest positive subnormal of a format, rounded up to a double (2^-1074 for fp64,
/// whose half is no double): the most a correct rounding moves a value below the normal range.
[[nodiscard]] double half_smallest_subnormal(DType dtype);

/// Spacing of `dtype`'s values at |x| (the ulp; subnormal spacing below the normal range).
[[nodiscard]] double ulp_of(DType dtype, double x);

/// x rounded to the nearest value of `dtype` (ties to even; overflow to ±inf), as a double.
[[nodiscard]] double round_to(DType dtype, double x);

}  // namespace attn::verify
