// Tests of NodeInfo: validation, throughput lookup and the JSON round trip.
#include "measure/node_info.h"

#include <gtest/gtest.h>

#include <cmath>

namespace shoal::measure {
namespace {

NodeInfo Sample() {
  NodeInfo n;
  n.name = "n2";
  n.address = "10.0.0.7:7070";
  n.mem_limit = uint64_t{256} << 20;
  n.mem_bw = 12.75e9;
  n.matmul_flops = {{DType::kQ4_0, 81.5e9}, {DType::kF32, 33.25e9}, {DType::kQ6_K, 40e9}};
  n.isa = "avx2";
  n.n_threads = 6;
  n.link_bw = 117.5e6;
  n.link_latency_s = 83e-6;
  n.weight_bw = 9.5e9;
  n.weight_bw_batch = {9.5e9, 9e9, 7e9, 6e9};
  n.attn_flops = 4.25e9;
  n.type_bw_batch = {{DType::kQ6_K, {8e9, 4e9, 2e9, 1e9}}};
  n.corun_slowdown = {1.5, 1.25, 1.125, 1.0625};
  return n;
}

TEST(NodeInfoTest, JsonRoundTrip) {
  const NodeInfo n = Sample();
  const std::string json = NodeInfoToJson(n);
  auto back = NodeInfoFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << json;
  EXPECT_EQ(back->name, n.name);
  EXPECT_EQ(back->address, n.address);
  EXPECT_EQ(back->mem_limit, n.mem_limit);
  EXPECT_EQ(back->mem_bw, n.mem_bw);
  EXPECT_EQ(back->isa, n.isa);
  EXPECT_EQ(back->n_threads, n.n_threads);
  EXPECT_EQ(back->link_bw, n.link_bw);
  EXPECT_EQ(back->link_latency_s, n.link_latency_s);
  EXPECT_EQ(back->weight_bw, n.weight_bw);
  EXPECT_EQ(back->weight_bw_batch, n.weight_bw_batch);
  EXPECT_EQ(back->attn_flops, n.attn_flops);
  EXPECT_EQ(back->type_bw_batch, n.type_bw_batch);
  EXPECT_EQ(back->corun_slowdown, n.corun_slowdown);
  ASSERT_EQ(back->matmul_flops.size(), n.matmul_flops.size());
  for (const auto& [t, f] : n.matmul_flops) EXPECT_EQ(back->FlopsFor(t), f) << DTypeName(t);
  EXPECT_TRUE(ValidateNode(*back).ok());
  // A second trip gives the same text (types keyed by name, sorted).
  EXPECT_EQ(NodeInfoToJson(*back), json);
  EXPECT_NE(json.find("\"q4_0\":"), std::string::npos);
}

TEST(NodeInfoTest, MissingKeysKeepDefaultsAndUnknownKeysAreIgnored) {
  auto n = NodeInfoFromJson(R"({"name": "a", "mem_limit": 1024, "future_field": [1, 2]})");
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->name, "a");
  EXPECT_EQ(n->mem_limit, 1024u);
  EXPECT_EQ(n->n_threads, 1);
  EXPECT_TRUE(n->matmul_flops.empty());
  EXPECT_FALSE(ValidateNode(*n).ok());  // no bandwidth
}

TEST(NodeInfoTest, BadJsonIsAnError) {
  const char* bad[] = {
      "",
      "{",
      "[1, 2]",
      R"({"mem_limit": -5})",
      R"({"mem_limit": 1.5})",
      R"({"mem_limit": "256M"})",
      R"({"mem_bw": "fast"})",
      R"({"mem_bw": -1})",
      R"({"name": 7})",
      R"({"n_threads": 4294967296})",
      R"({"matmul_flops": [1]})",
      R"({"matmul_flops": {"q9_9": 1e9}})",
      R"({"matmul_flops": {"q4_0": "x"}})",
  };
  for (const char* j : bad) {
    auto n = NodeInfoFromJson(j);
    EXPECT_FALSE(n.ok()) << j;
  }
  auto n = NodeInfoFromJson(R"({"mem_bw": "fast"})");
  EXPECT_NE(n.status().message().find("mem_bw"), std::string::npos);
}

TEST(NodeInfoTest, InvalidUtf8NameDoesNotThrow) {
  NodeInfo n = Sample();
  n.name = "bad\xff\xfename";
  const std::string json = NodeInfoToJson(n);
  auto back = NodeInfoFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->mem_limit, n.mem_limit);
}

TEST(NodeInfoTest, FlopsForFallsBackToTheSlowestListedType) {
  NodeInfo n = Sample();
  EXPECT_EQ(n.FlopsFor(DType::kQ4_0), 81.5e9);
  EXPECT_EQ(n.FlopsFor(DType::kQ8_0), 33.25e9);
  n.matmul_flops.clear();
  EXPECT_EQ(n.FlopsFor(DType::kQ8_0), 0.0);
}

TEST(NodeInfoTest, WeightBandwidthByBatch) {
  NodeInfo n = Sample();
  // The table: 1, 2, 4, 8 tokens; between entries linear in log2(tokens); past 8 the last.
  EXPECT_EQ(n.WeightBw(1), 9.5e9);
  EXPECT_EQ(n.WeightBw(2), 9e9);
  EXPECT_DOUBLE_EQ(n.WeightBw(std::sqrt(8.0)), 8e9);  // halfway between 2 and 4 tokens
  EXPECT_EQ(n.WeightBw(8), 6e9);
  EXPECT_EQ(n.WeightBw(512), 6e9);
  EXPECT_EQ(n.WeightBw(0.5), 9.5e9);
  // No table: the 1-token figure, and without it the triad.
  n.weight_bw_batch.clear();
  EXPECT_EQ(n.WeightBw(4), 9.5e9);
  n.weight_bw = 0;
  EXPECT_EQ(n.WeightBw(4), n.mem_bw);
  // Attention: the measured speed, else the F32 matmul entry.
  EXPECT_EQ(n.AttnFlops(), 4.25e9);
  n.attn_flops = 0;
  EXPECT_EQ(n.AttnFlops(), 33.25e9);
  // Bad entries are errors naming the key.
  auto bad = NodeInfoFromJson(R"({"mem_limit": 1, "mem_bw": 1, "weight_bw_batch": [1e9, -2]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("weight_bw_batch"), std::string::npos);
  EXPECT_FALSE(NodeInfoFromJson(R"({"mem_limit": 1, "weight_bw_batch": 3})").ok());
  EXPECT_FALSE(NodeInfoFromJson(R"({"mem_limit": 1, "attn_flops": -1})").ok());
}

TEST(NodeInfoTest, WeightBandwidthByType) {
  NodeInfo n = Sample();
  // A listed type streams by its own table (one token at a time: half as fast per doubling).
  EXPECT_EQ(n.WeightBw(1, DType::kQ6_K), 8e9);
  EXPECT_EQ(n.WeightBw(4, DType::kQ6_K), 2e9);
  EXPECT_DOUBLE_EQ(n.WeightBw(std::sqrt(2.0), DType::kQ6_K), 6e9);
  // Any other type by the default table.
  EXPECT_EQ(n.WeightBw(4, DType::kQ4_0), n.WeightBw(4));
  EXPECT_EQ(n.WeightBw(4, DType::kQ8_0), 7e9);
  auto bad = NodeInfoFromJson(R"({"type_bw_batch": {"q6_k": [1e9, 0]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("q6_k"), std::string::npos);
  EXPECT_FALSE(NodeInfoFromJson(R"({"type_bw_batch": {"q9_9": [1e9]}})").ok());
  EXPECT_FALSE(NodeInfoFromJson(R"({"type_bw_batch": [1e9]})").ok());
}

TEST(NodeInfoTest, CoRunningSlowsEveryFigureByTheMeasuredFactor) {
  const NodeInfo n = Sample();
  const NodeInfo c = CoRunning(n);
  // Streaming at 2^i tokens by entry i, the triad by the 1-token entry, compute by the last.
  EXPECT_DOUBLE_EQ(c.WeightBw(1), 9.5e9 / 1.5);
  EXPECT_DOUBLE_EQ(c.WeightBw(4), 7e9 / 1.125);
  EXPECT_DOUBLE_EQ(c.WeightBw(8, DType::kQ6_K), 1e9 / 1.0625);
  EXPECT_DOUBLE_EQ(c.mem_bw, n.mem_bw / 1.5);
  EXPECT_DOUBLE_EQ(c.FlopsFor(DType::kQ4_0), 81.5e9 / 1.0625);
  EXPECT_DOUBLE_EQ(c.attn_flops, n.attn_flops / 1.0625);
  EXPECT_EQ(c.link_bw, n.link_bw);  // the network is not the memory bus
  EXPECT_TRUE(c.corun_slowdown.empty());
  // Not measured: the node as it is.
  NodeInfo alone = n;
  alone.corun_slowdown.clear();
  EXPECT_EQ(CoRunning(alone).WeightBw(1), alone.WeightBw(1));
  // A factor below 1 is not a slowdown.
  alone.corun_slowdown = {0.5};
  EXPECT_FALSE(ValidateNode(alone).ok());
}

TEST(NodeInfoTest, ValidateNames) {
  NodeInfo n = Sample();
  n.mem_limit = 0;
  auto s = ValidateNode(n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("n2"), std::string::npos);
  n = Sample();
  n.matmul_flops.push_back({DType::kQ8_0, 0});
  EXPECT_FALSE(ValidateNode(n).ok());
}

}  // namespace
}  // namespace shoal::measure
