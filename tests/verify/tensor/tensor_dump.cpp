// tensor_dump: reads one TensorProblem from stdin and prints the exact oracle's enclosure of every
// output (or of the rows listed), for an independent cross-check (tensor_mpmath.py).
//
// Input: whitespace-separated tokens.
//   B Hq Hkv L S E Ev DTYPE LAYOUT CAUSAL SCALE MASK_KIND
//     DTYPE     fp64 | fp32 | fp16 | bf16
//     LAYOUT    bhse ([B, H, L, E], PyTorch's SDPA) | bshe ([B, L, H, E])
//     CAUSAL    none | top_left | bottom_right
//     SCALE     default (1/√E) | a float (hexadecimal %a recommended: exact)
//     MASK_KIND none | boolean | additive
//   query V...             B·Hq·L·E values in LAYOUT order
//   key V...               B·Hkv·S·E values
//   value V...             B·Hkv·S·Ev values
//   mask R D1..DR V...     only when MASK_KIND is not none: rank, shape, row-major values
//                          (boolean 0/1; additive values, -inf allowed)
//   key_lengths N1..NB     optional
//   rows R1..Rn ;          optional: the rows r = (b·Hq + h)·L + i to print (default: all)
// Values are read with strtod, so hexadecimal floats (0x1.8p+3), decimals, inf and -inf all parse.
//
// Output: one line per row, then one line per output element of it:
//   row R B H I empty|keys=N bits=P capped=0|1
//   out R C MID RADIUS
// MID is head + tail of the fine enclosure, summed exactly and printed as %.25e; RADIUS (%.6e) is
// the enclosure's radius: exact ∈ [MID' - RADIUS, MID' + RADIUS] where MID' is the unprinted
// midpoint (|MID - MID'| <= 5e-26·|MID'|). The target is 2·radius <= 1e-30·max|value|.
// Exit 0 on success, 2 on a malformed or invalid problem.
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"
#include "tensor/tensor_oracle.hpp"

namespace {

using attn::verify::TensorProblem;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "tensor_dump: %s\n", message.c_str());
  std::exit(2);
}

std::string next_token(std::istream& in, const char* what) {
  std::string token;
  if (!(in >> token)) fail(std::string("unexpected end of input, expected ") + what);
  return token;
}

double parse_double(const std::string& token) {
  char* end = nullptr;
  const double x = std::strtod(token.c_str(), &end);
  if (end == token.c_str() || *end != '\0') fail("not a number: " + token);
  return x;
}

std::size_t parse_size(const std::string& token) {
  char* end = nullptr;
  const unsigned long long x = std::strtoull(token.c_str(), &end, 10);
  if (token.empty() || token[0] == '-' || end == token.c_str() || *end != '\0') fail("not a size: " + token);
  return static_cast<std::size_t>(x);
}

void expect(std::istream& in, const std::string& keyword) {
  const std::string token = next_token(in, keyword.c_str());
  if (token != keyword) fail("expected '" + keyword + "', got '" + token + "'");
}

std::vector<double> read_values(std::istream& in, std::size_t count, const char* what) {
  std::vector<double> out(count);
  for (double& x : out) x = parse_double(next_token(in, what));
  return out;
}

}  // namespace

int main() {
  namespace v = attn::verify;
  std::istream& in = std::cin;
  TensorProblem p;
  p.batch = parse_size(next_token(in, "B"));
  p.q_heads = parse_size(next_token(in, "Hq"));
  p.kv_heads = parse_size(next_token(in, "Hkv"));
  p.L = parse_size(next_token(in, "L"));
  p.S = parse_size(next_token(in, "S"));
  p.E = parse_size(next_token(in, "E"));
  p.Ev = parse_size(next_token(in, "Ev"));
  const std::string dtype = next_token(in, "dtype");
  if (auto d = v::dtype_from_name(dtype)) {
    p.dtype = *d;
  } else {
    fail("unknown dtype " + dtype);
  }
  const std::string layout = next_token(in, "layout");
  if (layout == "bhse") {
    p.layout = v::AxisOrder::batch_head_seq;
  } else if (layout == "bshe") {
    p.layout = v::AxisOrder::batch_seq_head;
  } else {
    fail("unknown layout " + layout);
  }
  const std::string causal = next_token(in, "causal");
  if (causal == "none") {
    p.causal = v::Causal::none;
  } else if (causal == "top_left") {
    p.causal = v::Causal::top_left;
  } else if (causal == "bottom_right") {
    p.causal = v::Causal::bottom_right;
  } else {
    fail("unknown causal mode " + causal);
  }
  const std::string scale = next_token(in, "scale");
  if (scale != "default") p.scale = parse_double(scale);
  const std::string mask_kind = next_token(in, "mask kind");
  if (mask_kind == "none") {
    p.mask_kind = v::TensorMask::none;
  } else if (mask_kind == "boolean") {
    p.mask_kind = v::TensorMask::boolean;
  } else if (mask_kind == "additive") {
    p.mask_kind = v::TensorMask::additive;
  } else {
    fail("unknown mask kind " + mask_kind);
  }

  expect(in, "query");
  p.query = read_values(in, p.batch * p.q_heads * p.L * p.E, "query value");
  expect(in, "key");
  p.key = read_values(in, p.batch * p.kv_heads * p.S * p.E, "key value");
  expect(in, "value");
  p.value = read_values(in, p.batch * p.kv_heads * p.S * p.Ev, "value value");
  if (p.mask_kind != v::TensorMask::none) {
    expect(in, "mask");
    const std::size_t rank = parse_size(next_token(in, "mask rank"));
    std::size_t count = 1;
    for (std::size_t k = 0; k < rank; ++k) {
      p.mask_shape.push_back(parse_size(next_token(in, "mask dimension")));
      count *= p.mask_shape.back();
    }
    p.mask = read_values(in, count, "mask value");
  }

  std::vector<std::size_t> rows;
  std::string token;
  while (in >> token) {
    if (token == "key_lengths") {
      for (std::size_t b = 0; b < p.batch; ++b) p.key_lengths.push_back(parse_size(next_token(in, "key length")));
    } else if (token == "rows") {
      while (true) {
        const std::string r = next_token(in, "row or ';'");
        if (r == ";") break;
        rows.push_back(parse_size(r));
      }
    } else {
      fail("unexpected token '" + token + "'");
    }
  }
  if (auto ok = v::validate(p); !ok) fail("invalid problem: " + ok.error().message);

  const std::size_t row_count = p.batch * p.q_heads * p.L;
  if (rows.empty()) {
    for (std::size_t r = 0; r < row_count; ++r) rows.push_back(r);
  }
  double max_abs_value = 0;
  for (double x : p.value) max_abs_value = std::max(max_abs_value, std::fabs(x));
  // 2·radius <= 1e-30·max|v| (a floor keeps an all-zero value tensor from forcing the cap).
  const std::vector<double> targets(p.Ev, std::max(1e-30 * max_abs_value, 1e-300));

  mpfr_t mid, part;
  mpfr_init2(mid, 2200);  // head + tail exactly: their exponents differ by at most ~2100
  mpfr_init2(part, 53);
  for (std::size_t r : rows) {
    if (r >= row_count) fail("row " + std::to_string(r) + " out of range");
    const v::RowIndex index = v::row_index(p, r);
    const v::RowEnclosure e = v::enclose_row(p, r, targets);
    std::printf("row %zu %zu %zu %zu %s bits=%d capped=%d\n", r, index.b, index.h, index.i,
                e.empty ? "empty" : ("keys=" + std::to_string(e.keys.size())).c_str(), e.bits, e.capped ? 1 : 0);
    for (std::size_t c = 0; c < p.Ev; ++c) {
      const v::FineEnclosure& f = e.fine[c];
      mpfr_set_d(mid, f.head, MPFR_RNDN);  // exact
      mpfr_set_d(part, f.tail, MPFR_RNDN);  // exact
      mpfr_add(mid, mid, part, MPFR_RNDN);  // exact at this precision
      mpfr_printf("out %zu %zu %.25Re %.6e\n", r, c, mid, f.radius);
    }
  }
  mpfr_clear(mid);
  mpfr_clear(part);
  return 0;
}
