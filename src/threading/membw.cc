// STREAM triad over the thread pool; each thread first-touches the slice it later streams.
#include "threading/membw.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <memory>

namespace shoal {
namespace {

// An anonymous array of n doubles, advised for huge pages or not (unmapped on destruction).
struct Array {
  Array(size_t n, bool huge) : bytes(n * sizeof(double)) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    ::madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    data = static_cast<double*>(p);
  }
  ~Array() {
    if (data) ::munmap(data, bytes);
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  double* get() const { return data; }
  double& operator[](int64_t i) const { return data[i]; }
  size_t bytes;
  double* data = nullptr;
};

}  // namespace

double MeasureTriadBandwidth(ThreadPool& pool, size_t bytes_per_array, int reps, bool huge_pages) {
  const int64_t n = static_cast<int64_t>(bytes_per_array / sizeof(double));
  const Array a(static_cast<size_t>(n), huge_pages), b(static_cast<size_t>(n), huge_pages),
      c(static_cast<size_t>(n), huge_pages);
  if (!a.get() || !b.get() || !c.get()) return 0.0;  // no memory for the arrays: no figure
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
