#include "flash_attention.hpp"

// Vector types cross no ABI boundary in this file: every function taking or returning one is
// always_inline into a target-specific entry, so the psABI notes about passing them do not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <thread>
#include <unistd.h>
#include <vector>

#include "flash_attention_simd.hpp"
#include "worker_pool.hpp"

namespace attn {
namespace {

using flash_detail::Core;
using flash_detail::Job;
using flash_detail::Scratch;

// ---- Runtime dispatch. Each entry inlines the generic Core under its own target attribute, so
// one binary carries SSE2 (x86-64 baseline), AVX2+FMA and AVX-512F code and picks at run time.
template <class T> using ItemFunction = void (*)(const Job<T>&, std::size_t, Scratch<T>&);
template <class T> using ElementwiseFunction = void (*)(const T*, T*, std::size_t);

// The hot loops (pack, Q·Kᵀ, P·V) out of line, each compiled for its entry's ISA: GCC then
// allocates their registers apart from the rest of run_item. Inlined, it spilled a row of P·V's
// register tile to the stack (a reload in every other FMA) as soon as run_item grew, e.g. with
// fp64's register transpose in pack: 70% of the fp64 peak fell to 55% (bench_attention, Zen 5).
#define ATTN_PARTS(name, bytes, ...)                                                                            \
  template <class T> struct name {                                                                             \
    using C = Core<T, (bytes) / sizeof(T)>;                                                                    \
    [[gnu::noinline __VA_OPT__(, ) __VA_ARGS__]] static void pack(const Job<T>& job, const T* k, const T* v,     \
                                                                  std::size_t cols, Scratch<T>& s) {            \
      C::pack(job, k, v, cols, s);                                                                             \
    }                                                                                                          \
    [[gnu::noinline __VA_OPT__(, ) __VA_ARGS__]] static void dot_products(const Job<T>& job, const T* const* q, \
                                                                          std::size_t from, std::size_t cols,   \
                                                                          Scratch<T>& s) {                      \
      C::dot_products(job, q, from, cols, s);                                                                  \
    }                                                                                                          \
    [[gnu::noinline __VA_OPT__(, ) __VA_ARGS__]] static void accumulate(const Job<T>& job, const T* alpha,     \
                                                                        std::size_t from, std::size_t cols,     \
                                                                        T* acc, Scratch<T>& s) {                \
      C::accumulate(job, alpha, from, cols, acc, s);                                                           \
    }                                                                                                          \
  };
ATTN_PARTS(PartsBaseline, 16)
ATTN_PARTS(PartsAvx2, 32, gnu::target("avx2,fma"))
ATTN_PARTS(PartsAvx512, 64, gnu::target("avx512f"))
#undef ATTN_PARTS

template <class T> void item_baseline(const Job<T>& j, std::size_t i, Scratch<T>& s) {
  Core<T, 16 / sizeof(T), PartsBaseline<T>>::run_item(j, i, s);
}
template <class T> [[gnu::target("avx2,fma")]] void item_avx2(const Job<T>& j, std::size_t i, Scratch<T>& s) {
  Core<T, 32 / sizeof(T), PartsAvx2<T>>::run_item(j, i, s);
}
template <class T> [[gnu::target("avx512f")]] void item_avx512(const Job<T>& j, std::size_t i, Scratch<T>& s) {
  Core<T, 64 / sizeof(T), PartsAvx512<T>>::run_item(j, i, s);
}
template <class T, bool kTanh> void elementwise_baseline(const T* x, T* o, std::size_t n) {
  Core<T, 16 / sizeof(T)>::template elementwise_span<kTanh>(x, o, n);
}
template <class T, bool kTanh> [[gnu::target("avx2,fma")]] void elementwise_avx2(const T* x, T* o, std::size_t n) {
  Core<T, 32 / sizeof(T)>::template elementwise_span<kTanh>(x, o, n);
}
template <class T, bool kTanh> [[gnu::target("avx512f")]] void elementwise_avx512(const T* x, T* o, std::size_t n) {
  Core<T, 64 / sizeof(T)>::template elementwise_span<kTanh>(x, o, n);
}

SimdLevel resolve(SimdLevel level) { return level == SimdLevel::automatic ? best_simd_level() : level; }

// The threads a call asks for: options.threads, or every core when 0.
unsigned wanted_threads(const FlashOptions& options) {
  return options.threads != 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
}

std::size_t vector_bytes(SimdLevel level) {
  return level == SimdLevel::avx512 ? 64 : level == SimdLevel::avx2 ? 32 : 16;
}

// Multiplies sizes, false on overflow: span sizes are checked without trusting the shape.
bool product(std::initializer_list<std::size_t> factors, std::size_t& result) {
  result = 1;
  for (std::size_t f : factors)
    if (__builtin_mul_overflow(result, f, &result)) return false;
  return true;
}

bool holds(std::size_t size, std::initializer_list<std::size_t> factors) {
  std::size_t expected = 0;
  return product(factors, expected) && size == expected;
}

// The strides of a mask of `size` values (see FlashOptions), false when it has no valid size.
template <class E> bool mask_view(const FlashShape& sh, std::span<const E> mask, flash_detail::MaskView<E>& view) {
  view = {};
  if (mask.empty()) return true;
  std::size_t matrix = 0;
  if (!product({sh.n, sh.m}, matrix)) return false;
  view.data = mask.data();
  if (mask.size() == matrix) return true;
  view.batch = matrix;
  if (holds(mask.size(), {sh.batch, matrix})) return true;
  view.batch = sh.q_heads * matrix, view.head = matrix;
  return holds(mask.size(), {sh.batch, sh.q_heads, matrix});
}

// Packed sequences' offsets: B + 1 from 0, non-decreasing, each sequence at most `longest`.
bool offsets_valid(std::span<const std::size_t> cu, std::size_t batch, std::size_t longest) {
  if (cu.size() != batch + 1 || cu[0] != 0) return false;
  for (std::size_t b = 0; b < batch; ++b)
    if (cu[b + 1] < cu[b] || cu[b + 1] - cu[b] > longest) return false;
  return true;
}

template <class T> KernelStatus check(const FlashShape& sh, std::size_t q, std::size_t k, std::size_t v,
                                      std::size_t out, const FlashOptions& opt, std::span<const T> bias) {
  if (sh.kv_heads == 0 || sh.q_heads % sh.kv_heads != 0) return KernelStatus::bad_heads;
  // The rows of Q and out (K and V): B·n (B·m), or the packed totals.
  std::size_t query_rows = 0, key_rows = 0;
  if (opt.cu_seqlens_q.empty() && opt.cu_seqlens_k.empty()) {
    if (!product({sh.batch, sh.n}, query_rows) || !product({sh.batch, sh.m}, key_rows))
      return KernelStatus::size_mismatch;
  } else {
    if (!offsets_valid(opt.cu_seqlens_q, sh.batch, sh.n) || !offsets_valid(opt.cu_seqlens_k, sh.batch, sh.m) ||
        opt.layout != TensorLayout::batch_seq_head || !opt.mask_bits.empty() || !bias.empty() ||
        !opt.key_lengths.empty())
      return KernelStatus::bad_varlen;
    query_rows = opt.cu_seqlens_q.back(), key_rows = opt.cu_seqlens_k.back();
  }
  if (!holds(q, {query_rows, sh.q_heads, sh.head_dim_k}) || !holds(k, {key_rows, sh.kv_heads, sh.head_dim_k}) ||
      !holds(v, {key_rows, sh.kv_heads, sh.head_dim_v}) || !holds(out, {query_rows, sh.q_heads, sh.head_dim_v}))
    return KernelStatus::size_mismatch;
  flash_detail::MaskView<std::uint8_t> bits;
  flash_detail::MaskView<T> values;
  if (!mask_view(sh, opt.mask_bits, bits) || !mask_view(sh, bias, values)) return KernelStatus::mask_size_mismatch;
  // !(x < inf) also catches NaN. One pass over the mask: far cheaper than the dot products.
  if (std::any_of(bias.begin(), bias.end(), [](T x) { return !(x < std::numeric_limits<T>::infinity()); }))
    return KernelStatus::bad_additive_mask;
  if (!opt.key_lengths.empty() &&
      (opt.key_lengths.size() != sh.batch ||
       std::any_of(opt.key_lengths.begin(), opt.key_lengths.end(), [&](std::size_t l) { return l > sh.m; })))
    return KernelStatus::bad_key_lengths;
  if (opt.window_left < -1 || opt.window_right < -1) return KernelStatus::bad_window;
  if (const std::size_t n = opt.alibi_slopes.size();
      n != 0 && ((n != sh.q_heads && n != sh.batch * sh.q_heads) ||
                 std::any_of(opt.alibi_slopes.begin(), opt.alibi_slopes.end(),
                             [](double x) { return !std::isfinite(x) || !std::isfinite(static_cast<T>(x)); })))
    return KernelStatus::bad_alibi;
  if (!std::isfinite(opt.softcap) || !(opt.softcap >= 0) || !std::isfinite(static_cast<T>(opt.softcap)))
    return KernelStatus::bad_softcap;
  if (!opt.sinks.empty() &&
      (opt.sinks.size() != sh.q_heads || std::any_of(opt.sinks.begin(), opt.sinks.end(), [](double x) {
         return !std::isfinite(x) || !std::isfinite(static_cast<T>(x));
       })))
    return KernelStatus::bad_sinks;
  if (opt.scale) {
    if (!std::isfinite(*opt.scale) || !std::isfinite(static_cast<T>(*opt.scale))) return KernelStatus::bad_scale;
  } else if (!(std::isfinite(opt.scale_divisor) && opt.scale_divisor > 0)) {
    return KernelStatus::bad_scale_divisor;
  }
  if ((opt.query_tile && *opt.query_tile == 0) || (opt.key_tile && *opt.key_tile == 0)) return KernelStatus::bad_tile;
  if (!simd_level_supported(opt.simd)) return KernelStatus::simd_unsupported;
  return KernelStatus::ok;
}

// Each calling thread keeps its scratch between calls, one per worker index: allocated anew per
// call, the buffers (300 KiB per thread for fp32 at n = 512, hd 64) went back to the system and came
// back as fresh pages every call, and the page faults and TLB shootdowns of a 2-thread call took
// half its time (fp32 causal n = 512 hd 64 on 2 threads: 1.52-1.65 ms against 0.81-0.84 ms with
// the heap never trimmed; a Zen 5 VM). A scratch larger than kKeptScratchBytes is freed after its
// call: the default tiles need at most about 2.6 MiB (fp64, head_dim 512), and a caller's own huge
// query_tile should not stay resident.
constexpr std::size_t kKeptScratchBytes = std::size_t{4} << 20;
template <class T> std::vector<std::unique_ptr<Scratch<T>>>& kept_scratch() {
  thread_local std::vector<std::unique_ptr<Scratch<T>>> kept;
  return kept;
}

template <class T> KernelStatus run(const FlashShape& sh, std::span<const T> Q, std::span<const T> K,
                                    std::span<const T> V, std::span<T> out, const FlashOptions& opt,
                                    std::span<const T> bias) {
  if (const KernelStatus status = check<T>(sh, Q.size(), K.size(), V.size(), out.size(), opt, bias);
      status != KernelStatus::ok)
    return status;
  const SimdLevel level = resolve(opt.simd);
  const std::size_t tile = flash_detail::kVectors * vector_bytes(level) / sizeof(T);
  Job<T> job;
  job.Q = Q.data(), job.K = K.data(), job.V = V.data(), job.out = out.data();
  job.shape = sh;
  job.q = flash_detail::strides_of(opt.layout, sh.q_heads, sh.n, sh.head_dim_k);
  job.k = flash_detail::strides_of(opt.layout, sh.kv_heads, sh.m, sh.head_dim_k);
  job.v = flash_detail::strides_of(opt.layout, sh.kv_heads, sh.m, sh.head_dim_v);
  job.o = flash_detail::strides_of(opt.layout, sh.q_heads, sh.n, sh.head_dim_v);
  job.causal = opt.causal;
  job.key_lengths = opt.key_lengths.empty() ? nullptr : opt.key_lengths.data();
  job.window_left = opt.window_left, job.window_right = opt.window_right;
  std::vector<T> slopes(opt.alibi_slopes.begin(), opt.alibi_slopes.end());  // in T, once
  job.alibi = slopes.empty() ? nullptr : slopes.data();
  job.alibi_per_batch = slopes.size() != sh.q_heads;
  job.softcap = static_cast<T>(opt.softcap);
  const std::vector<T> sinks(opt.sinks.begin(), opt.sinks.end());
  job.sinks = sinks.empty() ? nullptr : sinks.data();
  if (!opt.cu_seqlens_q.empty()) {  // packed [total, H, d]: rows at the sequences' offsets
    job.cu_q = opt.cu_seqlens_q.data(), job.cu_k = opt.cu_seqlens_k.data();
    job.q.batch = job.k.batch = job.v.batch = job.o.batch = 0;
  }
  (void)mask_view(sh, opt.mask_bits, job.bits);  // sizes checked above
  (void)mask_view(sh, bias, job.bias);
  // The scale in T: the caller's multiplier converted once, or fl(1/divisor) (flash_error_bound).
  const T scale = opt.scale ? static_cast<T>(*opt.scale) : static_cast<T>(1.0 / opt.scale_divisor);
  // exp's constants through a pointer the inner loops cannot see into (vector_exp).
  const std::vector<T> exp_constants(std::begin(flash_detail::ExpConstants<T>::table),
                                     std::end(flash_detail::ExpConstants<T>::table));
  job.exp_constants = exp_constants.data();
  job.scaled_scores = !bias.empty() || job.alibi != nullptr || job.softcap > 0 || job.sinks != nullptr || !(scale > 0);
  job.score_scale = job.scaled_scores ? scale : T(1);
  job.exp_scale = job.scaled_scores ? T(1) : scale;
  if (job.softcap > 0) {
    const T factor = static_cast<T>(static_cast<double>(scale) / static_cast<double>(job.softcap));
    job.softcap_factor = std::isnormal(factor) && std::isfinite(2 * factor) ? factor : T(0);  // 2k is used
  }
  // Tiles never exceed the problem, so a huge tile option cannot size a huge scratch buffer.
  job.query_tile = std::min(flash_query_tile(sh, opt, sizeof(T)), std::max<std::size_t>(sh.n, 1));
  job.key_tile = flash_detail::round_up(std::min(flash_key_tile(sh, opt, sizeof(T)), std::max<std::size_t>(sh.m, 1)), tile);
  job.head_dim_v_padded = flash_detail::round_up(sh.head_dim_v, tile);
  const std::size_t items = job.items();
  if (items == 0) return KernelStatus::ok;

  const ItemFunction<T> item = level == SimdLevel::avx512 ? item_avx512<T>
                               : level == SimdLevel::avx2 ? item_avx2<T>
                                                          : item_baseline<T>;
  const unsigned wanted = wanted_threads(opt);
  const std::size_t threads = std::min<std::size_t>(wanted, items);
  // Scratch is fitted here, before any thread starts, so a bad_alloc reaches the caller.
  std::vector<std::unique_ptr<Scratch<T>>>& scratch = kept_scratch<T>();
  while (scratch.size() < threads) scratch.push_back(std::make_unique<Scratch<T>>());
  struct Release {  // after the call, however it ends: scratch beyond kKeptScratchBytes is freed
    std::vector<std::unique_ptr<Scratch<T>>>& kept;
    ~Release() {
      for (auto& s : kept)
        if (s->bytes() > kKeptScratchBytes) s->release();
    }
  } release{scratch};
  for (std::size_t t = 0; t < threads; ++t) scratch[t]->fit(job);
  // Work items are independent and each is computed the same way on any thread, so the result is
  // bitwise the same for every thread count; the shared counter only balances the load.
  std::atomic<std::size_t> next{0};
  run_on_workers(threads, [&](std::size_t t) {
    for (std::size_t i = next.fetch_add(1, std::memory_order_relaxed); i < items;
         i = next.fetch_add(1, std::memory_order_relaxed))
      item(job, i, *scratch[t]);
  });
  return KernelStatus::ok;
}

template <class T, bool kTanh>
KernelStatus elementwise_run(std::span<const T> x, std::span<T> out, SimdLevel level) {
  level = resolve(level);
  if (!simd_level_supported(level)) return KernelStatus::simd_unsupported;
  if (out.size() != x.size()) return KernelStatus::size_mismatch;
  const ElementwiseFunction<T> f = level == SimdLevel::avx512 ? elementwise_avx512<T, kTanh>
                           : level == SimdLevel::avx2 ? elementwise_avx2<T, kTanh>
                                                      : elementwise_baseline<T, kTanh>;
  f(x.data(), out.data(), x.size());
  return KernelStatus::ok;
}

}  // namespace

KernelStatus flash_attention(const FlashShape& shape, std::span<const float> Q, std::span<const float> K,
                             std::span<const float> V, std::span<float> out, const FlashOptions& options,
                             std::span<const float> additive_mask) {
  return run<float>(shape, Q, K, V, out, options, additive_mask);
}

KernelStatus flash_attention(const FlashShape& shape, std::span<const double> Q, std::span<const double> K,
                             std::span<const double> V, std::span<double> out, const FlashOptions& options,
                             std::span<const double> additive_mask) {
  return run<double>(shape, Q, K, V, out, options, additive_mask);
}

std::size_t flash_tile_budget() {
  static const std::size_t budget = [] {
    constexpr std::size_t kLeast = 64 * 1024, kMost = 512 * 1024;
    long l2 = 0;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);  // glibc: from CPUID; 0 or -1 when unknown
#endif
    if (l2 <= 0) return kLeast;
    return std::clamp(static_cast<std::size_t>(l2) / 2, kLeast, kMost);
  }();
  return budget;
}

std::size_t flash_key_tile(const FlashShape& shape, const FlashOptions& options, std::size_t element_size) {
  if (options.key_tile) return *options.key_tile;
  const std::size_t budget = flash_tile_budget();
  const std::size_t row = (shape.head_dim_k + shape.head_dim_v) * element_size;
  std::size_t tile = 512;
  while (tile > 64 && tile * row > budget) tile /= 2;
  return tile;
}

std::size_t flash_query_tile(const FlashShape& shape, const FlashOptions& options, std::size_t element_size) {
  if (options.query_tile) return *options.query_tile;
  constexpr std::size_t kRows = 512, kMostRows = 2048, kAccumulatorBytes = std::size_t{1} << 20, kItemsPerThread = 16;
  if (options.window_left >= 0) {
    const auto w = static_cast<std::size_t>(options.window_left);
    return std::min(kRows, flash_detail::round_up(std::max<std::size_t>(w, 64), 64));
  }
  const std::size_t threads = wanted_threads(options);
  const auto items = [&](std::size_t rows) { return shape.batch * shape.q_heads * ((shape.n + rows - 1) / rows); };
  std::size_t rows = kRows;
  // Divisions, not products: any shape may be asked about (run's are checked first).
  while (rows < kMostRows && rows < shape.n &&
         shape.head_dim_v <= kAccumulatorBytes / (2 * rows) / std::max<std::size_t>(element_size, 1) &&
         (threads == 1 || items(2 * rows) / kItemsPerThread >= threads))
    rows *= 2;
  return rows;
}

SimdLevel best_simd_level() {
  __builtin_cpu_init();  // needed when called before static constructors have run
  if (__builtin_cpu_supports("avx512f")) return SimdLevel::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return SimdLevel::avx2;
  return SimdLevel::baseline;
}

bool simd_level_supported(SimdLevel level) {
  const SimdLevel best = best_simd_level();
  switch (level) {
    case SimdLevel::automatic:
    case SimdLevel::baseline:
      return true;
    case SimdLevel::avx2:
      return best == SimdLevel::avx2 || best == SimdLevel::avx512;
    case SimdLevel::avx512:
      return best == SimdLevel::avx512;
  }
  return false;
}

KernelStatus kernel_exp(std::span<const float> x, std::span<float> out, SimdLevel level) {
  return elementwise_run<float, false>(x, out, level);
}
KernelStatus kernel_exp(std::span<const double> x, std::span<double> out, SimdLevel level) {
  return elementwise_run<double, false>(x, out, level);
}
KernelStatus kernel_tanh(std::span<const float> x, std::span<float> out, SimdLevel level) {
  return elementwise_run<float, true>(x, out, level);
}
KernelStatus kernel_tanh(std::span<const double> x, std::span<double> out, SimdLevel level) {
  return elementwise_run<double, true>(x, out, level);
}

// The fast path's error for one output value o = Σ_j w_j·v_j, unit roundoff u of T, γ_k = ku/(1-ku)
// (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §3.1), first the weights:
// Step 1: each score is a length-d_k dot product (sequential, FMA or not): |ŝ_j - s_j| <= γ_dk·D,
//         D = max_j Σ_c |q_c k_jc| (Higham (3.5)).
// Step 2: softmax is shift-invariant, so what matters is the error of the exponents against a
//         common shift. Weight j's exponent is the sum of its own (ŝ_j - M_t)·fl(1/τ) and of the
//         rescale arguments (M_t - M_t+1)·fl(1/τ); these telescope to (ŝ_j - ŝ_max)/τ, so scores
//         contribute 2γ_dk·D/τ, and each piece carries a relative γ_3 (subtract, round 1/τ,
//         multiply) on a total magnitude <= 2·range: a = 2γ_dk·D/τ + 2γ_3·range. Exponents
//         below the flush threshold do not count here (see Step 5), so range is capped there.
// Step 3: the numerator of weight j is a product of at most T exps (its own and T - 1 rescale
//         factors, T = key tiles) each within kKernelExpUlps ulps (<= 2·ulps·u relative), and at
//         most T roundings of the products: p̂_j = p_j(1 + θ_j),
//         |θ_j| <= θ = expm1(a + T·log1p(2·ulps·u) + T·log1p(u)).
// Step 4: the row sum and each accumulator are sums of `keys` terms in some order, rescaled at
//         most T times: relative γ_(keys+T) and γ_(keys+T+1) (the +1: the product p·v).
// Step 5: ô = Ô·fl(1/l̂) rounded: two roundings (1/l̂ is normal: 1 <= l̂ <= keys + 1, far below
//         2^126), so |ô - o| <= Σ_j w_j|v_j|·((1+θ)(1+γ_(keys+T+1))(1+u)² / ((1-θ)(1-γ_(keys+T))) - 1).
//         Exps flushed to +0 below the smallest normal λ and subnormal
//         products each lose less than λ against a sum >= 1 (the largest term is exp(0) = 1):
//         + 2·(keys + T)·λ·max|v|.
// This is much looser than the errors seen in practice (the γ_keys summation term dominates for
// long rows), but it is a bound, and a missing rescale or a wrong mask violates it by far.
template <class T> double flash_error_bound(const FlashBoundTerms& t) {
  constexpr double u = std::numeric_limits<T>::epsilon() / 2;
  constexpr double infinity = std::numeric_limits<double>::infinity();
  const auto gamma = [&](double k) { return k * u >= 0.5 ? infinity : k * u / (1 - k * u); };
  const double tiles = static_cast<double>(std::max<std::size_t>(t.key_tiles, 1));
  const double keys = static_cast<double>(t.keys);
  const double range = std::min(t.score_range, -static_cast<double>(flash_detail::ExpConstants<T>::lowest) + 1);
  const double a =
      2 * gamma(static_cast<double>(t.head_dim_k)) * t.max_abs_dot / t.scale_divisor + 2 * gamma(3) * range;
  const double theta = std::expm1(a + tiles * std::log1p(2 * kKernelExpUlps * u) + tiles * std::log1p(u));
  const double g_sum = gamma(keys + tiles), g_acc = gamma(keys + tiles + 1);
  if (!(theta < 1) || !(g_sum < 1)) return infinity;
  const double relative = (1 + theta) * (1 + g_acc) * (1 + u) * (1 + u) / ((1 - theta) * (1 - g_sum)) - 1;
  return relative * t.weighted_abs_v + 2 * (keys + tiles) * std::numeric_limits<T>::min() * t.max_abs_v;
}

template double flash_error_bound<float>(const FlashBoundTerms&);
template double flash_error_bound<double>(const FlashBoundTerms&);

}  // namespace attn
