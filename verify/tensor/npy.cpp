#include "tensor/npy.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>

namespace attn::verify {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::size_t kMaxRank = 64;  // numpy's own limit

static_assert(std::endian::native == std::endian::little, "the views read little-endian values");

// A cursor over the header's dict literal. Every failure is a message naming what was expected.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  void skip_spaces() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n' || text_[at_] == '\t' || text_[at_] == '\r'))
      ++at_;
  }
  bool take(char c) {
    skip_spaces();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  [[nodiscard]] bool at_end() {
    skip_spaces();
    return at_ == text_.size();
  }
  [[nodiscard]] std::size_t position() const { return at_; }
  // A quoted string without escapes (numpy's keys and dtype strings have none).
  std::optional<std::string> string() {
    skip_spaces();
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) return std::nullopt;
    const char quote = text_[at_++];
    const std::size_t end = text_.find(quote, at_);
    if (end == std::string_view::npos) return std::nullopt;
    std::string value(text_.substr(at_, end - at_));
    if (value.find('\\') != std::string::npos) return std::nullopt;
    at_ = end + 1;
    return value;
  }
  std::optional<bool> boolean() {
    skip_spaces();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}}) {
      if (text_.substr(at_, word.size()) == word) {
        at_ += word.size();
        return value;
      }
    }
    return std::nullopt;
  }
  // A non-negative decimal integer below 2^62.
  std::optional<std::size_t> integer() {
    skip_spaces();
    std::size_t value = 0, digits = 0;
    while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
      if (value > (std::size_t{1} << 62) / 10) return std::nullopt;
      value = value * 10 + static_cast<std::size_t>(text_[at_++] - '0');
      ++digits;
    }
    if (digits == 0 || value >= std::size_t{1} << 62) return std::nullopt;
    if (at_ < text_.size() && text_[at_] == 'L') ++at_;  // Python 2's long suffix
    return value;
  }

 private:
  std::string_view text_;
  std::size_t at_ = 0;
};

Error error(std::string message) { return Error{std::move(message)}; }

// Header text quoted in a message: printable ASCII, anything else as \xNN, at most 40 characters.
std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 40)) {
    if (c >= ' ' && c <= '~') {
      out += c;
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += escaped;
    }
  }
  return text.size() > 40 ? out + "..." : out;
}

// numpy's descr ("<f4", "|b1", ">i8", "<U10") -> type, name and itemsize; nullopt when unreadable.
struct Dtype {
  NpyArray::Type type = NpyArray::Type::other;
  std::string name;
  std::size_t itemsize = 0;
  bool big_endian = false;
};

std::optional<Dtype> dtype_of(const std::string& descr) {
  std::size_t at = 0;
  Dtype d;
  if (at < descr.size() && (descr[at] == '<' || descr[at] == '>' || descr[at] == '|' || descr[at] == '=')) {
    d.big_endian = descr[at] == '>';
    ++at;
  }
  if (at >= descr.size()) return std::nullopt;
  const char code = descr[at++];
  std::size_t count = 0, digits = 0;
  for (; at < descr.size() && descr[at] >= '0' && descr[at] <= '9' && digits < 9; ++at, ++digits)
    count = count * 10 + static_cast<std::size_t>(descr[at] - '0');
  if (at != descr.size() || digits == 0 || count == 0) return std::nullopt;
  d.itemsize = code == 'U' ? 4 * count : count;
  if (d.itemsize == 1) d.big_endian = false;
  const std::string bits = std::to_string(8 * count);
  switch (code) {
    case 'f':
      d.name = "float" + bits;
      d.type = count == 8 ? NpyArray::Type::f64 : count == 4 ? NpyArray::Type::f32 : count == 2 ? NpyArray::Type::f16
                                                                                                : NpyArray::Type::other;
      break;
    case 'b':
      d.name = count == 1 ? "bool" : printable(descr);
      if (count == 1) d.type = NpyArray::Type::boolean;
      break;
    case 'i': d.name = "int" + bits; break;
    case 'u': d.name = "uint" + bits; break;
    case 'c': d.name = "complex" + bits; break;
    case 'V': case 'S': case 'U': case 'M': case 'm': d.name = printable(descr); break;
    default: return std::nullopt;
  }
  return d;
}

}  // namespace

std::size_t NpyArray::size() const {
  std::size_t n = 1;
  for (const std::size_t d : shape) n *= d;  // parse_npy checked the product
  return n;
}

std::vector<std::ptrdiff_t> NpyArray::strides() const {
  std::vector<std::ptrdiff_t> strides(shape.size());
  auto step = static_cast<std::ptrdiff_t>(itemsize);
  for (std::size_t k = 0; k < shape.size(); ++k) {
    const std::size_t d = fortran_order ? k : shape.size() - 1 - k;
    strides[d] = step;
    step *= static_cast<std::ptrdiff_t>(std::max<std::size_t>(shape[d], 1));
  }
  return strides;
}

std::vector<double> NpyArray::values() const {
  if (type == Type::other) throw ContractError("NpyArray::values: " + dtype + " is not a float or bool type");
  const std::size_t n = size();
  std::vector<double> values(n);
  if (n == 0) return values;
  const std::vector<std::ptrdiff_t> step = strides();
  std::vector<std::size_t> index(shape.size(), 0);
  std::ptrdiff_t at = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const char* p = data() + at;
    switch (type) {
      case Type::f64: std::memcpy(&values[k], p, 8); break;
      case Type::f32: {
        float x;
        std::memcpy(&x, p, 4);
        values[k] = x;
        break;
      }
      case Type::f16: {
        std::uint16_t bits;
        std::memcpy(&bits, p, 2);
        values[k] = half_value(bits);
        break;
      }
      case Type::boolean: values[k] = *p != 0 ? 1.0 : 0.0; break;
      case Type::other: break;
    }
    for (std::size_t d = shape.size(); d-- > 0;) {  // the next index in C order
      at += step[d];
      if (++index[d] < shape[d]) break;
      at -= step[d] * static_cast<std::ptrdiff_t>(shape[d]);
      index[d] = 0;
    }
  }
  return values;
}

StridedView NpyArray::view(const std::vector<std::size_t>& shape4, const std::vector<int>& axes) const {
  if (shape4.size() != 4 || axes.size() != 4) throw ContractError("NpyArray::view: expected four dimensions");
  StridedView v;
  switch (type) {
    case Type::f64: v.kind = StridedView::Kind::f64; break;
    case Type::f32: v.kind = StridedView::Kind::f32; break;
    case Type::f16: v.kind = StridedView::Kind::f16; break;
    default: throw ContractError("NpyArray::view: " + dtype + " is not a float type");
  }
  v.data = data();
  v.shape = shape4;
  const std::vector<std::ptrdiff_t> own = strides();
  for (std::size_t d = 0; d < 4; ++d) {
    const int axis = axes[d];
    if (axis >= 0 && (static_cast<std::size_t>(axis) >= shape.size() || shape[static_cast<std::size_t>(axis)] != shape4[d]))
      throw ContractError("NpyArray::view: axes do not match the shape");
    if (axis < 0 && shape4[d] != 1) throw ContractError("NpyArray::view: an inserted axis must be 1");
    v.strides[d] = axis < 0 ? 0 : own[static_cast<std::size_t>(axis)];
  }
  return v;
}

Result<NpyArray, Error> parse_npy(std::string bytes) {
  if (bytes.size() < kMagic.size() || std::string_view(bytes).substr(0, kMagic.size()) != kMagic) {
    return error("not a .npy file (expected the format numpy.save writes, which starts with \\x93NUMPY; save each "
                 "array of an .npz archive on its own)");
  }
  if (bytes.size() < 10) return error("the .npy header is cut short (" + std::to_string(bytes.size()) + " bytes)");
  const auto byte = [&](std::size_t k) { return static_cast<std::size_t>(static_cast<unsigned char>(bytes[k])); };
  const std::size_t major = byte(6), minor = byte(7);
  if (major < 1 || major > 3 || minor != 0) {
    return error("format version " + std::to_string(major) + "." + std::to_string(minor) +
                 " is not one numpy writes (1.0, 2.0 or 3.0)");
  }
  std::size_t header_length = 0, header_start = 0;
  if (major == 1) {
    header_length = byte(8) | byte(9) << 8;
    header_start = 10;
  } else {
    if (bytes.size() < 12) return error("the .npy header is cut short (" + std::to_string(bytes.size()) + " bytes)");
    header_length = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    header_start = 12;
  }
  if (header_length > bytes.size() - header_start) {
    return error("the header claims " + std::to_string(header_length) + " bytes, the file holds " +
                 std::to_string(bytes.size() - header_start) + " after the magic");
  }
  const std::string_view header = std::string_view(bytes).substr(header_start, header_length);
  HeaderParser parse(header);
  const auto bad = [&](const std::string& expected) {
    return error("header, byte " + std::to_string(header_start + parse.position()) + ": expected " + expected +
                 " (numpy's header is a dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)})");
  };
  if (!parse.take('{')) return bad("'{'");
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<std::size_t>> shape;
  while (!parse.take('}')) {
    const auto key = parse.string();
    if (!key) return bad("a quoted key or '}'");
    if (!parse.take(':')) return bad("':' after '" + printable(*key) + "'");
    if (*key == "descr" && !descr) {
      descr = parse.string();
      if (!descr) return bad("the dtype as a quoted string (structured dtypes are not read)");
    } else if (*key == "fortran_order" && !fortran) {
      fortran = parse.boolean();
      if (!fortran) return bad("True or False");
    } else if (*key == "shape" && !shape) {
      if (!parse.take('(')) return bad("the shape as a tuple '('");
      shape.emplace();
      while (!parse.take(')')) {
        if (shape->size() == kMaxRank) return bad("at most " + std::to_string(kMaxRank) + " dimensions");
        const auto n = parse.integer();
        if (!n) return bad("a dimension (a non-negative integer below 2^62) or ')'");
        shape->push_back(*n);
        if (!parse.take(',')) {
          if (!parse.take(')')) return bad("',' or ')'");
          break;
        }
      }
    } else {
      return bad("the keys descr, fortran_order and shape once each, not '" + printable(*key) + "'");
    }
    if (!parse.take(',')) {
      if (!parse.take('}')) return bad("',' or '}'");
      break;
    }
  }
  if (!parse.at_end()) return bad("nothing but spaces after '}'");
  if (!descr || !fortran || !shape) return error("header: missing one of descr, fortran_order, shape");
  const auto dtype = dtype_of(*descr);
  if (!dtype) return error("header: dtype '" + printable(*descr) + "' is not one numpy writes");
  NpyArray array;
  array.type = dtype->type;
  array.dtype = dtype->name;
  array.itemsize = dtype->itemsize;
  array.shape = *shape;
  array.fortran_order = *fortran;
  std::size_t bytes_needed = dtype->itemsize, elements = 1;
  for (const std::size_t d : array.shape) {
    if (__builtin_mul_overflow(elements, d, &elements) || __builtin_mul_overflow(dtype->itemsize, elements, &bytes_needed))
      return error("header: shape " + shape_text(array.shape) + " is too large to be a file");
  }
  const std::size_t data_start = header_start + header_length, held = bytes.size() - data_start;
  if (held != bytes_needed) {
    return error("shape " + shape_text(array.shape) + " of " + array.dtype + " needs " + std::to_string(bytes_needed) +
                 " bytes of data, the file holds " + std::to_string(held) + (held < bytes_needed ? " (cut short)" : ""));
  }
  array.storage = std::move(bytes);
  array.offset = data_start;
  if (dtype->big_endian && array.type != NpyArray::Type::other) {  // to the host's order, in place
    char* p = array.storage.data() + data_start;
    for (std::size_t k = 0; k < elements; ++k, p += dtype->itemsize) std::reverse(p, p + dtype->itemsize);
  }
  return array;
}

Result<NpyArray, Error> read_npy(const std::string& path) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return error(path + ": " + std::strerror(errno));
  std::string bytes;
  if (std::fseek(file.get(), 0, SEEK_END) == 0) {  // a regular file: its size, so the string grows once
    const long size = std::ftell(file.get());
    if (size > 0) bytes.reserve(static_cast<std::size_t>(size));
    std::rewind(file.get());
  }
  char buffer[1 << 16];
  for (;;) {
    const std::size_t got = std::fread(buffer, 1, sizeof buffer, file.get());
    bytes.append(buffer, got);
    if (got < sizeof buffer) break;
  }
  if (std::ferror(file.get())) return error(path + ": read error: " + std::strerror(errno));
  auto array = parse_npy(std::move(bytes));
  if (!array) return error(path + ": " + array.error().message);
  return array;
}

}  // namespace attn::verify
