// FrameQueue: frames handed from one thread to another (a node's link thread passes the
// coordinator's fetch answers to the thread loading an assignment), closable, with timed waits.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "base/status.h"
#include "net/frame.h"

namespace shoal::cluster {

class FrameQueue {
 public:
  void Push(net::Frame f);
  // No more frames: a waiting Pop fails with `why` (the link closed).
  void Close(const std::string& why);
  // The next frame; std::nullopt when none came within timeout_ms; an error once closed and
  // empty.
  Result<std::optional<net::Frame>> Pop(int64_t timeout_ms);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<net::Frame> frames_;
  std::optional<std::string> closed_;
};

}  // namespace shoal::cluster
