// The .npy format numpy.save writes (format versions 1.0, 2.0 and 3.0): a magic string, a header
// that is a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}, then the
// data. Read strictly: every number in the header is checked before anything is sized by it, and
// the data must be exactly as long as the shape says. Any dtype is parsed (so a caller can name the
// one it refuses); float64/32/16 and bool can be read as values, in either byte order.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "result.hpp"
#include "tensor/tensor_views.hpp"

namespace attn::verify {

struct NpyArray {
  enum class Type { f64, f32, f16, boolean, other };
  Type type = Type::other;
  std::string dtype;                  ///< numpy's name for it: "float32", "bool", "int64", "<U10", ...
  std::size_t itemsize = 0;
  std::vector<std::size_t> shape;     ///< () for a scalar
  bool fortran_order = false;
  std::string storage;                ///< the whole file; the data (little-endian) from `offset`
  std::size_t offset = 0;

  [[nodiscard]] std::size_t size() const;  ///< elements (the product of shape)
  [[nodiscard]] const char* data() const { return storage.data() + offset; }
  /// Byte strides of each axis (C or Fortran order).
  [[nodiscard]] std::vector<std::ptrdiff_t> strides() const;
  /// Every value in C (row-major) order as a double: the exact value of a float, 0 or 1 of a bool.
  /// Only for the float and bool types (ContractError otherwise).
  [[nodiscard]] std::vector<double> values() const;
  /// A rank-4 view of a float array whose shape is `shape4` (its own shape with axes of size 1
  /// inserted where `axes` says: axes[d] is the own axis behind dimension d, or -1 for an inserted 1).
  [[nodiscard]] StridedView view(const std::vector<std::size_t>& shape4, const std::vector<int>& axes) const;
};

/// Parses a whole .npy file's bytes; the error says what is wrong and where (no path: the caller
/// names the file). The array owns `bytes` afterwards.
[[nodiscard]] Result<NpyArray, Error> parse_npy(std::string bytes);

/// Reads and parses the .npy file at `path`; the error starts with the path.
[[nodiscard]] Result<NpyArray, Error> read_npy(const std::string& path);

}  // namespace attn::verify
