// Exact handling of decimal tokens: grammar check, canonical form, exact magnitude comparison.
// The canonical text is what the oracle reads, so nothing here ever goes through a double.
#pragma once

#include <string>
#include <string_view>

namespace attn {

/// Why a token is not an acceptable decimal number.
enum class DecimalStatus {
  ok,
  not_a_number,  ///< fails the grammar [+-]? (D+ (.D*)? | .D+) ([eE][+-]?D+)?
  too_large,     ///< magnitude >= 10^308: no double holds it
  too_small,     ///< nonzero magnitude < 10^-300: a double would underflow (see kMinNonzeroExponent)
};

/// A decimal token in canonical form: -?(0|[1-9]D*)(.D*[1-9])?, no exponent, no "-0".
struct Decimal {
  DecimalStatus status = DecimalStatus::not_a_number;
  bool negative = false;  ///< sign as written (kept for "-0", which is canonically "0")
  std::string canonical;  ///< exact value as plain decimal text; "0" for any zero
};

/// Nonzero inputs below 10^-300 are refused: the error bounds of the ambiguity band assume no
/// underflow in the conversion of an input (Higham, Accuracy and Stability, §2.2).
inline constexpr long kMinNonzeroExponent = -300;

/// Parses a whole token as a decimal real, exactly. Linear in the token length.
[[nodiscard]] Decimal parse_decimal(std::string_view token);

/// True when token is already written canonically (what the strict validator demands),
/// except that trailing zeros after the point ("1.50") are allowed.
[[nodiscard]] bool is_strict_decimal(std::string_view token);

/// Compares |a| and |b| for canonical texts a, b (a leading '-' is ignored): -1, 0 or 1.
[[nodiscard]] int compare_magnitude(std::string_view a, std::string_view b);

}  // namespace attn
