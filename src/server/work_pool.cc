// WorkPool: a bounded queue drained by a fixed set of threads.
#include "server/work_pool.h"

#include <exception>

#include "base/log.h"

namespace shoal::server {

WorkPool::WorkPool(int n_threads, size_t max_queued) : max_queued_(max_queued) {
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

bool WorkPool::TrySubmit(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ || queue_.size() >= max_queued_) return false;
    queue_.push_back(std::move(fn));
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
      fn = std::move(queue_.front());
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
