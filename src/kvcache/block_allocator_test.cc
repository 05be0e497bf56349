// BlockAllocator / BlockTable tests.
#include "kvcache/block_allocator.h"

#include <gtest/gtest.h>

#include "kvcache/kv_store.h"

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
