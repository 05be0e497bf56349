// Tests of the placement: balance by speed, memory limits, shortfall reports, 1..8 stages and
// TinyLlama-1.1B Q4_0 over four 256 MiB nodes.
#include "planner/plan.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "planner/test_models.h"

namespace shoal::planner {
namespace {

using testing::kGiB;
using testing::kMiB;
using testing::Node;
using testing::SynthProfile;

ModelProfile DeepNarrow() {
  auto p = SynthProfile(testing::DeepNarrowPreset(), DType::kQ8_0);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

ModelProfile TinyLlamaQ4() {
  auto preset = FindSynthPreset("1b");
  EXPECT_TRUE(preset.ok());
  auto p = SynthProfile(*preset, DType::kQ4_0);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return *p;
}

std::vector<int32_t> Counts(const Plan& plan) {
  std::vector<int32_t> c;
  for (const Stage& s : plan.stages) c.push_back(s.last_layer - s.first_layer);
  return c;
}

// Invariants of every plan: one stage per node in order, contiguous cover of all layers, each
// stage within its limit, the totals adding up.
void CheckPlan(const Plan& plan, const ModelProfile& p,
               const std::vector<measure::NodeInfo>& nodes) {
  ASSERT_EQ(plan.stages.size(), nodes.size());
  int32_t next = 0;
  double sum = 0;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage& s = plan.stages[i];
    EXPECT_EQ(s.node, static_cast<int32_t>(i));
    EXPECT_EQ(s.node_name, nodes[i].name);
    EXPECT_EQ(s.first_layer, next);
    EXPECT_GT(s.last_layer, s.first_layer);
    EXPECT_LE(s.mem.total(), nodes[i].mem_limit) << "stage " << i;
    EXPECT_EQ(s.mem.weights, p.StageWeightBytes(s.first_layer, s.last_layer));
    sum += s.time.decode_s + s.link.total();
    next = s.last_layer;
  }
  EXPECT_EQ(next, p.n_layer());
  if (nodes.size() > 1) sum += EstimateLinkTime(p, nodes.back(), plan.config, 0).latency_s;
  EXPECT_NEAR(plan.decode_s_per_token, sum, 1e-12);
  EXPECT_NEAR(plan.decode_tokens_per_s * plan.decode_s_per_token, 1.0, 1e-9);
  double slowest = 0;
  for (const Stage& s : plan.stages) slowest = std::max(slowest, s.time.decode_s);
  EXPECT_LE(plan.throughput_tokens_per_s, 1.0 / slowest * (1 + 1e-12));
}

TEST(PlanTest, EqualNodesGetEqualLayerCounts) {
  const ModelProfile p = DeepNarrow();
  PlanConfig c;
  c.process_overhead = uint64_t{16} << 20;  // DeepNarrow fills one 1 GiB node at 16 MiB
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE(n);
    std::vector<measure::NodeInfo> nodes;
    for (int i = 0; i < n; ++i) nodes.push_back(Node(fmt::format("n{}", i), kGiB));
    auto plan = MakePlan(p, nodes, c);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    CheckPlan(*plan, p, nodes);
    const std::vector<int32_t> counts = Counts(*plan);
    const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
    EXPECT_LE(*hi - *lo, 1) << FormatPlan(*plan);
  }
}

TEST(PlanTest, TwiceAsFastNodeGetsTwiceTheLayers) {
  const ModelProfile p = DeepNarrow();  // 30 layers
  PlanConfig c;
  {
    const std::vector<measure::NodeInfo> nodes = {Node("fast", kGiB, 2.0), Node("slow", kGiB, 1.0)};
    auto plan = MakePlan(p, nodes, c);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    CheckPlan(*plan, p, nodes);
    EXPECT_NEAR(Counts(*plan)[0], 20, 1) << FormatPlan(*plan);
  }
  {
    const std::vector<measure::NodeInfo> nodes = {Node("a", kGiB), Node("b", kGiB, 2.0),
                                                  Node("c", kGiB)};
    auto plan = MakePlan(p, nodes, c);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    CheckPlan(*plan, p, nodes);
    const std::vector<int32_t> counts = Counts(*plan);
    EXPECT_NEAR(counts[1], 15, 1) << FormatPlan(*plan);
    EXPECT_NEAR(counts[0], 7.5, 1);
    EXPECT_NEAR(counts[2], 7.5, 1);
  }
  // Prefill balance follows matmul throughput the same way.
  c.balance = Balance::kPrefill;
  const std::vector<measure::NodeInfo> nodes = {Node("slow", kGiB, 1.0), Node("fast", kGiB, 2.0)};
  auto plan = MakePlan(p, nodes, c);
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(Counts(*plan)[1], 20, 1) << FormatPlan(*plan);
}

TEST(PlanTest, MemoryLimitOverridesSpeed) {
  const ModelProfile p = DeepNarrow();
  PlanConfig c;
  // The fast node could take 2/3 of the layers by speed, but holds only what fits its limit.
  const uint64_t per_layer = EstimateStageMemory(p, Node("x", kGiB), c, 1, 2).weights +
                             EstimateStageMemory(p, Node("x", kGiB), c, 1, 2).kv;
  const uint64_t fixed = EstimateStageMemory(p, Node("x", kGiB), c, 0, 1).total() - per_layer;
  const uint64_t limit = fixed + 10 * per_layer + per_layer / 2;  // 10 layers fit, not 11
  const std::vector<measure::NodeInfo> nodes = {Node("fast", limit, 4.0), Node("slow", kGiB, 1.0)};
  auto plan = MakePlan(p, nodes, c);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  CheckPlan(*plan, p, nodes);
  EXPECT_EQ(Counts(*plan)[0], 10) << FormatPlan(*plan);
}

TEST(PlanTest, OneNodeIsFirstAndLastStage) {
  // A single node holds both ends (embedding and output head, no rows sent on): a limit of
  // exactly that total fits, one byte less does not.
  const ModelProfile p = DeepNarrow();
  PlanConfig c;
  const uint64_t need = EstimateStageMemory(p, Node("x", kGiB), c, 0, p.n_layer()).total();
  const std::vector<measure::NodeInfo> exact = {Node("one", need)};
  auto plan = MakePlan(p, exact, c);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  CheckPlan(*plan, p, exact);
  EXPECT_EQ(plan->stages[0].mem.total(), need);
  EXPECT_FALSE(MakePlan(p, {Node("one", need - 1)}, c).ok());
}

TEST(PlanTest, ImpossiblePlanReportsShortfallPerNode) {
  const ModelProfile p = TinyLlamaQ4();
  PlanConfig c;
  const std::vector<measure::NodeInfo> nodes = {Node("n0", 256 * kMiB), Node("n1", 256 * kMiB),
                                                Node("n2", 256 * kMiB)};
  auto plan = MakePlan(p, nodes, c);
  ASSERT_FALSE(plan.ok());
  const std::string& m = plan.status().message();
  std::cout << m << "\n";
  for (const char* want : {"node n0: layers [0, ", "node n1: layers", "node n2: layers",
                           "limit 256.0 MiB, short by", "total: needs", "limits 768.0 MiB"})
    EXPECT_NE(m.find(want), std::string::npos) << want;
}

TEST(PlanTest, OneNodeTooSmallForAnyLayer) {
  const ModelProfile p = DeepNarrow();
  PlanConfig c;
  const std::vector<measure::NodeInfo> nodes = {Node("big", 4 * kGiB), Node("tiny", 8 * kMiB)};
  auto plan = MakePlan(p, nodes, c);
  ASSERT_FALSE(plan.ok());
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("node tiny: layers [29, 30)"), std::string::npos) << m;
  EXPECT_NE(m.find("limit 8.0 MiB, short by"), std::string::npos) << m;
  EXPECT_NE(m.find("enough in total"), std::string::npos) << m;
  // The big node fits: its line ends at its limit, with no shortfall.
  const size_t big = m.find("node big: layers [0, 29)");
  ASSERT_NE(big, std::string::npos) << m;
  const std::string big_line = m.substr(big, m.find('\n', big) - big);
  EXPECT_EQ(big_line.find("short by"), std::string::npos) << big_line;
  EXPECT_NE(big_line.find("limit 4096.0 MiB"), std::string::npos) << big_line;
}

TEST(PlanTest, OneToEightStagesOfTheSameModel) {
  const ModelProfile p = TinyLlamaQ4();  // 22 layers
  PlanConfig c;
  double previous = 0;
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE(n);
    std::vector<measure::NodeInfo> nodes;
    for (int i = 0; i < n; ++i) nodes.push_back(Node(fmt::format("n{}", i), 2 * kGiB));
    auto plan = MakePlan(p, nodes, c);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    CheckPlan(*plan, p, nodes);
    // More stages: the pipeline's bound rises (the slowest stage has fewer layers).
    EXPECT_GT(plan->throughput_tokens_per_s, previous) << FormatPlan(*plan);
    previous = plan->throughput_tokens_per_s;
  }
}

TEST(PlanTest, OutputHeadCountsOnTheLastStage) {
  // TinyLlama's Q6_K output matrix (52.5 MiB) reads like ~2 layers (23.6 MiB each) per decode
  // token, so with equal nodes the last stage takes fewer layers.
  const ModelProfile p = TinyLlamaQ4();
  std::vector<measure::NodeInfo> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(Node(fmt::format("n{}", i), 2 * kGiB));
  auto plan = MakePlan(p, nodes, PlanConfig{});
  ASSERT_TRUE(plan.ok());
  const std::vector<int32_t> counts = Counts(*plan);
  EXPECT_LT(counts[3], counts[0]) << FormatPlan(*plan);
  double lo = 1e9, hi = 0;
  for (const Stage& s : plan->stages) {
    lo = std::min(lo, s.time.decode_s);
    hi = std::max(hi, s.time.decode_s);
  }
  EXPECT_LT(hi - lo, 1.05 * LayerDecodeSeconds(p, nodes[0], PlanConfig{}, 0));
}

TEST(PlanTest, InvalidInput) {
  const ModelProfile p = DeepNarrow();
  PlanConfig c;
  EXPECT_FALSE(MakePlan(p, {}, c).ok());
  std::vector<measure::NodeInfo> many;
  for (int i = 0; i < 31; ++i) many.push_back(Node(fmt::format("n{}", i), kGiB));
  auto r = MakePlan(p, many, c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("at most 30 nodes"), std::string::npos);
  c.kv_dtype = DType::kQ8_0;
  EXPECT_FALSE(MakePlan(p, {Node("a", kGiB)}, c).ok());
  c = PlanConfig{};
  measure::NodeInfo slow = Node("a", kGiB);
  slow.mem_bw = 0;
  EXPECT_FALSE(MakePlan(p, {slow}, c).ok());
  EXPECT_FALSE(EvaluatePlan(p, {Node("a", kGiB)}, c, {29}).ok());
  EXPECT_FALSE(EvaluatePlan(p, {Node("a", kGiB), Node("b", kGiB)}, c, {30, 0}).ok());
}

TEST(PlanTest, LinkTypeSetsHopTime) {
  const ModelProfile p = DeepNarrow();
  const std::vector<measure::NodeInfo> nodes = {Node("a", kGiB), Node("b", kGiB)};
  PlanConfig c;
  double prev = 1e9;
  for (LinkDType t : {LinkDType::kF32, LinkDType::kF16, LinkDType::kQ8_0}) {
    c.link_dtype = t;
    auto plan = MakePlan(p, nodes, c);
    ASSERT_TRUE(plan.ok());
    const LinkTime& l = plan->stages[0].link;
    EXPECT_DOUBLE_EQ(l.transfer_s, LinkRowBytes(t, 256) / c.link_bw);
    EXPECT_DOUBLE_EQ(l.latency_s, c.link_latency_s);
    EXPECT_LT(l.transfer_s, prev);
    prev = l.transfer_s;
    EXPECT_EQ(plan->stages[1].link.total(), 0.0);
  }
  EXPECT_EQ(LinkRowBytes(LinkDType::kQ8_0, 2048), 64u * 34);
  EXPECT_TRUE(ParseLinkDType("q8_0").ok());
  EXPECT_FALSE(ParseLinkDType("q4_0").ok());
}

// The "PS3 test": the ~640 MB TinyLlama-1.1B Q4_0 over four nodes of 256 MiB each.
TEST(PlanTest, TinyLlamaQ4OverFour256MiBNodes) {
  const ModelProfile p = TinyLlamaQ4();
  EXPECT_GT(p.total_bytes, 600'000'000u);
  EXPECT_LT(p.total_bytes, 680'000'000u);
  PlanConfig c;
  c.max_num_seqs = 4;
  c.max_model_len = 1024;  // 2048 no longer fits with the measured 34 MiB process overhead
  c.max_batched_tokens = 256;
  c.link_dtype = LinkDType::kQ8_0;
  std::vector<measure::NodeInfo> nodes;
  for (int i = 0; i < 4; ++i) nodes.push_back(Node(fmt::format("ps3-{}", i), 256 * kMiB));
  auto plan = MakePlan(p, nodes, c);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  CheckPlan(*plan, p, nodes);
  std::cout << FormatPlan(*plan);
}

}  // namespace
}  // namespace shoal::planner
