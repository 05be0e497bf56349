// WorkPool: a bounded queue drained by a fixed set of threads.
#include "server/work_pool.h"

#include <exception>

#include "base/log.h"

namespace shoal::server {

WorkPool::WorkPool(int n_threads, size_t max_queued, size_t max_queued_bytes)
    : max_queued_(max_queued), max_queued_bytes_(max_queued_bytes) {
  for (int i = 0; i < (n_threads < 1 ? 1 : n_threads); ++i)
    threads_.emplace_back([this] { Loop(); });
}

WorkPool::~WorkPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool WorkPool::TrySubmit(std::function<void()> fn, size_t bytes) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ || queue_.size() >= max_queued_) return false;
    // One task always fits an empty queue, however large (the body limit bounds it).
    if (!queue_.empty() && queued_bytes_ + bytes > max_queued_bytes_) return false;
    queued_bytes_ += bytes;
    queue_.emplace_back(std::move(fn), bytes);
  }
  cv_.notify_one();
  return true;
}

size_t WorkPool::n_queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_.size();
}

void WorkPool::Loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      fn = std::move(queue_.front().first);
      queued_bytes_ -= queue_.front().second;
      queue_.pop_front();
    }
    try {
      fn();
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "server work task failed: {}", e.what());
    } catch (...) {
      Log(LogLevel::kError, "server work task failed with an unknown exception");
    }
  }
}

}  // namespace shoal::server
