// Scheduler tests: decode-first ordering, chunked prefill, block accounting.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

namespace shoal {
namespace {

TEST(SchedulerTest, ChunkedPrefillThenDecode) {
  BlockAllocator alloc(64);
  SchedConfig cfg;
  cfg.block_size = 4;
  cfg.max_num_batched_tokens = 8;
  Scheduler s(cfg, &alloc);
  ASSERT_TRUE(s.Add(1, 10).ok());
  ASSERT_TRUE(s.Add(2, 3).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);  // budget 8 all used by seq 1
  EXPECT_EQ(p.chunks[0].n, 8);
  EXPECT_FALSE(p.chunks[0].samples);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq_id, 1);
  EXPECT_EQ(p.chunks[0].n, 2);
  EXPECT_TRUE(p.chunks[0].samples);
  EXPECT_EQ(p.chunks[1].seq_id, 2);
  EXPECT_EQ(p.chunks[1].n, 3);
  EXPECT_EQ(s.Table(1).blocks.size(), 3u);
  s.AppendToken(1);
  s.AppendToken(2);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].n, 1);
  EXPECT_EQ(p.chunks[0].start, 10);
  EXPECT_EQ(p.chunks[1].start, 3);
  s.Finish(1);
  s.Finish(2);
  EXPECT_EQ(alloc.n_free(), 64);
}

TEST(SchedulerTest, RejectsImpossiblePrompts) {
  BlockAllocator alloc(2);
  SchedConfig cfg;
  cfg.block_size = 4;
  Scheduler s(cfg, &alloc);
  EXPECT_FALSE(s.Add(1, 9).ok());
  EXPECT_FALSE(s.Add(2, 0).ok());
  EXPECT_TRUE(s.Add(3, 8).ok());
  EXPECT_FALSE(s.Add(3, 1).ok());
}

TEST(SchedulerTest, WaitsWhenBlocksRunOut) {
  BlockAllocator alloc(2);
  SchedConfig cfg;
  cfg.block_size = 4;
  Scheduler s(cfg, &alloc);
  ASSERT_TRUE(s.Add(1, 8).ok());
  ASSERT_TRUE(s.Add(2, 4).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq_id, 1);
  s.Finish(1);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq_id, 2);
}

}  // namespace
}  // namespace shoal
