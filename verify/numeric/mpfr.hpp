// Owned MPFR variables: init with an explicit precision, clear on destruction. The raw
// C API stays the interface (directed rounding modes, exact operations); these classes only make
// sure every init has its clear, on every path out of a function.
#pragma once

#include <mpfi.h>
#include <mpfr.h>

#include "numeric/interval.hpp"

namespace attn::verify {

/// An MPFR floating-point variable with a fixed precision, cleared on destruction. Move-only.
class MpfrFloat {
 public:
  /// A variable of `bits` bits of precision, value NaN (MPFR's initial value).
  explicit MpfrFloat(mpfr_prec_t bits);
  ~MpfrFloat();
  /// Takes over `other`'s variable; `other` is left owning nothing.
  MpfrFloat(MpfrFloat&& other) noexcept;
  /// Exchanges variables with `other`, which clears the old one when it goes.
  MpfrFloat& operator=(MpfrFloat&& other) noexcept;
  MpfrFloat(const MpfrFloat&) = delete;
  MpfrFloat& operator=(const MpfrFloat&) = delete;

  /// The raw variable, for MPFR calls.
  [[nodiscard]] mpfr_ptr get() { return value_; }
  /// The raw variable, for MPFR calls that only read it.
  [[nodiscard]] mpfr_srcptr get() const { return value_; }

 private:
  mpfr_t value_;
  bool owned_ = true;  ///< false once moved from: the destructor then has nothing to clear
};

/// An MPFI interval with a fixed precision, cleared on destruction. Move-only, as MpfrFloat.
class MpfiInterval {
 public:
  /// An interval of `bits` bits of precision at each end, value NaN (MPFI's initial value).
  explicit MpfiInterval(mpfr_prec_t bits);
  ~MpfiInterval();
  MpfiInterval(MpfiInterval&& other) noexcept;
  MpfiInterval& operator=(MpfiInterval&& other) noexcept;
  MpfiInterval(const MpfiInterval&) = delete;
  MpfiInterval& operator=(const MpfiInterval&) = delete;

  /// The raw variable, for MPFI calls.
  [[nodiscard]] mpfi_ptr get() { return value_; }
  /// The raw variable, for MPFI calls that only read it.
  [[nodiscard]] mpfi_srcptr get() const { return value_; }
  /// The enclosure rounded outwards to doubles.
  [[nodiscard]] Interval doubles() const;

 private:
  mpfi_t value_;
  bool owned_ = true;
};

/// Frees the calling thread's MPFR caches (constants such as log 2, kept in thread-local storage)
/// when it goes out of scope. A worker thread that ran the oracle declares one first thing: its
/// exit would otherwise leak them (LeakSanitizer reports it).
class MpfrThreadCaches {
 public:
  MpfrThreadCaches() = default;
  ~MpfrThreadCaches() { mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); }
  MpfrThreadCaches(const MpfrThreadCaches&) = delete;
  MpfrThreadCaches& operator=(const MpfrThreadCaches&) = delete;
};

}  // namespace attn::verify
