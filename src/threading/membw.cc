// STREAM triad over the thread pool; each thread first-touches the slice it later streams.
#include "threading/membw.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace shoal {

double MeasureTriadBandwidth(ThreadPool& pool, size_t bytes_per_array, int reps) {
  const int64_t n = static_cast<int64_t>(bytes_per_array / sizeof(double));
  std::unique_ptr<double[]> a(new double[static_cast<size_t>(n)]);
  std::unique_ptr<double[]> b(new double[static_cast<size_t>(n)]);
  std::unique_ptr<double[]> c(new double[static_cast<size_t>(n)]);
  // 1024 doubles = 8 KiB: whole pages per chunk, so pages land on the thread that uses them.
  constexpr int64_t kGrain = 1024;
  pool.ParallelFor(n, kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      a[i] = 0.0;
      b[i] = 1.0;
      c[i] = 2.0;
    }
  });
  const double s = 3.0;
  double best = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.ParallelFor(n, kGrain, [&](int64_t lo, int64_t hi) {
      double* __restrict pa = a.get();
      const double* __restrict pb = b.get();
      const double* __restrict pc = c.get();
      for (int64_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 3.0 * static_cast<double>(n) * sizeof(double) / sec);
  }
  // Keep the result observable so the loops cannot be elided.
  volatile double sink = a[static_cast<size_t>(n / 2)];
  (void)sink;
  return best;
}

}  // namespace shoal
