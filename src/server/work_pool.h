// WorkPool: a few threads for the server's CPU work (JSON parsing, chat templates, tokenizing,
// large response bodies), so the io thread only moves bytes and /health always answers.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace shoal::server {

class WorkPool {
 public:
  // `max_queued` tasks and `max_queued_bytes` of their inputs may wait for a thread: beyond
  // either TrySubmit refuses, so a burst of huge bodies cannot queue unbounded memory.
  WorkPool(int n_threads, size_t max_queued, size_t max_queued_bytes);
  ~WorkPool();  // finishes the task in hand on each thread, drops the queued ones
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Queues `fn`; false when the queue is full or the pool is stopping. A task that throws is
  // logged and dropped (its thread goes on).
  // `bytes`: what the task holds while it waits (e.g. its request body).
  bool TrySubmit(std::function<void()> fn, size_t bytes = 0);
  size_t n_queued() const;

 private:
  void Loop();

  const size_t max_queued_, max_queued_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, size_t>> queue_;  // (task, bytes)
  size_t queued_bytes_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace shoal::server
