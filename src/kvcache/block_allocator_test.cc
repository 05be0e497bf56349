// BlockAllocator / BlockTable tests.
#include "kvcache/block_allocator.h"

#include <gtest/gtest.h>

#include "kvcache/kv_store.h"
#include "kvcache/prefix_hash.h"

namespace shoal {
namespace {

TEST(BlockAllocatorTest, AllocateReleaseRefcount) {
  BlockAllocator a(3);
  int32_t b0 = a.Allocate(), b1 = a.Allocate(), b2 = a.Allocate();
  EXPECT_EQ(a.Allocate(), -1);
  EXPECT_NE(b0, b1);
  EXPECT_NE(b1, b2);
  a.AddRef(b1);
  a.Release(b1);
  EXPECT_EQ(a.n_free(), 0);
  a.Release(b1);
  EXPECT_EQ(a.n_free(), 1);
  EXPECT_EQ(a.Allocate(), b1);  // LIFO reuse
  a.Release(b0);
  a.Release(b2);
  a.Release(b1);
  EXPECT_EQ(a.n_free(), 3);
}

TEST(BlockAllocatorTest, CachedBlocksParkInLruAndAreEvictedLast) {
  BlockAllocator a(3);
  const int32_t b0 = a.Allocate(), b1 = a.Allocate();
  EXPECT_TRUE(a.Publish(b0, 100));
  EXPECT_TRUE(a.Publish(b1, 101));
  EXPECT_FALSE(a.Publish(b1, 102));  // already published
  EXPECT_EQ(a.Lookup(101), b1);
  EXPECT_EQ(a.Lookup(7), -1);
  a.Release(b1);
  a.Release(b0);
  EXPECT_EQ(a.n_free(), 3);
  EXPECT_EQ(a.n_used(), 0);
  EXPECT_EQ(a.LruOrder(), (std::vector<int32_t>{b1, b0}));
  const int32_t b2 = a.Allocate();  // the free list first
  EXPECT_NE(b2, b0);
  EXPECT_NE(b2, b1);
  EXPECT_FALSE(a.Publish(b2, 100));  // hash taken: b2 stays private
  a.AddRef(b0);                      // a prefix hit revives b0
  EXPECT_EQ(a.LruOrder(), (std::vector<int32_t>{b1}));
  EXPECT_EQ(a.Allocate(), b1);  // evicts b1 and forgets its hash
  EXPECT_EQ(a.Lookup(101), -1);
  EXPECT_EQ(a.Lookup(100), b0);
  EXPECT_EQ(a.Allocate(), -1);
  EXPECT_EQ(a.n_cached(), 1);
}

TEST(BlockTableTest, ReserveGrowsAndFailsAtomically) {
  BlockAllocator a(4);
  BlockTable t;
  ASSERT_TRUE(t.Reserve(a, 17, 16).ok());
  EXPECT_EQ(t.blocks.size(), 2u);
  ASSERT_TRUE(t.Reserve(a, 32, 16).ok());
  EXPECT_EQ(t.blocks.size(), 2u);
  Status s = t.Reserve(a, 100, 16);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(t.blocks.size(), 2u);
  EXPECT_EQ(a.n_free(), 2);
  t.Clear(a);
  EXPECT_EQ(a.n_free(), 4);
}

TEST(PrefixHashTest, ChainsDependOnParentTokensAndTiling) {
  const std::vector<int32_t> t = {1, 2, 3, 4};
  const std::vector<int32_t> u = {1, 2, 3, 5};
  const uint64_t r0 = PrefixRootHash(false), r1 = PrefixRootHash(true);
  EXPECT_NE(r0, r1);
  EXPECT_EQ(PrefixBlockHash(r0, t), PrefixBlockHash(r0, t));
  EXPECT_NE(PrefixBlockHash(r0, t), PrefixBlockHash(r0, u));
  EXPECT_NE(PrefixBlockHash(r0, t), PrefixBlockHash(r1, t));
}

TEST(KvStoreTest, CopyBlockCopiesEveryLayer) {
  KvLayout l{
      .n_layers = 2, .k_dim = 4, .v_dim = 2, .dtype = DType::kF32, .block_size = 2, .n_blocks = 3};
  auto a = KvStore::Create(l);
  l.n_blocks = 1;
  auto b = KvStore::Create(l);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int32_t layer = 0; layer < 2; ++layer) {
    a->KBase(layer)[2 * 2 * 16 + 5] = static_cast<uint8_t>(7 + layer);
    a->VBase(layer)[2 * 2 * 8 + 3] = static_cast<uint8_t>(9 + layer);
  }
  CopyKvBlock(*a, 2, *b, 0);
  CopyKvBlock(*b, 0, *a, 0);
  for (int32_t layer = 0; layer < 2; ++layer) {
    EXPECT_EQ(b->KBase(layer)[5], 7 + layer);
    EXPECT_EQ(b->VBase(layer)[3], 9 + layer);
    EXPECT_EQ(a->KBase(layer)[5], 7 + layer);
  }
}

TEST(KvStoreTest, SizesFollowLayout) {
  KvLayout l{.n_layers = 2,
             .k_dim = 64,
             .v_dim = 32,
             .dtype = DType::kF16,
             .block_size = 16,
             .n_blocks = 8};
  auto s = KvStore::Create(l);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(l.TotalBytes(), 2u * 8 * 16 * (64 + 32) * 2);
  EXPECT_EQ(s->k_row_bytes(), 128u);
  EXPECT_EQ(s->KBase(1) - s->KBase(0), 8 * 16 * 128);
}

}  // namespace
}  // namespace shoal
