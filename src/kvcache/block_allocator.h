// Fixed pool of KV blocks: allocation, reference counts, the prefix cache and block tables.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace shoal {

// Hands out block ids [0, n_blocks). Blocks carry reference counts so that sequences can share
// a prefix (copy-on-write is the caller's business).
//
// Prefix cache: a full block may be published under a hash of its contents (see prefix_hash.h).
// A published block whose refcount drops to zero is not freed but parked in an LRU list; it
// can be revived by AddRef (a prefix hit) until Allocate runs out of free blocks and evicts
// the least recently released one (dropping its hash).
class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t n_blocks);

  int32_t n_blocks() const { return static_cast<int32_t>(refs_.size()); }
  // Blocks Allocate can hand out: the free list plus evictable cached blocks.
  int32_t n_free() const { return static_cast<int32_t>(free_.size()) + n_lru_; }
  // Blocks referenced by some sequence.
  int32_t n_used() const { return n_blocks() - n_free(); }
  // Published blocks (referenced or parked in the LRU).
  int32_t n_cached() const { return static_cast<int32_t>(by_hash_.size()); }
  int32_t n_evictable() const { return n_lru_; }

  // Takes a free block (refcount 1), evicting the least recently released cached block when
  // the free list is empty; returns -1 when neither is left.
  int32_t Allocate();
  // Adds a reference. A cached block at refcount 0 (a prefix hit) leaves the LRU.
  void AddRef(int32_t block);
  // Drops one reference; at zero a cached block enters the LRU (most recent end), any other
  // block returns to the free list.
  void Release(int32_t block);
  int32_t RefCount(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

  // The cached block published under `hash`, or -1.
  int32_t Lookup(uint64_t hash) const;
  // Publishes a referenced full block under `hash`. No-op (false) if the block is already
  // published or another block holds the hash (then the caller's copy stays private).
  bool Publish(int32_t block, uint64_t hash);
  bool IsCached(int32_t block) const { return cached_[static_cast<size_t>(block)] != 0; }
  // Forgets every published hash and frees the parked blocks: the KV rows behind them are gone
  // (a node holding them died). Referenced blocks stay referenced, unpublished.
  void DropCache();
  // Evictable blocks from least to most recently released (tests, diagnostics).
  std::vector<int32_t> LruOrder() const;

 private:
  void LruUnlink(int32_t b);
  void LruPushBack(int32_t b);

  std::vector<int32_t> free_;  // LIFO: a just-freed (cache-warm) block is reused first
  std::vector<int32_t> refs_;
  std::vector<uint8_t> cached_;
  std::vector<uint64_t> hash_;  // valid where cached_
  std::unordered_map<uint64_t, int32_t> by_hash_;
  // Intrusive doubly linked LRU over block ids (-1 terminated): no allocation on the hot path.
  std::vector<int32_t> prev_, next_;
  int32_t head_ = -1, tail_ = -1, n_lru_ = 0;
};

// The blocks holding one sequence's KV rows, in position order.
struct BlockTable {
  std::vector<int32_t> blocks;
  int32_t n_tokens = 0;  // positions written (or reserved)

  // Number of blocks needed for `n` tokens with `block_size` tokens per block.
  static int32_t BlocksFor(int32_t n, int32_t block_size) {
    return (n + block_size - 1) / block_size;
  }
  // Grows to hold `n` tokens; fails (and changes nothing) if the allocator runs out.
  Status Reserve(BlockAllocator& alloc, int32_t n, int32_t block_size);
  // Returns every block to the allocator, last block first (so that a prefix's tail is evicted
  // from the cache before its head, which more requests share).
  void Clear(BlockAllocator& alloc);
};

}  // namespace shoal
