#include "numeric/formats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attn::verify {
namespace {

// Significand bits (implicit one included) and exponent range of each format (IEEE 754-2008
// Table 3.5 for binary64/32/16; bfloat16 is binary32 with its significand cut to 8 bits).
struct Format {
  int precision;
  int emin;
  int emax;
};

constexpr Format format_of(DType dtype) {
  switch (dtype) {
    case DType::fp64:
      return {53, -1022, 1023};
    case DType::fp32:
      return {24, -126, 127};
    case DType::fp16:
      return {11, -14, 15};
    case DType::bf16:
      return {8, -126, 127};
  }
  return {53, -1022, 1023};
}

// |x| rounded to the format, ties to even, by scaling to an integer count of quanta. Every step is
// exact: frexp/ldexp only move the exponent, and n - floor(n) is exact for n < 2^53.
double round_magnitude(const Format& format, double magnitude) {
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude in [2^(exponent-1), 2^exponent)
  // Below the smallest normal the quantum stays that of the subnormals (gradual underflow).
  const int quantum_exponent = std::max(exponent - 1, format.emin) - (format.precision - 1);
  const double n = std::ldexp(magnitude, -quantum_exponent);
  double whole = std::floor(n);
  const double fraction = n - whole;
  if (fraction > 0.5 || (fraction == 0.5 && std::fmod(whole, 2) != 0)) whole += 1;
  const double rounded = std::ldexp(whole, quantum_exponent);
  // Largest finite value: (2 - 2^(1-p))·2^emax; anything that rounds above it overflows.
  const double largest = std::ldexp(2 - std::ldexp(1.0, 1 - format.precision), format.emax);
  return rounded > largest ? std::numeric_limits<double>::infinity() : rounded;
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::fp64:
      return "fp64";
    case DType::fp32:
      return "fp32";
    case DType::fp16:
      return "fp16";
    case DType::bf16:
      return "bf16";
  }
  return "fp64";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : {DType::fp64, DType::fp32, DType::fp16, DType::bf16}) {
    if (dtype_name(d) == name) return d;
  }
  return std::nullopt;
}

double unit_roundoff(DType dtype) { return std::ldexp(1.0, -format_of(dtype).precision); }

double smallest_normal(DType dtype) { return std::ldexp(1.0, format_of(dtype).emin); }

double half_smallest_subnormal(DType dtype) {
  const Format format = format_of(dtype);
  return std::max(std::ldexp(1.0, format.emin - format.precision), 0x1p-1074);
}

double ulp_of(DType dtype, double x) {
  const Format format = format_of(dtype);
  int exponent = format.emin + 1;
  if (std::isfinite(x) && x != 0) std::frexp(x, &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  return std::ldexp(1.0, std::clamp(exponent - 1, format.emin, format.emax) - (format.precision - 1));
}

double round_to(DType dtype, double x) {
  if (dtype == DType::fp64 || !std::isfinite(x) || x == 0) return x;
  // fp32 up to its largest finite value: the hardware conversion (IEEE 754 round to nearest even,
  // gradual underflow), a tenth of the cost of the general path (validate calls this per input
  // value). Beyond that value the conversion is undefined behaviour in C++: the general path.
  if (dtype == DType::fp32 && std::fabs(x) <= std::numeric_limits<float>::max()) {
    return static_cast<double>(static_cast<float>(x));
  }
  const double magnitude = round_magnitude(format_of(dtype), std::fabs(x));
  return std::signbit(x) ? -magnitude : magnitude;
}

}  // namespace attn::verify
