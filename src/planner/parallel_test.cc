// --parallel layouts: parsing, groups of consecutive nodes as stages with each member's slices
// and memory, split stages priced with their collectives, and the default that splits layers
// when they do not fit the nodes or when groups serve the configured load faster.
#include "planner/parallel.h"

#include <gtest/gtest.h>

#include "planner/capacity.h"
#include "planner/test_models.h"

namespace shoal::planner {
namespace {

using testing::kGiB;
using testing::kMiB;
using testing::Node;

ModelProfile TinyLlamaQ4() {
  auto preset = FindSynthPreset("1b");
  EXPECT_TRUE(preset.ok());
  auto p = testing::SynthProfile(*preset, DType::kQ4_0);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

TEST(Parallel, ParsesLayoutsAndRefusesNonsense) {
  auto p = ParseParallel("tp=2,pp=3");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tp, 2);
  EXPECT_EQ(p->pp, 3);
  EXPECT_TRUE(ParseParallel("").ok());
  EXPECT_TRUE(ParseParallel("tp=4,ep=4").ok());
  for (const char* bad :
       {"tp=0", "tp=65", "pp=-1", "tp=2,ep=3", "tp", "tp=x", "tp=2x", "dp=2", "tp=2,"})
    EXPECT_FALSE(ParseParallel(bad).ok()) << bad;
}

TEST(Parallel, GroupsOfConsecutiveNodesAreTheStages) {
  const ModelProfile prof = TinyLlamaQ4();
  std::vector<measure::NodeInfo> nodes;
  for (int i = 0; i < 5; ++i) nodes.push_back(Node("n" + std::to_string(i), 4 * kGiB));
  PlanConfig c;
  auto plan = MakeParallelPlan(prof, nodes, c, Parallel{2, 2, 0});
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->stages.size(), 2u);
  EXPECT_EQ(plan->stages[1].members, (std::vector<int32_t>{2, 3}));  // n4 stays unused
  EXPECT_EQ(plan->stages[1].node, 2);
  EXPECT_EQ(plan->stages[0].last_layer, plan->stages[1].first_layer);
  EXPECT_EQ(plan->stages[1].member_names[1], "n3");
  EXPECT_EQ(plan->stages[0].member_slices[1].rfind("heads [16, 32)", 0), 0u);
  // A member holds about half a stage's weights, but all of the first stage's token embedding.
  const StageMemory& whole = plan->stages[0].mem;
  const StageMemory& half = plan->stages[0].member_mem[0];
  EXPECT_LT(half.weights, whole.weights / 2 + prof.token_embd.bytes + kMiB);
  EXPECT_GT(half.weights, whole.weights / 2);
  EXPECT_NE(FormatPlan(*plan).find("split over 2 members (exact)"), std::string::npos);
}

TEST(Parallel, DefaultSplitsLayersWhenTheyDoNotFit) {
  const ModelProfile prof = TinyLlamaQ4();
  PlanConfig c;
  c.max_num_seqs = 4;
  c.max_model_len = 1024;
  c.max_batched_tokens = 64;
  // Nodes that hold a few layers each: a pipeline, no groups.
  std::vector<measure::NodeInfo> big(4, Node("n", 1 * kGiB));
  auto pipe = MakeParallelPlan(prof, big, c, Parallel{});
  ASSERT_TRUE(pipe.ok()) << pipe.status().message();
  for (const Stage& s : pipe->stages) EXPECT_LE(s.members.size(), 1u);
  // Two wide layers (~62 MiB each in Q4_0) on 96 MiB nodes (34 MiB of it the process): no
  // pipeline fits, groups do.
  SynthPreset wide;
  wide.name = "wide";
  wide.n_embd = 2048;
  wide.n_layer = 2;
  wide.n_head = wide.n_head_kv = 16;
  wide.n_ff = 16384;
  wide.n_vocab = 512;
  wide.n_ctx = 2048;
  auto wide_prof = testing::SynthProfile(wide, DType::kQ4_0);
  ASSERT_TRUE(wide_prof.ok());
  std::vector<measure::NodeInfo> small;
  for (int i = 0; i < 8; ++i) small.push_back(Node("s" + std::to_string(i), 96 * kMiB));
  EXPECT_FALSE(MakePlan(*wide_prof, small, c).ok());
  auto split = MakeParallelPlan(*wide_prof, small, c, Parallel{});
  ASSERT_TRUE(split.ok()) << split.status().message();
  EXPECT_GT(split->stages[0].members.size(), 1u);
  for (const Stage& s : split->stages)
    for (const StageMemory& m : s.member_mem) EXPECT_LE(m.total(), 96 * kMiB);
  // Nodes too small for any split: the error says what each way needs.
  std::vector<measure::NodeInfo> tiny(8, Node("t", 36 * kMiB));
  auto none = MakeParallelPlan(*wide_prof, tiny, c, Parallel{});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("split inside the layers"), std::string::npos);
}

TEST(Parallel, CollectivesPerLayer) {
  const ModelProfile prof = TinyLlamaQ4();
  const HParams& hp = prof.hp;
  // Exact: attention output, wo output, FFN activations, down output.
  const TpCollectives exact = LayerCollectives(hp, 0, false);
  ASSERT_EQ(exact.calls(), 4);
  EXPECT_EQ(exact.gathers[0], static_cast<double>(hp.n_head * hp.head_dim_v));
  EXPECT_EQ(exact.gathers[2], static_cast<double>(hp.n_ff));
  // Fast: the two projections' all-reduces of n_embd partial sums.
  const TpCollectives fast = LayerCollectives(hp, 0, true);
  ASSERT_EQ(fast.calls(), 2);
  EXPECT_TRUE(fast.gathers.empty());
  EXPECT_EQ(fast.reduces[0], static_cast<double>(hp.n_embd));
  // A MoE layer gathers the top-k experts' rows instead of the FFN's two.
  HParams moe = hp;
  moe.n_expert = 8;
  moe.n_expert_used = 2;
  const TpCollectives m = LayerCollectives(moe, 0, false);
  ASSERT_EQ(m.calls(), 3);
  EXPECT_EQ(m.gathers[2], 2.0 * static_cast<double>(hp.n_embd));
}

// One stage of TinyLlama-1.1B Q4_0 on a node with 10 GbE links, whole or split over 2 members.
struct Priced {
  CapacityReport one, two;
  StepCost one_step, two_step;
};
Priced PriceOneAndTwo(double collective_s, bool fast = false) {
  DevicePreset d;
  d.name = "n";
  d.node = Node("n", 2 * kGiB);
  d.node.link_bw = 1.25e9;
  d.node.link_latency_s = 20e-6;
  CapacityOptions o;
  o.context = 1024;
  o.stages = 1;
  o.collective_s = collective_s;
  o.tp_fast = fast;
  const ModelProfile prof = TinyLlamaQ4();
  Priced p;
  auto one = PlanCapacity(prof, d, o);
  o.tp = 2;
  auto two = PlanCapacity(prof, d, o);
  EXPECT_TRUE(one.ok() && two.ok());
  if (!one.ok() || !two.ok()) return p;
  p.one = *one;
  p.two = *two;
  p.one_step = StageDecodeCost(prof, d.node, one->config, one->stages[0], 1);
  p.two_step = StageDecodeCost(prof, d.node, two->config, two->stages[0], 1);
  return p;
}

TEST(Parallel, SplitStagesArePricedWithTheirCollectives) {
  const Priced p = PriceOneAndTwo(0);
  ASSERT_EQ(p.two.stages.size(), 1u);
  EXPECT_EQ(p.two.stages[0].dense_nodes, 2);
  EXPECT_EQ(p.two.nodes_per_replica, 2);
  EXPECT_EQ(p.two_step.members, 2);
  // Each member computes half; the collectives make up the rest.
  EXPECT_LT(p.two_step.busy_s, p.one_step.busy_s);
  EXPECT_GT(p.two_step.busy_s, p.one_step.busy_s / 2);
  EXPECT_DOUBLE_EQ(p.two_step.core_s(), 2 * p.two_step.busy_s);
  EXPECT_GT(p.two.decode_tps_single, 1.5 * p.one.decode_tps_single);
  // A collective call's cost beyond its bytes adds to every one of the 4 x 22 + 1 calls a token
  // (the logits' gather on the last stage).
  const Priced slow = PriceOneAndTwo(1e-3);
  const double calls = 4.0 * 22 + 1;
  EXPECT_NEAR(slow.two_step.busy_s - p.two_step.busy_s, calls * (1e-3 - 20e-6), 1e-9);
  EXPECT_LT(slow.two.decode_tps_single, slow.one.decode_tps_single);
  // Fast mode: half the calls.
  const Priced fast = PriceOneAndTwo(1e-3, true);
  EXPECT_LT(fast.two_step.busy_s, slow.two_step.busy_s - 40 * 1e-3);
}

TEST(Parallel, DefaultSplitsLayersForTheLoad) {
  const ModelProfile prof = TinyLlamaQ4();
  PlanConfig c;
  c.max_model_len = 1024;
  c.max_batched_tokens = 64;
  std::vector<measure::NodeInfo> nodes(2, Node("n", 2 * kGiB));
  nodes[1].name = "m";
  for (measure::NodeInfo& n : nodes) {
    n.link_bw = 1.25e9;
    n.link_latency_s = 20e-6;
    n.weight_bw = n.mem_bw;  // measured (an unmeasured node has none)
  }
  // One stream on fast links: two members halve its compute; the choice says why.
  c.max_num_seqs = 1;
  auto one = MakeParallelPlan(prof, nodes, c, Parallel{});
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->stages.size(), 1u);
  EXPECT_EQ(one->stages[0].members.size(), 2u);
  EXPECT_NE(one->choice.find("tp=2,pp=1 chosen"), std::string::npos) << one->choice;
  EXPECT_NE(FormatPlan(*one).find(one->choice), std::string::npos);
  // Unmeasured nodes: nothing to price a split on, the pipeline.
  std::vector<measure::NodeInfo> unmeasured = nodes;
  unmeasured[1].weight_bw = 0;
  auto blind = MakeParallelPlan(prof, unmeasured, c, Parallel{});
  ASSERT_TRUE(blind.ok());
  EXPECT_EQ(blind->stages.size(), 2u);
  // Many streams: the pipeline's two stages both busy serve more.
  c.max_num_seqs = 16;
  auto many = MakeParallelPlan(prof, nodes, c, Parallel{});
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(many->stages.size(), 2u);
  EXPECT_TRUE(many->choice.empty());
  // Slow links (5 ms a call): the collectives eat the gain.
  c.max_num_seqs = 1;
  for (measure::NodeInfo& n : nodes) n.link_latency_s = 5e-3;
  auto far = MakeParallelPlan(prof, nodes, c, Parallel{});
  ASSERT_TRUE(far.ok());
  EXPECT_EQ(far->stages.size(), 2u);
}

}  // namespace
}  // namespace shoal::planner
