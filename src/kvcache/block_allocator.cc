// BlockAllocator (with the prefix cache's LRU) and BlockTable.
#include "kvcache/block_allocator.h"

#include "base/check.h"

namespace shoal {

BlockAllocator::BlockAllocator(int32_t n_blocks)
    : refs_(static_cast<size_t>(n_blocks), 0),
      cached_(static_cast<size_t>(n_blocks), 0),
      hash_(static_cast<size_t>(n_blocks), 0),
      prev_(static_cast<size_t>(n_blocks), -1),
      next_(static_cast<size_t>(n_blocks), -1) {
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
  by_hash_.reserve(static_cast<size_t>(n_blocks));
}

void BlockAllocator::LruUnlink(int32_t b) {
  const size_t i = static_cast<size_t>(b);
  if (prev_[i] >= 0)
    next_[static_cast<size_t>(prev_[i])] = next_[i];
  else
    head_ = next_[i];
  if (next_[i] >= 0)
    prev_[static_cast<size_t>(next_[i])] = prev_[i];
  else
    tail_ = prev_[i];
  prev_[i] = next_[i] = -1;
  --n_lru_;
}

void BlockAllocator::LruPushBack(int32_t b) {
  const size_t i = static_cast<size_t>(b);
  prev_[i] = tail_;
  next_[i] = -1;
  if (tail_ >= 0)
    next_[static_cast<size_t>(tail_)] = b;
  else
    head_ = b;
  tail_ = b;
  ++n_lru_;
}

int32_t BlockAllocator::Allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (head_ >= 0) {
    b = head_;  // evict the least recently released cached block
    LruUnlink(b);
    by_hash_.erase(hash_[static_cast<size_t>(b)]);
    cached_[static_cast<size_t>(b)] = 0;
  } else {
    return -1;
  }
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockAllocator::AddRef(int32_t block) {
  int32_t& r = refs_[static_cast<size_t>(block)];
  if (r == 0) {
    SHOAL_CHECK(IsCached(block));  // only a cached block may be revived
    LruUnlink(block);
  }
  ++r;
}

void BlockAllocator::Release(int32_t block) {
  int32_t& r = refs_[static_cast<size_t>(block)];
  SHOAL_CHECK(r > 0);
  if (--r > 0) return;
  if (IsCached(block)) {
    LruPushBack(block);
  } else {
    free_.push_back(block);
  }
}

int32_t BlockAllocator::Lookup(uint64_t hash) const {
  auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? -1 : it->second;
}

bool BlockAllocator::Publish(int32_t block, uint64_t hash) {
  SHOAL_CHECK(RefCount(block) > 0);
  if (IsCached(block) || by_hash_.count(hash)) return false;
  by_hash_.emplace(hash, block);
  hash_[static_cast<size_t>(block)] = hash;
  cached_[static_cast<size_t>(block)] = 1;
  return true;
}

void BlockAllocator::DropCache() {
  while (head_ >= 0) {
    const int32_t b = head_;
    LruUnlink(b);
    free_.push_back(b);
  }
  for (auto& c : cached_) c = 0;
  by_hash_.clear();
}

std::vector<int32_t> BlockAllocator::LruOrder() const {
  std::vector<int32_t> out;
  for (int32_t b = head_; b >= 0; b = next_[static_cast<size_t>(b)]) out.push_back(b);
  return out;
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
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) alloc.Release(*it);
  blocks.clear();
  n_tokens = 0;
}

}  // namespace shoal
