// Fixed-decimal output: exactly k digits after the point, one rounding from the double.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace attn {

/// Largest number of decimals any problem may ask for.
inline constexpr int kMaxDecimals = 30;

/// x with exactly `decimals` digits after the point, correctly rounded (ties to even) from the
/// exact binary value of x — never via an intermediate rounding, so 1.23496 gives "1.23" at 2.
/// "-0.00" is written "0.00"; never exponent notation. Throws ContractError for NaN/Inf or decimals outside [0,
/// kMaxDecimals].
[[nodiscard]] std::string format_fixed(double x, int decimals);

/// Appends format_fixed(x, decimals) to out.
void append_fixed(std::string& out, double x, int decimals);

/// Rows of `cols` values, single spaces, '\n' after every row.
[[nodiscard]] std::string format_rows(std::span<const double> values, std::size_t cols, int decimals);

}  // namespace attn
