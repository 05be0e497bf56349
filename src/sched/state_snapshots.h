// Recurrent-state snapshots for the prefix cache: a bounded LRU pool of state slots, each
// holding a sequence's recurrent state at the end of a full block, keyed by that block's hash.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kvcache/block_allocator.h"

namespace shoal {

// Snapshot slots are state slots [first, first + n) of the executor's KvStore (after the
// sequences' slots). The pool only keeps the accounting; the scheduler emits the state copies
// (sequence slot -> snapshot slot to take one, snapshot slot -> sequence slot on a hit).
class StateSnapshots {
 public:
  StateSnapshots(int32_t first, int32_t n);

  int32_t size() const { return static_cast<int32_t>(hash_.size()); }
  int32_t n_held() const { return static_cast<int32_t>(by_hash_.size()); }
  // The slot holding the state after the block published under `hash`, or -1. A snapshot whose
  // block left the prefix cache (`alloc` no longer finds the hash) does not count.
  int32_t Find(uint64_t hash, const BlockAllocator& alloc) const;
  // Marks a snapshot most recently used (a prefix hit copied it).
  void Touch(int32_t slot);
  // A slot to write the snapshot of `hash` into, now registered under it: a free one, else one
  // whose block left the prefix cache, else the least recently used. -1 when the pool is empty.
  int32_t Take(uint64_t hash, const BlockAllocator& alloc);
  // Forgets every snapshot (the executor lost its state slots).
  void Clear();

 private:
  int32_t first_;
  std::vector<uint64_t> hash_;                     // per pool index, valid where used_ >= 0
  std::vector<int64_t> used_;                      // last use tick per pool index; -1 = free
  std::unordered_map<uint64_t, int32_t> by_hash_;  // hash -> pool index
  int64_t tick_ = 0;
};

}  // namespace shoal
