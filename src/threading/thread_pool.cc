// ThreadPool: workers spin briefly on a generation counter between jobs (a decode step runs
// ~180 short matmuls back to back), then sleep on a condition variable.
#include "threading/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace shoal {
namespace {

// How long an idle worker spins before sleeping. The gaps between the matmuls of one decode
// step (norms, RoPE, attention bookkeeping) are a few to tens of microseconds, and a futex
// wake-up costs 5-50 us on a VM; 200 us of spinning covers the gaps and idles quickly after.
constexpr auto kSpinTime = std::chrono::microseconds(200);

// Chunks per thread of ParallelForDynamic: 8 leaves at most 1/8 of a thread's share idle at the
// join when one thread stalls, for one atomic add per chunk (a 2048-row Q4_0 matvec: 16 chunks
// of 128 rows, 147 KB each, long enough sequential runs for the hardware prefetcher).
constexpr int64_t kDynamicChunksPerThread = 8;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

int HardwareThreads() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stop_flag_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin (checking the clock every 64 pauses), then sleep until the generation moves.
    bool fresh = false;
    const auto spin_end = std::chrono::steady_clock::now() + kSpinTime;
    for (int i = 0;; ++i) {
      if (generation_.load(std::memory_order_acquire) != seen ||
          stop_flag_.load(std::memory_order_acquire)) {
        fresh = true;
        break;
      }
      if ((i & 63) == 63 && std::chrono::steady_clock::now() > spin_end) break;
      CpuRelax();
    }
    if (!fresh) {
      std::unique_lock<std::mutex> lock(mu_);
      ++sleepers_;
      cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      --sleepers_;
    }
    if (stop_flag_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    const std::function<void(int, int)>* job = job_;
    (*job)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::Run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  job_ = &fn;
  bool wake;
  {
    // Under the mutex so that a worker about to sleep either sees the new generation in its
    // wait predicate or is already counted in sleepers_.
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    wake = sleepers_ > 0;
  }
  if (wake) cv_.notify_all();
  fn(0, n_threads_);
  // Workers finish within microseconds of the caller on balanced work; spin, then yield.
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < 4096) {
      CpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

// [0, n) in units of `grain`: how many units, and how many threads get work (0 when fn already
// ran inline because there is nothing to split).
struct ThreadPool::Split {
  int64_t grain, units, workers;
};

ThreadPool::Split ThreadPool::SplitOrRunInline(int64_t n, int64_t grain,
                                               const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return {1, 0, 0};
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  const int64_t workers = std::min<int64_t>(n_threads_, units);
  if (workers > 1) return {grain, units, workers};
  fn(0, n);
  return {grain, units, 0};
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  const Split sp = SplitOrRunInline(n, grain, fn);
  if (sp.workers == 0) return;
  const int64_t units = sp.units, workers = sp.workers;
  grain = sp.grain;
  Run([&](int t, int) {
    if (t >= workers) return;
    const int64_t u0 = units * t / workers, u1 = units * (t + 1) / workers;
    const int64_t b = u0 * grain, e = std::min(n, u1 * grain);
    if (b < e) fn(b, e);
  });
}

void ThreadPool::ParallelForDynamic(int64_t n, int64_t grain,
                                    const std::function<void(int64_t, int64_t)>& fn) {
  const Split sp = SplitOrRunInline(n, grain, fn);
  if (sp.workers == 0) return;
  const int64_t units = sp.units, workers = sp.workers;
  grain = sp.grain;
  const int64_t chunk = std::max<int64_t>(1, units / (workers * kDynamicChunksPerThread));
  std::atomic<int64_t> next{0};
  Run([&](int t, int) {
    if (t >= workers) return;
    for (;;) {
      const int64_t u0 = next.fetch_add(chunk, std::memory_order_relaxed);
      if (u0 >= units) return;
      fn(u0 * grain, std::min(n, (u0 + chunk) * grain));
    }
  });
}

}  // namespace shoal
