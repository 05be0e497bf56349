// Scheduler tests (no model, FakeClock): ordering, chunking, limits, preemption, swap, prefix
// caching, copy-on-write forks, cancellation.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace shoal {
namespace {

std::vector<int32_t> Seq(int32_t n, int32_t first = 1) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

SchedConfig Cfg(int32_t block_size, int32_t budget = 2048) {
  SchedConfig c;
  c.block_size = block_size;
  c.max_num_batched_tokens = budget;
  c.tiled_prompt_min = 0;
  return c;
}

TEST(SchedulerTest, ChunkedPrefillThenDecode) {
  BlockAllocator alloc(64);
  FakeClock clock(1000);
  Scheduler s(Cfg(4, 8), &alloc, &clock);
  ASSERT_TRUE(s.Add(1, Seq(10)).ok());
  ASSERT_TRUE(s.Add(2, Seq(3)).ok());
  clock.Advance(50);
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);  // budget 8 all used by seq 1
  EXPECT_EQ(p.chunks[0].n, 8);
  EXPECT_FALSE(p.chunks[0].samples);
  EXPECT_EQ(s.QueueMicros(1), 50);
  clock.Advance(70);
  EXPECT_EQ(s.QueueMicros(2), 120);  // still waiting
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq_id, 1);
  EXPECT_EQ(p.chunks[0].n, 2);
  EXPECT_TRUE(p.chunks[0].samples);
  EXPECT_EQ(p.chunks[1].seq_id, 2);
  EXPECT_EQ(p.chunks[1].n, 3);
  EXPECT_EQ(s.Table(1).blocks.size(), 3u);
  s.AppendToken(1, 7);
  s.AppendToken(2, 7);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].n, 1);
  EXPECT_EQ(p.chunks[0].start, 10);
  EXPECT_EQ(p.chunks[1].start, 3);
  s.Finish(1);
  s.Finish(2);
  EXPECT_EQ(alloc.n_free(), 64);
  EXPECT_TRUE(s.idle());
}

TEST(SchedulerTest, DecodesGoBeforePrefills) {
  BlockAllocator alloc(64);
  Scheduler s(Cfg(4, 6), &alloc);
  ASSERT_TRUE(s.Add(1, Seq(4)).ok());
  ASSERT_TRUE(s.Add(2, Seq(4)).ok());
  ASSERT_EQ(s.Schedule().chunks.size(), 2u);  // seq 1's 4 tokens + 2 of seq 2's
  s.AppendToken(1, 9);
  ASSERT_TRUE(s.Add(3, Seq(20)).ok());
  StepPlan p = s.Schedule();
  // Seq 1's decode first, then seq 2's remaining prefill, then a chunk of seq 3 to the budget.
  ASSERT_EQ(p.chunks.size(), 3u);
  EXPECT_EQ(p.chunks[0].seq_id, 1);
  EXPECT_EQ(p.chunks[0].n, 1);
  EXPECT_EQ(p.chunks[1].seq_id, 2);
  EXPECT_EQ(p.chunks[1].n, 2);
  EXPECT_EQ(p.chunks[2].seq_id, 3);
  EXPECT_EQ(p.chunks[2].n, 3);
  EXPECT_EQ(p.n_tokens(), 6);
}

TEST(SchedulerTest, MaxNumSeqsLimitsRunning) {
  BlockAllocator alloc(64);
  SchedConfig c = Cfg(4);
  c.max_num_seqs = 2;
  Scheduler s(c, &alloc);
  for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(s.Add(id, Seq(5)).ok());
  StepPlan p = s.Schedule();
  EXPECT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(s.n_running(), 2);
  EXPECT_EQ(s.n_waiting(), 1);
  s.Finish(1);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);  // seq 2 has no new token yet; seq 3 is admitted
  EXPECT_EQ(p.chunks[0].seq_id, 3);
}

TEST(SchedulerTest, RejectsImpossiblePrompts) {
  BlockAllocator alloc(2);
  Scheduler s(Cfg(4), &alloc);
  EXPECT_FALSE(s.Add(1, Seq(9)).ok());
  EXPECT_FALSE(s.Add(2, {}).ok());
  EXPECT_TRUE(s.Add(3, Seq(8)).ok());
  EXPECT_FALSE(s.Add(3, Seq(1)).ok());
}

// Three sequences decoding in a pool that runs out: the newest is preempted, freed at once,
// put in front of the waiting queue, and later recomputes prompt + generated tokens.
TEST(SchedulerTest, PreemptionByRecomputePicksTheNewest) {
  BlockAllocator alloc(6);
  Scheduler s(Cfg(4), &alloc);
  for (int64_t id = 1; id <= 3; ++id)
    ASSERT_TRUE(s.Add(id, Seq(4, 10 * static_cast<int32_t>(id))).ok());
  ASSERT_TRUE(s.Add(4, Seq(4)).ok());  // waits: no blocks after the first three grow
  StepPlan p = s.Schedule();
  EXPECT_EQ(p.chunks.size(), 4u);  // one block each
  s.Finish(4);
  for (int64_t id = 1; id <= 3; ++id) s.AppendToken(id, 1);
  p = s.Schedule();  // each decode needs a 2nd block: 3 used + 3 needed = 6: fits
  EXPECT_EQ(p.chunks.size(), 3u);
  EXPECT_TRUE(p.preempted.empty());
  for (int32_t step = 0; step < 3; ++step) {
    for (int64_t id = 1; id <= 3; ++id) s.AppendToken(id, 2);
    p = s.Schedule();
    EXPECT_TRUE(p.preempted.empty());
  }
  // Position 8 needs a 3rd block for each and none is free: seq 3 (the newest) goes.
  for (int64_t id = 1; id <= 3; ++id) s.AppendToken(id, 3);
  p = s.Schedule();
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], 3);
  EXPECT_EQ(s.State(3), SeqState::kWaiting);
  EXPECT_EQ(s.Table(3).blocks.size(), 0u);
  EXPECT_EQ(s.n_computed(3), 0);
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq_id, 1);
  EXPECT_EQ(p.chunks[1].seq_id, 2);
  EXPECT_EQ(s.preemptions_total(), 1);
  s.Finish(1);
  s.Finish(2);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq_id, 3);
  EXPECT_EQ(p.chunks[0].start, 0);
  EXPECT_EQ(p.chunks[0].n, 9);  // 4 prompt + 5 generated, recomputed
  EXPECT_TRUE(p.chunks[0].samples);
}

TEST(SchedulerTest, SwapOutAndBackIn) {
  BlockAllocator alloc(4);
  SchedConfig c = Cfg(4);
  c.swap_blocks = 4;
  Scheduler s(c, &alloc);
  ASSERT_TRUE(s.Add(1, Seq(8)).ok());
  ASSERT_TRUE(s.Add(2, Seq(6)).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  const std::vector<int32_t> blocks2 = s.Table(2).blocks;
  s.AppendToken(1, 5);
  s.AppendToken(2, 5);
  p = s.Schedule();  // seq 1 needs a 3rd block: seq 2 is swapped out
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], 2);
  ASSERT_EQ(p.swap_out.size(), 2u);
  EXPECT_EQ(p.swap_out[0].src, blocks2[0]);
  EXPECT_EQ(p.swap_out[1].src, blocks2[1]);
  EXPECT_TRUE(p.swap_in.empty());
  EXPECT_EQ(s.State(2), SeqState::kSwapped);
  EXPECT_EQ(s.n_swapped(), 1);
  EXPECT_EQ(s.swap_slots().n_free(), 2);
  EXPECT_EQ(s.n_computed(2), 6);  // kept: no recompute
  ASSERT_EQ(p.chunks.size(), 1u);
  const std::vector<BlockCopy> out = p.swap_out;
  s.Finish(1);
  p = s.Schedule();
  ASSERT_EQ(p.swap_in.size(), 2u);
  EXPECT_EQ(p.swap_in[0].src, out[0].dst);
  EXPECT_EQ(p.swap_in[1].src, out[1].dst);
  EXPECT_TRUE(p.swap_out.empty());
  EXPECT_EQ(s.State(2), SeqState::kRunning);
  EXPECT_EQ(s.swap_slots().n_free(), 4);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq_id, 2);
  EXPECT_EQ(p.chunks[0].start, 6);  // resumes: just the decode
  EXPECT_EQ(p.chunks[0].n, 1);
  EXPECT_EQ(s.Table(2).blocks[0], p.swap_in[0].dst);
  EXPECT_EQ(s.Table(2).blocks[1], p.swap_in[1].dst);
}

TEST(SchedulerTest, PrefixHitsAcrossRequests) {
  BlockAllocator alloc(16);
  SchedConfig c = Cfg(4);
  c.enable_prefix_caching = true;
  Scheduler s(c, &alloc);
  ASSERT_TRUE(s.Add(1, Seq(10)).ok());
  StepPlan p = s.Schedule();
  const std::vector<int32_t> blocks1 = s.Table(1).blocks;
  s.Finish(1);  // publishes its two full blocks; they stay cached
  EXPECT_EQ(alloc.n_cached(), 2);
  EXPECT_EQ(alloc.n_free(), 16);
  std::vector<int32_t> b = Seq(8);
  b.push_back(99);
  b.push_back(98);
  ASSERT_TRUE(s.Add(2, b).ok());
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 8);
  EXPECT_EQ(p.chunks[0].n, 2);
  EXPECT_EQ(s.CachedTokens(2), 8);
  EXPECT_EQ(s.Table(2).blocks[0], blocks1[0]);
  EXPECT_EQ(s.Table(2).blocks[1], blocks1[1]);
  // The whole prompt is cached: the last block is recomputed anyway (its logits are needed).
  ASSERT_TRUE(s.Add(3, Seq(8)).ok());
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 4);
  EXPECT_EQ(s.CachedTokens(3), 4);
  EXPECT_EQ(alloc.RefCount(blocks1[0]), 2);
  EXPECT_EQ(s.prefix_queries_total(), 10 + 10 + 8);
  EXPECT_EQ(s.prefix_hits_total(), 8 + 4);
}

TEST(SchedulerTest, TiledPromptsHashApartAndPublishOnlyTheirPrompt) {
  BlockAllocator alloc(16);
  SchedConfig c = Cfg(4);
  c.enable_prefix_caching = true;
  c.tiled_prompt_min = 8;
  Scheduler s(c, &alloc);
  ASSERT_TRUE(s.Add(1, Seq(9)).ok());  // tiled: tokens [0, 9) use the tiled numerics
  s.Schedule();
  for (int32_t t = 0; t < 8; ++t) {
    s.AppendToken(1, 50 + t);
    s.Schedule();
  }
  s.Finish(1);  // 17 tokens computed (4 full blocks), but only 2 blocks lie inside the prompt
  EXPECT_EQ(alloc.n_cached(), 2);
  ASSERT_TRUE(s.Add(2, Seq(6)).ok());  // not tiled: other numerics, no hit
  s.Schedule();
  EXPECT_EQ(s.CachedTokens(2), 0);
  ASSERT_TRUE(s.Add(3, Seq(12)).ok());  // tiled, same prefix: hits both prompt blocks
  s.Schedule();
  EXPECT_EQ(s.CachedTokens(3), 8);
}

TEST(SchedulerTest, LruEvictsLeastRecentlyFreedTailFirst) {
  BlockAllocator alloc(4);
  SchedConfig c = Cfg(2);
  c.enable_prefix_caching = true;
  Scheduler s(c, &alloc);
  ASSERT_TRUE(s.Add(1, Seq(5, 1)).ok());  // blocks: [1 2] [3 4] [5]
  s.Schedule();
  const std::vector<int32_t> a = s.Table(1).blocks;
  s.Finish(1);
  ASSERT_EQ(alloc.LruOrder(), (std::vector<int32_t>{a[1], a[0]}));  // tail block first
  ASSERT_TRUE(s.Add(2, Seq(3, 100)).ok());  // two blocks: the free list holds two
  s.Schedule();
  s.Finish(2);
  EXPECT_EQ(alloc.n_cached(), 3);
  ASSERT_TRUE(s.Add(3, Seq(7, 200)).ok());  // 4 blocks: evicts all but one cached block
  s.Schedule();
  EXPECT_EQ(alloc.n_cached(), 0);
  s.Finish(3);
  // A fresh pool: seq 1's tail block is evicted before its head.
  BlockAllocator alloc2(3);
  Scheduler s2(c, &alloc2);
  ASSERT_TRUE(s2.Add(1, Seq(5, 1)).ok());
  s2.Schedule();
  const std::vector<int32_t> a2 = s2.Table(1).blocks;
  s2.Finish(1);
  ASSERT_TRUE(s2.Add(2, Seq(2, 300)).ok());  // needs 1 block: takes the free one
  s2.Schedule();
  ASSERT_TRUE(s2.Add(3, Seq(2, 400)).ok());  // needs 1 more: evicts seq 1's tail block
  s2.Schedule();
  EXPECT_EQ(alloc2.IsCached(a2[0]), true);
  EXPECT_EQ(alloc2.IsCached(a2[1]), false);
  ASSERT_TRUE(s2.Add(4, Seq(3, 1)).ok());  // head [1 2] still hits
  s2.Finish(2);
  s2.Schedule();
  EXPECT_EQ(s2.CachedTokens(4), 2);
}

TEST(SchedulerTest, ForkSharesBlocksAndCopiesOnWrite) {
  BlockAllocator alloc(8);
  Scheduler s(Cfg(4), &alloc);
  ASSERT_TRUE(s.Add(1, Seq(6)).ok());  // [4 tokens] [2 tokens + 2 free slots]
  s.Schedule();
  ASSERT_TRUE(s.Fork(1, 2).ok());
  const std::vector<int32_t> shared = s.Table(1).blocks;
  EXPECT_EQ(s.Table(2).blocks, shared);
  EXPECT_EQ(alloc.RefCount(shared[0]), 2);
  EXPECT_EQ(alloc.n_used(), 2);
  s.AppendToken(1, 40);
  s.AppendToken(2, 41);
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  ASSERT_EQ(p.copies.size(), 1u);  // seq 1 copies the partial block; seq 2 then owns it alone
  EXPECT_EQ(p.copies[0].src, shared[1]);
  EXPECT_EQ(s.Table(1).blocks[1], p.copies[0].dst);
  EXPECT_EQ(s.Table(2).blocks[1], shared[1]);
  EXPECT_EQ(s.Table(1).blocks[0], shared[0]);  // full block: still shared
  EXPECT_EQ(alloc.RefCount(shared[0]), 2);
  EXPECT_EQ(alloc.RefCount(shared[1]), 1);
  EXPECT_EQ(s.Tokens(1).back(), 40);
  EXPECT_EQ(s.Tokens(2).back(), 41);
  EXPECT_FALSE(s.Fork(1, 2).ok());
  EXPECT_FALSE(s.Fork(9, 3).ok());
}

TEST(SchedulerTest, CancelFreesBlocksAtOnce) {
  BlockAllocator alloc(8);
  SchedConfig c = Cfg(4);
  c.swap_blocks = 8;
  Scheduler s(c, &alloc);
  ASSERT_TRUE(s.Add(1, Seq(16)).ok());
  ASSERT_TRUE(s.Add(2, Seq(16)).ok());
  ASSERT_TRUE(s.Add(3, Seq(4)).ok());
  s.Schedule();
  EXPECT_EQ(alloc.n_used(), 8);
  EXPECT_EQ(s.n_running(), 2);
  EXPECT_EQ(s.n_waiting(), 1);
  s.Finish(3);  // waiting
  EXPECT_EQ(s.n_waiting(), 0);
  s.AppendToken(1, 3);
  s.AppendToken(2, 3);
  const StepPlan p = s.Schedule();  // seq 1 needs a 5th block: seq 2 is swapped out
  ASSERT_EQ(p.swap_out.size(), 4u);
  EXPECT_EQ(s.State(2), SeqState::kSwapped);
  EXPECT_EQ(s.swap_slots().n_free(), 4);
  s.Finish(2);  // swapped: its swap slots come back
  EXPECT_EQ(s.swap_slots().n_free(), 8);
  EXPECT_EQ(alloc.n_used(), 5);
  s.Finish(1);  // running: its blocks come back at once
  EXPECT_EQ(alloc.n_used(), 0);
  EXPECT_TRUE(s.idle());
}

TEST(SchedulerTest, KvWasteCountsPartialLastBlocks) {
  BlockAllocator alloc(16);
  Scheduler s(Cfg(4), &alloc);
  ASSERT_TRUE(s.Add(1, Seq(5)).ok());  // 2 blocks, 3 slots unused
  ASSERT_TRUE(s.Add(2, Seq(8)).ok());  // 2 blocks, full
  s.Schedule();
  EXPECT_DOUBLE_EQ(s.KvWaste(), 3.0 / 16.0);
  EXPECT_DOUBLE_EQ(s.KvUsage(), 4.0 / 16.0);
  ASSERT_TRUE(s.Fork(1, 3).ok());  // shares the partial block: counted once
  EXPECT_DOUBLE_EQ(s.KvWaste(), 3.0 / 16.0);
}

// A held sequence keeps its blocks and plans nothing; the other sequence's chunks are the same
// as without it; a fork of a held sequence is held too; Finish forgets the hold.
TEST(SchedulerTest, HeldSequencePlansNothing) {
  BlockAllocator alloc(64);
  Scheduler s(Cfg(4), &alloc);
  ASSERT_TRUE(s.Add(1, Seq(6)).ok());
  ASSERT_TRUE(s.Add(2, Seq(5)).ok());
  StepPlan p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  s.AppendToken(1, 9);
  s.AppendToken(2, 9);
  s.Hold(1, true);
  EXPECT_TRUE(s.Held(1));
  EXPECT_EQ(s.n_unheld(), 1);
  const size_t blocks = s.Table(1).blocks.size();
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq_id, 2);
  EXPECT_EQ(s.Table(1).blocks.size(), blocks);
  ASSERT_TRUE(s.Fork(1, 3).ok());
  EXPECT_TRUE(s.Held(3));
  EXPECT_EQ(s.n_unheld(), 1);
  s.AppendToken(2, 9);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq_id, 2);
  s.Hold(1, false);
  s.AppendToken(2, 9);
  p = s.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);  // 1 runs again (its pending token), 2 decodes
  EXPECT_EQ(p.chunks[0].seq_id, 1);
  EXPECT_EQ(p.chunks[0].start, 6);
  s.Finish(3);
  EXPECT_EQ(s.n_unheld(), 2);
  s.Finish(1);
  s.Finish(2);
  EXPECT_EQ(s.n_unheld(), 0);
  EXPECT_EQ(alloc.n_free(), 64);
}

}  // namespace
}  // namespace shoal
