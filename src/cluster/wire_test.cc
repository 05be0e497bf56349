// Tests of the step-work encoding: chunks with recurrent-state slots, state copies, and hidden
// rows of several planes (kimi-k3's banked attention-residual inputs) bit-identical over f32.
#include "cluster/wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace shoal::cluster {
namespace {

constexpr int64_t kEmbd = 64;

StepWork Sample(int planes) {
  StepWork w;
  w.copies = {{3, 4}};
  w.state_copies = {{0, 2}, {1, 5}};
  static const std::vector<int32_t> blocks_a = {0, 1}, blocks_b = {7};
  w.batch.Add(10, std::vector<int32_t>{5, 6, 7}, 0, blocks_a, true, false, 0, /*state_slot=*/3);
  w.batch.Add(11, std::vector<int32_t>{8}, 9, blocks_b, true);  // no state slot
  w.batch.tokens.clear();
  const int64_t n = planes * w.batch.n_rows() * kEmbd;
  for (int64_t i = 0; i < n; ++i) w.hidden.push_back(std::sin(0.37f * i) * 1e3f + 1e-7f * i);
  return w;
}

TEST(Wire, StepWorkRoundTripWithStateSlotsAndPlanes) {
  const StepWork w = Sample(3);
  std::vector<uint8_t> p;
  ASSERT_TRUE(EncodeStepWork(w, planner::LinkDType::kF32, kEmbd, &p).ok());
  StepWork got;
  Status s = DecodeStepWork(p, kEmbd, &got);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(got.batch.chunks.size(), 2u);
  EXPECT_EQ(got.batch.chunks[0].state_slot, 3);
  EXPECT_EQ(got.batch.chunks[1].state_slot, -1);
  EXPECT_EQ(got.batch.chunks[1].pos0, 9);
  ASSERT_EQ(got.state_copies.size(), 2u);
  EXPECT_EQ(got.state_copies[1].src, 1);
  EXPECT_EQ(got.state_copies[1].dst, 5);
  ASSERT_EQ(got.copies.size(), 1u);
  EXPECT_TRUE(got.hidden == w.hidden);  // f32 links: bit-identical, every plane
}

TEST(Wire, HeartbeatReplyCarriesMemoryAndLoad) {
  const ProcessMemory m{uint64_t{3} << 32 | 7, uint64_t{5} << 33};
  const NodeLoad load{11, 22, 33, 44, uint64_t{1} << 40};
  const std::vector<uint8_t> p = EncodeHeartbeatReply(m, load);
  ASSERT_EQ(p.size(), 56u);
  EXPECT_EQ(p[0], 7);  // little-endian on the wire
  auto back = DecodeHeartbeatReply(p);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->mem.rss_bytes, m.rss_bytes);
  EXPECT_EQ(back->mem.peak_rss_bytes, m.peak_rss_bytes);
  EXPECT_EQ(back->load.tokens, 11u);
  EXPECT_EQ(back->load.collective_calls, 44u);
  EXPECT_EQ(back->load.collective_bytes_in, uint64_t{1} << 40);
  // The memory alone (a node of an older build) decodes with a zero load.
  auto old = DecodeHeartbeatReply(std::span<const uint8_t>(p).first(16));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->mem.rss_bytes, m.rss_bytes);
  EXPECT_EQ(old->load.tokens, 0u);
  EXPECT_FALSE(DecodeHeartbeatReply({}).ok());  // an empty answer carries no figures
  EXPECT_FALSE(DecodeHeartbeatReply(std::span<const uint8_t>(p).first(15)).ok());
  EXPECT_FALSE(DecodeHeartbeatReply(std::span<const uint8_t>(p).first(55)).ok());
}

// An assignment names its group and the next stage's members; a malformed one is refused.
TEST(Wire, AssignmentCarriesTheGroup) {
  Assignment a;
  a.model_file = "m.gguf";
  a.first_layer = 2;
  a.last_layer = 5;
  a.next_nodes = {"127.0.0.1:9001", "127.0.0.1:9002"};
  a.tp_peers = {"127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003"};
  a.tp_rank = 2;
  a.tp_fast = true;
  auto back = DecodeAssign(EncodeAssign(a));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->next_nodes, a.next_nodes);
  EXPECT_EQ(back->tp_peers, a.tp_peers);
  EXPECT_EQ(back->tp_rank, 2);
  EXPECT_EQ(back->tp_size(), 3);
  EXPECT_TRUE(back->tp_fast);
  a.tp_rank = 3;  // past the group
  EXPECT_FALSE(DecodeAssign(EncodeAssign(a)).ok());
  a.tp_rank = 0;
  a.tp_peers = {"127.0.0.1:8001"};  // a group of one
  EXPECT_FALSE(DecodeAssign(EncodeAssign(a)).ok());
  a.tp_peers = {"127.0.0.1:8001", "nonsense"};
  EXPECT_FALSE(DecodeAssign(EncodeAssign(a)).ok());
  a.tp_peers.clear();
  const std::vector<uint8_t> p = EncodeAssign(a);
  for (size_t n = 1; n < p.size(); n += 7)  // every truncation fails cleanly
    EXPECT_FALSE(DecodeAssign(std::span<const uint8_t>(p).first(n)).ok());
  auto join = DecodeGroupJoin(EncodeGroupJoin(7, 3));
  ASSERT_TRUE(join.ok());
  EXPECT_EQ(join->first, 7u);
  EXPECT_EQ(join->second, 3);
  EXPECT_FALSE(DecodeGroupJoin(EncodeGroupJoin(7, 1000)).ok());
}

TEST(Wire, HiddenRowsMustBeWholePlanes) {
  StepWork w = Sample(2);
  w.hidden.resize(w.hidden.size() - kEmbd);  // 7 rows for a batch of 4
  std::vector<uint8_t> p;
  ASSERT_TRUE(EncodeStepWork(w, planner::LinkDType::kF16, kEmbd, &p).ok());
  StepWork got;
  EXPECT_FALSE(DecodeStepWork(p, kEmbd, &got).ok());
}

}  // namespace
}  // namespace shoal::cluster
