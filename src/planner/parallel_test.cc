// --parallel layouts: parsing, groups of consecutive nodes as stages with each member's slices
// and memory, and the default that splits layers only when they do not fit the nodes.
#include "planner/parallel.h"

#include <gtest/gtest.h>

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

TEST(Parallel, DefaultSplitsLayersOnlyWhenTheyDoNotFit) {
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

}  // namespace
}  // namespace shoal::planner
