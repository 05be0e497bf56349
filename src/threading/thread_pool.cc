// ThreadPool: workers sleep on a condition variable between jobs and spin briefly when done.
#include "threading/thread_pool.h"

#include <sched.h>

#include <algorithm>

namespace shoal {

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
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, int)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::Run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  pending_.store(n_threads_ - 1, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    ++generation_;
  }
  cv_.notify_all();
  fn(0, n_threads_);
  // Workers finish within microseconds of the caller on balanced work; spin, then yield.
  while (pending_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  const int64_t workers = std::min<int64_t>(n_threads_, units);
  if (workers <= 1) {
    fn(0, n);
    return;
  }
  Run([&](int t, int) {
    if (t >= workers) return;
    const int64_t u0 = units * t / workers, u1 = units * (t + 1) / workers;
    const int64_t b = u0 * grain, e = std::min(n, u1 * grain);
    if (b < e) fn(b, e);
  });
}

}  // namespace shoal
