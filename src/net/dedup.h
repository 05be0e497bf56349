// DedupFilter: accepts each (request id, plan epoch, step) once and drops older epochs.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "net/frame.h"

namespace shoal::net {

enum class DedupVerdict {
  kAccept,      // first time seen: process it
  kDuplicate,   // this (request, epoch, step) was already accepted
  kStaleEpoch,  // epoch older than the current plan epoch
  kTooOld,      // step more than kWindow below the newest step of its request: cannot tell
};

const char* DedupVerdictName(DedupVerdict v);

// Receiver-side filter for data frames (DESIGN.md, "The node protocol").
// The current epoch only moves forward: a frame with a newer epoch (or SetEpoch) advances it and
// forgets everything recorded under the old one, since a new plan replays steps from scratch.
// Within an epoch each request keeps its newest accepted step and a bitmap of the kWindow steps
// below it (as IPsec's anti-replay window does), so memory per request is constant and steps
// may arrive out of order by up to kWindow. Not thread-safe: one filter per receiving link or
// guarded by the caller.
class DedupFilter {
 public:
  // Reordering tolerated per request. One link delivers in order, so reordering only comes from
  // merging links (at most a few per node); 64 steps is far beyond that and fits one word.
  static constexpr uint64_t kWindow = 64;

  explicit DedupFilter(uint32_t epoch = 0) : epoch_(epoch) {}

  DedupVerdict Check(const DataTag& tag);
  // Moves to `epoch` if newer (forgetting all requests); older values are ignored.
  void SetEpoch(uint32_t epoch);
  // Drops the state of a finished request (its later frames would be accepted again).
  void Forget(uint64_t request_id) { requests_.erase(request_id); }

  uint32_t epoch() const { return epoch_; }
  size_t tracked_requests() const { return requests_.size(); }

 private:
  struct Window {
    uint64_t newest = 0;
    uint64_t seen = 0;  // bit i: step newest - i was accepted
  };
  uint32_t epoch_;
  std::unordered_map<uint64_t, Window> requests_;
};

}  // namespace shoal::net
