// DedupFilter: per-request sliding window of accepted steps within the current plan epoch.
#include "net/dedup.h"

namespace shoal::net {

const char* DedupVerdictName(DedupVerdict v) {
  switch (v) {
    case DedupVerdict::kAccept:
      return "accept";
    case DedupVerdict::kDuplicate:
      return "duplicate";
    case DedupVerdict::kStaleEpoch:
      return "stale epoch";
    case DedupVerdict::kTooOld:
      return "too old";
  }
  return "unknown";
}

void DedupFilter::SetEpoch(uint32_t epoch) {
  if (epoch <= epoch_) return;
  epoch_ = epoch;
  requests_.clear();
}

DedupVerdict DedupFilter::Check(const DataTag& tag) {
  if (tag.epoch < epoch_) return DedupVerdict::kStaleEpoch;
  SetEpoch(tag.epoch);
  auto [it, inserted] = requests_.try_emplace(tag.request_id);
  Window& w = it->second;
  if (inserted) {
    w.newest = tag.step;
    w.seen = 1;
    return DedupVerdict::kAccept;
  }
  if (tag.step > w.newest) {
    const uint64_t shift = tag.step - w.newest;
    w.seen = shift >= kWindow ? 0 : w.seen << shift;
    w.seen |= 1;
    w.newest = tag.step;
    return DedupVerdict::kAccept;
  }
  const uint64_t back = w.newest - tag.step;
  if (back >= kWindow) return DedupVerdict::kTooOld;
  const uint64_t bit = uint64_t{1} << back;
  if (w.seen & bit) return DedupVerdict::kDuplicate;
  w.seen |= bit;
  return DedupVerdict::kAccept;
}

}  // namespace shoal::net
