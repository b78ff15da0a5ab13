// The .npy reader (verify/tensor/npy.hpp) on arbitrary bytes. Properties: parse_npy never crashes
// and never allocates beyond the input; an error is one nonempty line; an array it accepts has
// exactly shape·itemsize bytes of data, and a float or bool one reads as size() values that survive
// a round trip through a canonical file (a version 1.0 header, C order, little-endian): the same
// dtype and shape, the same values bit for bit, and the same view of a rank-4 reshape.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "tensor/npy.hpp"

namespace {

using attn::verify::NpyArray;

// A canonical .npy file holding `values` (C order) as `array`'s dtype and shape.
std::string canonical_file(const NpyArray& array, const std::vector<double>& values) {
  const char* descr = array.type == NpyArray::Type::f64   ? "<f8"
                      : array.type == NpyArray::Type::f32 ? "<f4"
                      : array.type == NpyArray::Type::f16 ? "<f2"
                                                          : "|b1";
  std::string shape = "(";
  for (const std::size_t d : array.shape) shape += std::to_string(d) + ",";
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = "\x93NUMPY";
  file += '\x01';
  file += '\x00';
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  file += header;
  // The data: each value back in its dtype. A float16 is re-encoded from the original bits.
  std::vector<char> element(array.itemsize);
  for (std::size_t k = 0; k < values.size(); ++k) {
    const double x = values[k];
    if (array.type == NpyArray::Type::f64) {
      std::memcpy(element.data(), &x, 8);
    } else if (array.type == NpyArray::Type::f32) {
      const auto f = static_cast<float>(x);
      std::memcpy(element.data(), &f, 4);
    } else if (array.type == NpyArray::Type::f16) {
      return {};  // no exact encoder here: float16 is checked by values against the reader's own decode
    } else {
      element[0] = x != 0 ? 1 : 0;
    }
    file.append(element.data(), element.size());
  }
  return file;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using attn::fuzz::require;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = attn::verify::parse_npy(bytes);
  if (!parsed) {
    const std::string& message = parsed.error().message;
    require(!message.empty() && std::none_of(message.begin(), message.end(), [](char c) { return c >= 0 && c < ' '; }),
            "an error is one nonempty line of printable text", message);
    return 0;
  }
  const NpyArray& array = parsed.value();
  require(array.storage.size() == size && array.offset <= size, "the array holds the file");
  require(array.storage.size() - array.offset == array.size() * array.itemsize, "the data is shape·itemsize bytes");
  require(array.shape.size() <= 64, "at most 64 dimensions");
  if (array.type == NpyArray::Type::other) return 0;
  const std::vector<double> values = array.values();
  require(values.size() == array.size(), "values() has one value per element");
  const std::string file = canonical_file(array, values);
  if (!file.empty()) {
    auto again = attn::verify::parse_npy(file);
    require(again.ok(), "a canonical file parses", again ? "" : again.error().message);
    require(again->type == array.type && again->shape == array.shape && !again->fortran_order,
            "the round trip keeps dtype and shape");
    const std::vector<double> back = again->values();
    for (std::size_t k = 0; k < values.size(); ++k)
      require(same_bits(values[k], back[k]), "the round trip keeps every value");
  }
  // A rank-4 view of a float array of rank <= 4 reads the values in C order.
  if (array.type != NpyArray::Type::boolean && array.shape.size() >= 1 && array.shape.size() <= 4 &&
      array.size() > 0 && array.size() <= 4096) {
    std::vector<std::size_t> shape4(4 - array.shape.size(), 1);
    shape4.insert(shape4.end(), array.shape.begin(), array.shape.end());
    std::vector<int> axes;
    for (int d = 0; d < 4; ++d) axes.push_back(d - static_cast<int>(4 - array.shape.size()));
    for (int& a : axes) a = a < 0 ? -1 : a;
    const std::vector<double> viewed = array.view(shape4, axes).values();
    for (std::size_t k = 0; k < values.size(); ++k)
      require(same_bits(values[k], viewed[k]), "the rank-4 view reads the values in C order");
  }
  return 0;
}
