// FrameQueue: a mutex, a condition variable and a deque.
#include "cluster/frame_queue.h"

#include <chrono>

namespace shoal::cluster {

void FrameQueue::Push(net::Frame f) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    frames_.push_back(std::move(f));
  }
  cv_.notify_all();
}

void FrameQueue::Close(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!closed_) closed_ = why;
  }
  cv_.notify_all();
}

Result<std::optional<net::Frame>> FrameQueue::Pop(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms),
               [&] { return !frames_.empty() || closed_.has_value(); });
  if (!frames_.empty()) {
    net::Frame f = std::move(frames_.front());
    frames_.pop_front();
    return std::optional<net::Frame>(std::move(f));
  }
  if (closed_) return Errorf("{}", *closed_);
  return std::optional<net::Frame>();
}

}  // namespace shoal::cluster
