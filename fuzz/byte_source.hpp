// A small FuzzedDataProvider: turns fuzz bytes into bounded choices. Written here rather than
// taken from clang's <fuzzer/FuzzedDataProvider.h> so the targets also build with GCC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace attn::fuzz {

/// Consumes bytes from the front; once they run out every choice is its lowest value, so any
/// input (the empty one too) gives a valid choice sequence.
class ByteSource {
 public:
  ByteSource(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  /// A value in [low, high], from as few bytes as the range needs.
  std::size_t in_range(std::size_t low, std::size_t high) {
    const std::size_t range = high - low;
    std::size_t value = 0;
    for (std::size_t span = range; span > 0 && position_ < size_; span >>= 8) value = value << 8 | data_[position_++];
    return low + (range == 0 ? 0 : value % (range + 1));
  }
  bool flag() { return in_range(0, 1) == 1; }

  /// A decimal with up to `integer_digits` digits before the point and `fraction_digits` after,
  /// optionally negative (so "-0" and "007.50" occur): exact text, as a judge file holds it.
  std::string decimal(std::size_t integer_digits, std::size_t fraction_digits) {
    std::string text = flag() ? "-" : "";
    const std::size_t before = in_range(1, integer_digits);
    const std::size_t after = in_range(0, fraction_digits);
    for (std::size_t i = 0; i < before; ++i) text += static_cast<char>('0' + in_range(0, 9));
    if (after > 0) text += '.';
    for (std::size_t i = 0; i < after; ++i) text += static_cast<char>('0' + in_range(0, 9));
    return text;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t position_ = 0;
};

}  // namespace attn::fuzz
