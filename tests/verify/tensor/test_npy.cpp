// The .npy reader: the files numpy.save writes (bytes built here as numpy builds them), and every
// way a file can be wrong, each with a message that says where and what.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tensor/npy.hpp"

namespace {

using attn::verify::NpyArray;
using attn::verify::parse_npy;

// A version 1.0 file with `header` (padded as numpy pads it) and `data`.
std::string npy(std::string header, const std::string& data, char major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = "\x93NUMPY";
  file += major;
  file += '\0';
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>((header.size() >> 8) & 0xff);
  if (major != 1) file += std::string(2, '\0');
  return file + header + data;
}

template <typename T> std::string bytes_of(const std::vector<T>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)};
}

std::string error_of(const std::string& file) {
  auto parsed = parse_npy(file);
  EXPECT_FALSE(parsed.ok());
  return parsed ? "" : parsed.error().message;
}

TEST(Npy, ReadsCOrderFloat32) {
  const auto parsed = parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                    bytes_of(std::vector<float>{1, 2, 3, 4, 5, 6.5f})));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->type, NpyArray::Type::f32);
  EXPECT_EQ(parsed->dtype, "float32");
  EXPECT_EQ(parsed->shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(parsed->values(), (std::vector<double>{1, 2, 3, 4, 5, 6.5}));
}

TEST(Npy, ReadsFortranOrderAndBigEndianInCOrder) {
  // [[0, 1, 2], [3, 4, 5]] stored column by column, then as big-endian float64.
  const auto fortran = parse_npy(npy("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
                                     bytes_of(std::vector<double>{0, 3, 1, 4, 2, 5})));
  ASSERT_TRUE(fortran.ok());
  EXPECT_EQ(fortran->values(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  std::string big = bytes_of(std::vector<double>{0, 1, 2});
  for (std::size_t k = 0; k < big.size(); k += 8) std::reverse(big.begin() + static_cast<long>(k), big.begin() + static_cast<long>(k) + 8);
  const auto swapped = parse_npy(npy("{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }", big));
  ASSERT_TRUE(swapped.ok());
  EXPECT_EQ(swapped->values(), (std::vector<double>{0, 1, 2}));
}

TEST(Npy, ReadsFloat16BoolScalarsEmptyAndVersions2And3) {
  const auto half = parse_npy(npy("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }",
                                  bytes_of(std::vector<std::uint16_t>{0x3c00, 0x8000, 0x7c00, 0x0001})));
  ASSERT_TRUE(half.ok());
  const std::vector<double> h = half->values();
  EXPECT_EQ(h[0], 1.0);
  EXPECT_TRUE(h[1] == 0 && std::signbit(h[1]));
  EXPECT_EQ(h[2], HUGE_VAL);
  EXPECT_EQ(h[3], std::ldexp(1.0, -24));
  const auto mask = parse_npy(npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\1\0\1", 3)));
  ASSERT_TRUE(mask.ok());
  EXPECT_EQ(mask->values(), (std::vector<double>{1, 0, 1}));
  const auto scalar = parse_npy(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", bytes_of(std::vector<double>{7})));
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->values(), std::vector<double>{7});
  const auto empty = parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", ""));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->size(), 0u);
  for (char major : {'\2', '\3'}) {
    const auto v = parse_npy(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", bytes_of(std::vector<double>{2}), major));
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_EQ(v->values(), std::vector<double>{2});
  }
}

TEST(Npy, NamesDtypesItDoesNotReadAsValues) {
  const auto ints = parse_npy(npy("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0')));
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ(ints->type, NpyArray::Type::other);
  EXPECT_EQ(ints->dtype, "int64");
  EXPECT_THROW((void)ints->values(), attn::ContractError);
  const auto text = parse_npy(npy("{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')));
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->itemsize, 8u);
}

TEST(Npy, RefusesBrokenFilesSayingWhy) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string data = bytes_of(std::vector<float>(6, 1.0f));
  EXPECT_NE(error_of("0 1 2\n").find("not a .npy file"), std::string::npos);
  EXPECT_NE(error_of("\x93NUMPY\x01").find("cut short"), std::string::npos);
  EXPECT_NE(error_of(npy(header, data.substr(0, 20))).find("needs 24 bytes of data, the file holds 20 (cut short)"),
            std::string::npos);
  EXPECT_NE(error_of(npy(header, data + "x")).find("the file holds 25"), std::string::npos);
  std::string version = npy(header, data);
  version[6] = 9;
  EXPECT_NE(error_of(version).find("format version 9.0"), std::string::npos);
  std::string claims = npy(header, data);
  claims[8] = '\xff', claims[9] = '\xff';
  EXPECT_NE(error_of(claims).find("the header claims 65535 bytes"), std::string::npos);
  EXPECT_NE(error_of(npy("{'descr': '<f4', 'fortran_order': False}", data)).find("missing one of"), std::string::npos);
  EXPECT_NE(error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", data)).find("'extra'"),
            std::string::npos);
  EXPECT_NE(error_of(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", data)).find("structured"),
            std::string::npos);
  EXPECT_NE(error_of(npy("{'descr': '<q7', 'fortran_order': False, 'shape': (2,)}", data)).find("dtype '<q7'"),
            std::string::npos);
  EXPECT_NE(error_of(npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", data)).find("True or False"),
            std::string::npos);
  // A shape whose product overflows is refused before anything is sized by it.
  EXPECT_NE(error_of(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387903, 4611686018427387903), }", ""))
                .find("too large"),
            std::string::npos);
  EXPECT_NE(error_of(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", "")).find("dimension"),
            std::string::npos);
}

TEST(Npy, ViewsInsertAxesOfOneWithStrideZero) {
  const auto parsed = parse_npy(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                                    bytes_of(std::vector<float>{0, 3, 1, 4, 2, 5})));
  ASSERT_TRUE(parsed.ok());
  const attn::verify::StridedView view = parsed->view({1, 1, 2, 3}, {-1, -1, 0, 1});
  EXPECT_EQ(view.values(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_THROW((void)parsed->view({1, 2, 2, 3}, {-1, -1, 0, 1}), attn::ContractError);
}

}  // namespace
