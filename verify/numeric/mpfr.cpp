#include "numeric/mpfr.hpp"

#include <utility>

// Moving relocates the C struct itself, as mpfr_swap does (and as GMP's own C++ classes move):
// the limbs stay where they are, and only the owner that still holds `owned_` clears them.

namespace attn::verify {

MpfrFloat::MpfrFloat(mpfr_prec_t bits) { mpfr_init2(value_, bits); }

MpfrFloat::~MpfrFloat() {
  if (owned_) mpfr_clear(value_);
}

MpfrFloat::MpfrFloat(MpfrFloat&& other) noexcept
    : value_{other.value_[0]}, owned_(std::exchange(other.owned_, false)) {}

MpfrFloat& MpfrFloat::operator=(MpfrFloat&& other) noexcept {
  std::swap(value_[0], other.value_[0]);
  std::swap(owned_, other.owned_);
  return *this;
}

MpfiInterval::MpfiInterval(mpfr_prec_t bits) { mpfi_init2(value_, bits); }

MpfiInterval::~MpfiInterval() {
  if (owned_) mpfi_clear(value_);
}

MpfiInterval::MpfiInterval(MpfiInterval&& other) noexcept
    : value_{other.value_[0]}, owned_(std::exchange(other.owned_, false)) {}

MpfiInterval& MpfiInterval::operator=(MpfiInterval&& other) noexcept {
  std::swap(value_[0], other.value_[0]);
  std::swap(owned_, other.owned_);
  return *this;
}

Interval MpfiInterval::doubles() const {
  return {mpfr_get_d(&value_[0].left, MPFR_RNDD), mpfr_get_d(&value_[0].right, MPFR_RNDU)};
}

}  // namespace attn::verify
