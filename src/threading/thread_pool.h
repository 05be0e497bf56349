// Persistent thread pool with a fork-join ParallelFor; the caller thread works too.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shoal {

class ThreadPool {
 public:
  // n_threads counts the calling thread: 1 means run everything inline.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index, n_threads) once on each of the pool's threads and waits for all.
  // fn must not call Run recursively.
  void Run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into contiguous chunks (one per thread, sizes differ by at most `grain`)
  // and calls fn(begin, end) for each non-empty chunk. Chunk boundaries are multiples of
  // `grain` so SIMD tiles never straddle threads.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The same contract, but [0, n) is cut into about kDynamicChunksPerThread chunks per thread
  // (multiples of `grain`) that threads take in turn from a shared counter: a thread slowed by
  // a neighbour (another process, an interrupt) takes fewer chunks instead of holding everyone
  // at the join. fn may run several times per thread; for work whose result does not depend on
  // which thread computes a range.
  void ParallelForDynamic(int64_t n, int64_t grain,
                          const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Split;
  Split SplitOrRunInline(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  void WorkerLoop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Written before generation_ is bumped (release) and read after it is seen (acquire).
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  int sleepers_ = 0;   // workers blocked on cv_ (guarded by mu_)
  bool stop_ = false;  // guarded by mu_; stop_flag_ mirrors it for spinning workers
  std::atomic<bool> stop_flag_{false};
  std::atomic<int> pending_{0};
};

// Number of hardware threads available to this process (at least 1).
int HardwareThreads();

}  // namespace shoal
