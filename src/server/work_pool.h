// WorkPool: a few threads for the server's CPU work (JSON parsing, chat templates, tokenizing,
// large response bodies), so the io thread only moves bytes and /health always answers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace shoal::server {

class WorkPool {
 public:
  // `max_queued` bounds the tasks waiting for a thread: beyond it TrySubmit refuses, so a burst
  // of huge bodies cannot queue unbounded memory behind the threads.
  WorkPool(int n_threads, size_t max_queued);
  ~WorkPool();  // finishes the task in hand on each thread, drops the queued ones
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `fn`; false when the queue is full or the pool is stopping. A task that throws is
  // logged and dropped (its thread goes on).
  bool TrySubmit(std::function<void()> fn);
  size_t n_queued() const;

 private:
  void Loop();

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace shoal::server
