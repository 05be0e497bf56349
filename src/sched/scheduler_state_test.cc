// Scheduler tests for recurrent-state slots: allotted beside the block table, reserved for forks,
// freed at finish and recompute preemption; no swap for such models, and a prefix cache only
// through state snapshots taken at block ends.
#include <gtest/gtest.h>

#include <numeric>

#include "sched/scheduler.h"

namespace shoal {
namespace {

std::vector<int32_t> Toks(int32_t n, int32_t first = 1) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

SchedConfig StateCfg(int32_t slots) {
  SchedConfig c;
  c.block_size = 4;
  c.tiled_prompt_min = 0;
  c.state_slots = slots;
  c.enable_prefix_caching = true;  // forced off (no snapshot slots)
  c.swap_blocks = 8;               // forced to 0
  return c;
}

TEST(SchedulerStateTest, SlotsFollowTheSequenceAndAreFreedWithIt) {
  BlockAllocator alloc(64);
  Scheduler s(StateCfg(2), &alloc);
  EXPECT_FALSE(s.config().enable_prefix_caching);
  EXPECT_EQ(s.config().swap_blocks, 0);
  for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(s.Add(id, Toks(5)).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);  // the third waits for a slot, not for blocks
  EXPECT_EQ(p.chunks[0].state_slot, 0);
  EXPECT_EQ(p.chunks[1].state_slot, 1);
  EXPECT_EQ(s.n_free_state_slots(), 0);
  EXPECT_EQ(s.State(3), SeqState::kWaiting);
  EXPECT_EQ(s.StateSlot(3), -1);
  s.AppendToken(1, 9);
  s.Finish(2);  // frees slot 1
  EXPECT_EQ(s.n_free_state_slots(), 1);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq_id, 1);
  EXPECT_EQ(p.chunks[0].state_slot, 0);
  EXPECT_EQ(p.chunks[1].seq_id, 3);
  EXPECT_EQ(p.chunks[1].state_slot, 1);
  // Many sequences one after another reuse the same slots: nothing grows.
  for (int64_t id = 10; id < 50; ++id) {
    s.Finish(3);
    ASSERT_TRUE(s.Add(id, Toks(3)).ok());
    p = s.Schedule();
    ASSERT_FALSE(p.chunks.empty());
    EXPECT_EQ(p.chunks.back().state_slot, 1);
    s.Finish(id);
  }
  s.Finish(1);
  EXPECT_EQ(s.n_free_state_slots(), 2);
  EXPECT_TRUE(s.idle());
}

TEST(SchedulerStateTest, ForksTakeReservedSlotsAndCopyTheState) {
  BlockAllocator alloc(64);
  Scheduler s(StateCfg(4), &alloc);
  EXPECT_FALSE(s.Add(1, Toks(5), 5).ok());  // 5 choices can never get 5 of 4 slots
  ASSERT_TRUE(s.Add(1, Toks(5), 3).ok());
  ASSERT_TRUE(s.Add(2, Toks(5), 2).ok());  // needs 2 slots, only 1 left after seq 1
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].state_slot, 0);
  EXPECT_EQ(s.n_free_state_slots(), 1);
  ASSERT_TRUE(s.Fork(1, 11).ok());
  ASSERT_TRUE(s.Fork(1, 12).ok());
  EXPECT_FALSE(s.Fork(1, 13).ok());  // no reserve left
  for (int64_t id : {1, 11, 12}) s.AppendToken(id, 7);
  p = s.Schedule();
  ASSERT_EQ(p.state_copies.size(), 2u);
  EXPECT_EQ(p.state_copies[0].src, 0);
  EXPECT_EQ(p.state_copies[1].src, 0);
  EXPECT_NE(p.state_copies[0].dst, p.state_copies[1].dst);
  EXPECT_EQ(p.state_copies[0].dst, s.StateSlot(11));
  EXPECT_EQ(p.state_copies[1].dst, s.StateSlot(12));
  EXPECT_TRUE(s.Schedule().state_copies.empty());  // copies are planned once
  s.Finish(11);
  s.Finish(12);
  p = s.Schedule();
  ASSERT_FALSE(p.chunks.empty());
  EXPECT_EQ(p.chunks.back().seq_id, 2);  // its 2 slots are free now
  s.Finish(1);
  s.Finish(2);
  EXPECT_EQ(s.n_free_state_slots(), 4);
}

TEST(SchedulerStateTest, RecomputePreemptionFreesTheSlotAndRestartsAtZero) {
  BlockAllocator alloc(4);  // 16 tokens
  Scheduler s(StateCfg(2), &alloc);
  ASSERT_TRUE(s.Add(1, Toks(7)).ok());
  ASSERT_TRUE(s.Add(2, Toks(7, 50)).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  s.AppendToken(1, 1);
  s.AppendToken(2, 1);
  p = s.Schedule();  // position 7: both still in their 2nd block
  s.AppendToken(1, 2);
  s.AppendToken(2, 2);
  p = s.Schedule();  // position 8 needs a 3rd block each: seq 2 goes (recompute, not swap)
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], 2);
  EXPECT_TRUE(p.swap_out.empty());
  EXPECT_EQ(s.State(2), SeqState::kWaiting);
  EXPECT_EQ(s.StateSlot(2), -1);
  EXPECT_EQ(s.n_free_state_slots(), 1);
  s.Finish(1);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq_id, 2);
  EXPECT_EQ(p.chunks[0].start, 0);  // the state is rebuilt from position 0
  EXPECT_EQ(p.chunks[0].n, 9);
  EXPECT_GE(p.chunks[0].state_slot, 0);
}

TEST(SchedulerStateTest, SnapshotsAtBlockEndsServePrefixHits) {
  BlockAllocator alloc(64);
  SchedConfig c = StateCfg(2);
  c.state_snapshots = 2;         // slots 2 and 3
  c.max_num_batched_tokens = 4;  // chunks end on the 4-token blocks
  Scheduler s(c, &alloc);
  EXPECT_TRUE(s.config().enable_prefix_caching);
  EXPECT_EQ(s.config().swap_blocks, 0);
  ASSERT_TRUE(s.Add(1, Toks(10)).ok());
  StepPlan p = s.Schedule();  // [0, 4)
  EXPECT_TRUE(p.state_copies.empty());
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].state_slot, 0);
  p = s.Schedule();  // the state at 4 goes to a snapshot before [4, 8) runs
  ASSERT_EQ(p.state_copies.size(), 1u);
  EXPECT_EQ(p.state_copies[0].src, 0);
  EXPECT_EQ(p.state_copies[0].dst, 2);
  p = s.Schedule();  // snapshot at 8, then [8, 10)
  ASSERT_EQ(p.state_copies.size(), 1u);
  EXPECT_EQ(p.state_copies[0].dst, 3);
  EXPECT_EQ(s.n_state_snapshots(), 2);
  s.Finish(1);  // at 10: no block end, no snapshot
  // Shares [0, 8) and more: resumes at 8 from slot 3's snapshot, copied into its own slot 0.
  ASSERT_TRUE(s.Add(2, Toks(11)).ok());
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 8);
  EXPECT_EQ(s.CachedTokens(2), 8);
  ASSERT_EQ(p.state_copies.size(), 1u);
  EXPECT_EQ(p.state_copies[0].src, 3);
  EXPECT_EQ(p.state_copies[0].dst, p.chunks[0].state_slot);
  s.Finish(2);
  // A third snapshot evicts the least recently used one (slot 2: the state at 4).
  ASSERT_TRUE(s.Add(3, Toks(8, 100)).ok());
  p = s.Schedule();  // [0, 4)
  EXPECT_TRUE(p.state_copies.empty());
  p = s.Schedule();
  ASSERT_EQ(p.state_copies.size(), 1u);
  EXPECT_EQ(p.state_copies[0].dst, 2);
  s.Finish(3);
  EXPECT_EQ(s.n_state_snapshots(), 2);
  // DropAllKv forgets the snapshots with the cache.
  s.DropAllKv();
  EXPECT_EQ(s.n_state_snapshots(), 0);
}

TEST(SchedulerStateTest, HitsStopAtTheLastBlockWithASnapshot) {
  BlockAllocator alloc(64);
  SchedConfig c = StateCfg(2);
  c.state_snapshots = 2;
  c.max_num_batched_tokens = 8;  // one chunk end at 8: a snapshot after block 1, none after 0
  Scheduler s(c, &alloc);
  ASSERT_TRUE(s.Add(1, Toks(10)).ok());
  s.Schedule();
  s.Schedule();
  s.Finish(1);
  ASSERT_TRUE(s.Add(2, Toks(6)).ok());  // only block 0 could hit: it has no snapshot
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 0);
  EXPECT_TRUE(p.state_copies.empty());
  s.Finish(2);
  ASSERT_TRUE(s.Add(3, Toks(9)).ok());  // blocks 0 and 1: resumes at 8
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 8);
  ASSERT_EQ(p.state_copies.size(), 1u);
}

}  // namespace
}  // namespace shoal
