// Fixed pool of KV blocks: allocation, reference counts and per-sequence block tables.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace shoal {

// Hands out block ids [0, n_blocks) from a free list. Blocks carry reference counts so that
// sequences can share a prefix (copy-on-write is the caller's business).
class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t n_blocks);

  int32_t n_blocks() const { return static_cast<int32_t>(refs_.size()); }
  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }

  // Takes one free block (refcount 1) or returns -1 when none is left.
  int32_t Allocate();
  void AddRef(int32_t block);
  // Drops one reference; the block returns to the free list at zero.
  void Release(int32_t block);
  int32_t RefCount(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

 private:
  std::vector<int32_t> free_;  // LIFO: a just-freed (cache-warm) block is reused first
  std::vector<int32_t> refs_;
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
  // Returns every block to the allocator.
  void Clear(BlockAllocator& alloc);
};

}  // namespace shoal
