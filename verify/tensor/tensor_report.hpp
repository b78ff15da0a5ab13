// The parts of a tensor report shared by the output's, the LSE's and the gradients' certification
// (tensor_certify.cpp, tensor_backward_certify.cpp): per-row outcomes merged in row order, and the
// worker pool. Internal to attn_tensor.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "numeric/mpfr.hpp"
#include "tensor/tensor_certify.hpp"

namespace attn::verify::detail {

// What one row contributes to the report; merged in row order so threads do not change the result.
struct RowOutcome {
  std::vector<TensorFailure> failures;       // the deciding tier's
  std::size_t other_failures = 0;            // the other tier's count
  std::vector<double> usages, other_usages, plain_ratios;
  std::vector<std::uint32_t> usage_columns;  // the output column of each usage (for the heatmap)
  std::size_t head = 0, query = 0;           // the row's query head and query (for the heatmap)
  bool capped = false;
  bool fast = false;
  std::size_t unbounded = 0;
  std::size_t ieee_elements = 0;  // elements judged by their IEEE class (tensor_ieee.hpp)
  bool unmodelled = false;        // a row judged finite only
  bool certified = false;
};

// Runs work(k) for k < count on `threads` workers; the first exception is rethrown here.
template <typename Work> void parallel_for(std::size_t count, unsigned threads, const Work& work) {
  unsigned workers = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  workers = static_cast<unsigned>(std::min<std::size_t>(workers, std::max<std::size_t>(count, 1)));
  if (workers == 1) {  // on the caller's thread: no thread to start (and its MPFR caches stay warm)
    for (std::size_t k = 0; k < count; ++k) work(k);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      MpfrThreadCaches caches;  // MPFR's thread-local constants, freed when the worker exits
      for (std::size_t k = next++; k < count; k = next++) {
        try {
          work(k);
        } catch (...) {
          const std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

/// Judges one certified element whose exact value `exact` encloses: its usage |got - exact| / δ (the
/// distance's lower bound) in the deciding tier and the other, and a failure "outside band" (ulps of
/// `dtype` at the exact value) when the deciding usage is above 1. `got` is finite. The usage's
/// column for the heatmap is index[3], the row's head and query index[1] and index[2].
void judge(RowOutcome& outcome, const std::array<std::size_t, 4>& index, double got, const FineEnclosure& exact,
           double deciding, double other, double certified, double statistical, DType dtype);

/// The report from every row's outcome (`certify`: the rows certified against the oracle); the
/// failures sorted worst first and cut to options.max_failures. `heatmap` (empty, of the report's
/// shape; without heads: none) is filled from the usages and every failure, kept or not.
[[nodiscard]] TensorReport report_of(std::vector<RowOutcome>& outcomes, const std::vector<char>& certify,
                                     const CertifyOptions& options, double lambda, UsageHeatmap heatmap = {});

}  // namespace attn::verify::detail
