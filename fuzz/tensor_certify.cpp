// Tensor certification on small TensorProblems built from the fuzz bytes: every dtype, both
// layouts, boolean and additive masks (-inf too) of rank 2 or 4, causal top-left and bottom-right,
// GQA, key lengths, a given or defaulted scale, key and value in a format of their own, and a
// declared kernel structure. Properties: the exact output rounded once to the storage format passes
// both tiers; the same output moved by twice the certified band at one element of a row with keys
// fails both tiers (the statistical band is never wider) and names that element; the exact LSE
// rounded to fp32 passes certify_lse and one row's moved by twice its band fails naming that row;
// for a drawn dout, the exact gradients rounded once to their tensors' formats (an additive mask's
// too) pass both tiers of certify_backward (with that forward given and without, every declared
// algorithm, all rows and a sample) and one dq element moved by twice its band fails naming it;
// nothing crashes, nothing is NaN in a verdict.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "byte_source.hpp"
#include "fuzz_check.hpp"
#include "tensor/tensor.hpp"
#include "tensor/tensor_backward.hpp"
#include "tensor/tensor_band.hpp"
#include "tensor/tensor_certify.hpp"
#include "tensor/tensor_oracle.hpp"

namespace {

using attn::fuzz::require;
using namespace attn::verify;

constexpr DType kDtypes[] = {DType::fp64, DType::fp32, DType::fp16, DType::bf16};

// A value exact in `dtype`: a small integer over a power of two, so sums stay far from overflow
// in fp16 while exponents reach subnormal weights and huge score gaps.
double value(attn::fuzz::ByteSource& bytes, DType dtype) {
  const double mantissa = static_cast<double>(bytes.in_range(0, 255)) - 128;
  const int exponent = static_cast<int>(bytes.in_range(0, 12)) - 8;
  return round_to(dtype, std::ldexp(mantissa, exponent - 3));
}

TensorProblem build(attn::fuzz::ByteSource& bytes) {
  TensorProblem p;
  p.dtype = kDtypes[bytes.in_range(0, 3)];
  if (bytes.in_range(0, 3) == 0) p.kv_dtype = kDtypes[bytes.in_range(0, 3)];  // key and value in another format
  p.layout = bytes.flag() ? AxisOrder::batch_seq_head : AxisOrder::batch_head_seq;
  p.batch = bytes.in_range(1, 2);
  p.kv_heads = bytes.in_range(1, 2);
  p.q_heads = p.kv_heads * bytes.in_range(1, 2);
  p.L = bytes.in_range(1, 4), p.S = bytes.in_range(1, 6);
  p.E = bytes.in_range(1, 4), p.Ev = bytes.in_range(1, 3);
  for (auto [values, count, format] : {std::tuple{&p.query, p.batch * p.q_heads * p.L * p.E, p.dtype},
                                       std::tuple{&p.key, p.batch * p.kv_heads * p.S * p.E, kv_format(p)},
                                       std::tuple{&p.value, p.batch * p.kv_heads * p.S * p.Ev, kv_format(p)}})
    for (std::size_t n = 0; n < count; ++n) values->push_back(value(bytes, format));
  if (bytes.flag()) p.scale = static_cast<double>(bytes.in_range(1, 64)) / 16 * (bytes.in_range(0, 7) == 0 ? -1 : 1);
  const std::size_t mask = bytes.in_range(0, 2);
  if (mask != 0) {
    p.mask_kind = mask == 1 ? TensorMask::boolean : TensorMask::additive;
    p.mask_shape = bytes.flag() ? std::vector<std::size_t>{p.batch, p.q_heads, p.L, p.S}
                                : std::vector<std::size_t>{p.L, p.S};
    std::size_t count = 1;
    for (std::size_t d : p.mask_shape) count *= d;
    for (std::size_t n = 0; n < count; ++n) {
      if (p.mask_kind == TensorMask::boolean) {
        p.mask.push_back(bytes.in_range(0, 3) != 0 ? 1 : 0);
      } else {
        const std::size_t choice = bytes.in_range(0, 7);
        p.mask.push_back(choice == 0 ? -std::numeric_limits<double>::infinity() : value(bytes, p.dtype));
      }
    }
  }
  if (bytes.flag())
    for (std::size_t b = 0; b < p.batch; ++b) p.key_lengths.push_back(bytes.in_range(0, p.S));
  p.causal = static_cast<Causal>(bytes.in_range(0, 2));
  if (bytes.flag()) {  // a sliding window: each side -1 (unbounded) to S - 1
    p.window_left = static_cast<std::int64_t>(bytes.in_range(0, p.S)) - 1;
    p.window_right = static_cast<std::int64_t>(bytes.in_range(0, p.S)) - 1;
  }
  if (bytes.in_range(0, 3) == 0) p.softcap = std::fabs(value(bytes, DType::fp32));  // 0 (off) now and then too
  if (bytes.in_range(0, 3) == 0)  // sinks: one fp32 logit per query head
    for (std::size_t h = 0; h < p.q_heads; ++h) p.sinks.push_back(value(bytes, DType::fp32));
  if (p.mask_kind != TensorMask::additive && bytes.flag()) {  // ALiBi: fp32 slopes, [Hq] or [B, Hq]
    const std::size_t count = bytes.flag() ? p.q_heads : p.batch * p.q_heads;
    for (std::size_t n = 0; n < count; ++n) p.alibi_slopes.push_back(round_to(DType::fp32, std::fabs(value(bytes, DType::fp32))));
  }
  return p;
}

KernelStructure structure(attn::fuzz::ByteSource& bytes) {
  KernelStructure s;
  switch (bytes.in_range(0, 3)) {
    case 1: s.key_tile = bytes.in_range(1, 4), s.sum_chunk = bytes.in_range(1, s.key_tile); break;
    case 2: s.single_pass = true, s.sum_chunk = bytes.in_range(1, 3); break;
    default: break;
  }
  const std::size_t splits = bytes.in_range(0, 3);  // 0: any
  s.splits = splits;
  s.ordered = splits == 1 && bytes.flag();
  require(structure_error(s).empty(), "the fuzz target builds only consistent structures", structure_error(s));
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  attn::fuzz::ByteSource bytes(data, size);
  const TensorProblem p = build(bytes);
  if (!validate(p)) return 0;  // a scale of 0 or an unrepresentable combination: not a certification
  CertifyOptions options;
  options.arithmetic = arithmetic_profile(dtype_name(p.dtype)).value();
  options.arithmetic.structure = structure(bytes);
  if (has_sinks(p)) options.arithmetic.structure = KernelStructure{};  // sinks: no declared structure
  options.arithmetic.kv_storage = p.kv_dtype;  // as certify_tensor takes it, for the band computed below
  options.threads = 1;
  const std::size_t rows = p.batch * p.q_heads * p.L;
  // The exact output rounded once to the storage format; fully masked rows +0.
  std::vector<double> exact(rows * p.Ev, 0.0);
  std::vector<double> lse(rows, -std::numeric_limits<double>::infinity());  // the exact LSE rounded to fp32
  std::vector<std::size_t> with_keys;
  for (std::size_t row = 0; row < rows; ++row) {
    if (!row_has_keys(p, row)) {
      if (has_sinks(p)) lse[row] = sink_of(p, row_index(p, row).h);  // log e^z, z an fp32 value
      continue;
    }
    with_keys.push_back(row);
    const RowEnclosure e = enclose_row(p, row, 128);
    for (std::size_t c = 0; c < p.Ev; ++c) exact[output_index(p, row, c)] = round_to(p.dtype, e.fine[c].head);
    lse[row] = round_to(DType::fp32, e.lse_fine.head);
  }
  // Scores beyond fp32's range have no fp32 LSE: those inputs check the output only.
  bool lse_finite = true;
  for (std::size_t row : with_keys) lse_finite = lse_finite && std::isfinite(lse[row]);
  if (lse_finite) {
    const TensorReport lse_report = certify_lse(p, lse, options);
    require(lse_report.passed, "the exactly rounded LSE passes", lse_report.summary());
  }
  const TensorReport report = certify_tensor(p, exact, options);
  require(report.certified.passed && report.statistical.passed, "the exactly rounded output passes both tiers",
          report.summary());
  require(report.statistical.max_band_usage >= report.certified.max_band_usage, "statistical usage >= certified",
          report.summary());
  {  // NaN and ±inf planted (IEEE semantics, tensor_ieee.hpp): certification runs to a report, every
     // failure named and within the output's size.
    TensorProblem ieee = p;
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity()};
    for (std::vector<double>* t : {&ieee.query, &ieee.key, &ieee.value}) {
      if (bytes.flag()) (*t)[bytes.in_range(0, t->size() - 1)] = specials[bytes.in_range(0, 2)];
    }
    require(static_cast<bool>(validate(ieee, Admit::ieee)), "planted NaN and inf are admitted", "");
    const TensorReport planted = certify_tensor(ieee, exact, options);
    require(planted.failure_count <= exact.size(), "at most one failure per element", planted.summary());
    for (const TensorFailure& f : planted.failures) require(!f.reason.empty(), "every failure has a reason", planted.summary());
  }
  // The backward: the exact gradients rounded once (dq to dtype, dk and dv to K's and V's format).
  std::vector<double> dout(rows * p.Ev);
  for (double& x : dout) x = value(bytes, p.dtype);
  const GradientEnclosure exact_grads = enclose_gradients(p, dout, 128);
  const auto rounded = [](const std::vector<FineEnclosure>& g, DType dtype) {
    std::vector<double> out;
    for (const FineEnclosure& x : g) out.push_back(round_to(dtype, x.head + x.tail));
    return out;
  };
  const std::vector<double> dq = rounded(exact_grads.dq, p.dtype), dk = rounded(exact_grads.dk, kv_format(p)),
                            dv = rounded(exact_grads.dv, kv_format(p)), dmask = rounded(exact_grads.dmask, p.dtype);
  const auto finite = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  if (finite(dq) && finite(dk) && finite(dv) && finite(dmask)) {  // beyond the format's range: no kernel can hold them
    BackwardInputs forward;
    if (lse_finite) forward.out = exact, forward.lse = lse;
    // Every algorithm's band, all rows and a sample (the lean and slim passes of the rows that only
    // feed key rows, the key rows' groups drawn).
    const GradientAlgorithm algorithm = bytes.flag() ? (bytes.flag() ? GradientAlgorithm::flash : GradientAlgorithm::math)
                                                     : GradientAlgorithm::either;
    CertifyOptions sampled = options;
    sampled.rows = bytes.in_range(1, 3);
    sampled.seed = bytes.in_range(0, 255);
    for (BackwardInputs given : {forward, BackwardInputs{}}) {
      given.algorithm = algorithm;
      for (const CertifyOptions* o : {&options, &sampled}) {
        const BackwardReport backward = certify_backward(p, dout, dq, dk, dv, *o, given, dmask);
        bool tiers = backward.passed;
        for (const TensorReport* r : {&backward.dq, &backward.dk, &backward.dv})
          tiers = tiers && r->certified.passed && r->statistical.passed &&
                  r->statistical.max_band_usage >= r->certified.max_band_usage;
        if (backward.dmask) tiers = tiers && backward.dmask->certified.passed && backward.dmask->statistical.passed;
        require(tiers, "the exactly rounded gradients pass both tiers", backward.summary());
      }
    }
    if (!with_keys.empty()) {  // one dq element moved by twice its band fails, naming it
      const std::size_t row = with_keys[bytes.in_range(0, with_keys.size() - 1)], c = bytes.in_range(0, p.E - 1);
      const RowIndex at = row_index(p, row);
      const std::size_t n = tensor_index(p, p.q_heads, p.L, p.E, at.b, at.h, at.i, c);
      const std::array<std::size_t, 4> index{at.b, at.h, at.i, c};
      const double direction = bytes.flag() ? 1 : -1;
      const auto moved_to = [&](double x) {
        std::vector<double> moved_dq = dq;
        moved_dq[n] = x;
        return certify_backward(p, dout, moved_dq, dk, dv, options, forward);
      };
      // The band, read off a probe at the format's largest value (beyond it no kernel's value can be).
      const double largest = std::ldexp(2 - std::ldexp(1.0, 1 - (p.dtype == DType::fp64   ? 53
                                                               : p.dtype == DType::fp32 ? 24
                                                               : p.dtype == DType::fp16 ? 11
                                                                                        : 8)),
                                        p.dtype == DType::fp64 ? 1023 : p.dtype == DType::fp16 ? 15 : 127);
      const BackwardReport probe = moved_to(direction * largest);
      if (!probe.dq.passed && probe.dq.failures.size() == 1 && probe.dq.failures[0].reason == "outside band") {
        const double delta = probe.dq.failures[0].band, exact = exact_grads.dq[n].head + exact_grads.dq[n].tail;
        double x = round_to(p.dtype, exact + direction * 2 * delta);
        while (std::isfinite(x) && std::fabs(x - exact) < 2 * delta)
          x = round_to(p.dtype, x + direction * ulp_of(p.dtype, x) * 0.75);
        if (std::isfinite(x)) {
          const BackwardReport wrong = moved_to(x);
          require(!wrong.passed && !wrong.dq.passed && wrong.dk.passed && wrong.dv.passed &&
                      wrong.dq.failures.size() == 1 && wrong.dq.failures[0].index == index &&
                      wrong.dq.failures[0].usage > 1.9,
                  "a dq element moved by 2δ fails, naming it", wrong.summary());
        }
      } else {
        require(probe.dq.passed || probe.dq.failures.at(0).index == index, "the probe's failure names its element",
                probe.summary());
      }
    }
  }
  if (with_keys.empty()) return 0;
  // One element of a row with keys moved by twice its certified band, away from zero's side.
  const std::size_t row = with_keys[bytes.in_range(0, with_keys.size() - 1)], c = bytes.in_range(0, p.Ev - 1);
  const RowEnclosure e = enclose_row(p, row, 128);
  const TierBands bands = tensor_row_tier_bands(band_terms(p, row, e), options.arithmetic, report.lambda);
  const double delta = bands.certified[c];
  require(delta > 0 && std::isfinite(delta) && bands.statistical[c] <= delta, "0 < statistical <= certified band");
  std::vector<double> moved = exact;
  const double direction = bytes.flag() ? 1 : -1, target = e.fine[c].head + direction * 2 * delta;
  double x = round_to(p.dtype, target);
  while (std::isfinite(x) && std::fabs(x - e.fine[c].head) < 2 * delta)
    x = round_to(p.dtype, x + direction * ulp_of(p.dtype, x) * 0.75);  // the next value of the format
  if (lse_finite) {  // the row's LSE moved by twice its band fails, naming the row
    const double abs_lse = std::max(std::fabs(e.lse.lo), std::fabs(e.lse.hi));
    const double lse_delta = stored_lse_band(bands.lse, abs_lse, {}, options.arithmetic.compute);
    require(lse_delta > 0, "0 < LSE band");
    double l = round_to(DType::fp32, e.lse_fine.head + direction * 2 * lse_delta);
    while (std::isfinite(l) && std::fabs(l - e.lse_fine.head) < 2 * lse_delta)
      l = round_to(DType::fp32, l + direction * ulp_of(DType::fp32, l) * 0.75);
    if (std::isfinite(l) && std::isfinite(lse_delta)) {  // an unbounded band passes everything
      std::vector<double> moved_lse = lse;
      moved_lse[row] = l;
      const TensorReport wrong_lse = certify_lse(p, moved_lse, options);
      const RowIndex at = row_index(p, row);
      require(!wrong_lse.passed && wrong_lse.failures.size() == 1 &&
                  wrong_lse.failures[0].index == std::array<std::size_t, 4>{at.b, at.h, at.i, 0} &&
                  wrong_lse.failures[0].usage > 1.9,
              "an LSE moved by 2δ fails, naming its row", wrong_lse.summary());
    }
  }
  if (!std::isfinite(x)) return 0;  // beyond the format's range: not an output a kernel can hold
  moved[output_index(p, row, c)] = x;
  const TensorReport wrong = certify_tensor(p, moved, options);
  require(!wrong.certified.passed && !wrong.statistical.passed, "an element moved by 2δ fails both tiers",
          wrong.summary());
  const RowIndex r = row_index(p, row);
  const std::array<std::size_t, 4> index{r.b, r.h, r.i, c};
  require(wrong.failures.size() == 1 && wrong.failures[0].index == index && wrong.failures[0].usage > 1.9,
          "the failure names the moved element", wrong.summary());
  return 0;
}
