// StateSnapshots: the LRU pool of recurrent-state snapshots behind the prefix cache.
#include "sched/state_snapshots.h"

#include <algorithm>

#include "base/check.h"

namespace shoal {

StateSnapshots::StateSnapshots(int32_t first, int32_t n)
    : first_(first),
      hash_(static_cast<size_t>(std::max(0, n)), 0),
      used_(static_cast<size_t>(std::max(0, n)), -1) {}

int32_t StateSnapshots::Find(uint64_t hash, const BlockAllocator& alloc) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || alloc.Lookup(hash) < 0) return -1;
  return first_ + it->second;
}

void StateSnapshots::Touch(int32_t slot) {
  const size_t i = static_cast<size_t>(slot - first_);
  SHOAL_CHECK(i < used_.size() && used_[i] >= 0);
  used_[i] = ++tick_;
}

int32_t StateSnapshots::Take(uint64_t hash, const BlockAllocator& alloc) {
  if (hash_.empty()) return -1;
  SHOAL_CHECK(by_hash_.count(hash) == 0);
  // Free first, then stale (its block was evicted: the snapshot goes with or before its block),
  // then the least recently used.
  size_t pick = hash_.size(), stale = hash_.size(), lru = 0;
  for (size_t i = 0; i < hash_.size(); ++i) {
    if (used_[i] < 0) {
      pick = i;
      break;
    }
    if (stale == hash_.size() && alloc.Lookup(hash_[i]) < 0) stale = i;
    if (used_[i] < used_[lru]) lru = i;
  }
  if (pick == hash_.size()) pick = stale != hash_.size() ? stale : lru;
  if (used_[pick] >= 0) by_hash_.erase(hash_[pick]);
  hash_[pick] = hash;
  used_[pick] = ++tick_;
  by_hash_.emplace(hash, static_cast<int32_t>(pick));
  return first_ + static_cast<int32_t>(pick);
}

void StateSnapshots::Clear() {
  for (auto& u : used_) u = -1;
  by_hash_.clear();
}

}  // namespace shoal
