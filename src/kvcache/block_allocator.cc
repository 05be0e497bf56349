// BlockAllocator and BlockTable.
#include "kvcache/block_allocator.h"

#include "base/check.h"

namespace shoal {

BlockAllocator::BlockAllocator(int32_t n_blocks) : refs_(static_cast<size_t>(n_blocks), 0) {
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockAllocator::Allocate() {
  if (free_.empty()) return -1;
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockAllocator::AddRef(int32_t block) {
  SHOAL_CHECK(refs_[static_cast<size_t>(block)] > 0);
  ++refs_[static_cast<size_t>(block)];
}

void BlockAllocator::Release(int32_t block) {
  int32_t& r = refs_[static_cast<size_t>(block)];
  SHOAL_CHECK(r > 0);
  if (--r == 0) free_.push_back(block);
}

Status BlockTable::Reserve(BlockAllocator& alloc, int32_t n, int32_t block_size) {
  const int32_t need = BlocksFor(n, block_size) - static_cast<int32_t>(blocks.size());
  if (need > alloc.n_free())
    return Errorf("KV cache full: need {} more blocks, {} free", need, alloc.n_free());
  for (int32_t i = 0; i < need; ++i) blocks.push_back(alloc.Allocate());
  if (n > n_tokens) n_tokens = n;
  return Status::Ok();
}

void BlockTable::Clear(BlockAllocator& alloc) {
  for (int32_t b : blocks) alloc.Release(b);
  blocks.clear();
  n_tokens = 0;
}

}  // namespace shoal
