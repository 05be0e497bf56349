// Tests of the node's self-measurement at a model's shapes: per-type weight streaming and the
// co-running slowdown (real kernels on this machine; figures checked for sense, not speed).
#include "measure/node_measure.h"

#include <gtest/gtest.h>

#include "threading/thread_pool.h"

namespace shoal::measure {
namespace {

// A small layer (1024-wide, FFN 2816): a round is still ~64 MiB, so every figure reads DRAM.
MeasureShape Small() {
  MeasureShape s;
  s.head_dim = 64;
  s.n_embd = 1024;
  s.n_ff = 2816;
  s.q_rows = 1024;
  s.kv_rows = 256;
  return s;
}

TEST(NodeMeasure, StreamsEachWeightType) {
  ThreadPool pool(1);
  for (DType t : {DType::kQ4_0, DType::kQ6_K, DType::kQ8_0}) {
    const double one = MeasureWeightStream(&pool, 1, Small(), t);
    const double eight = MeasureWeightStream(&pool, 8, Small(), t);
    // Bytes per second of a memory-bound read: more than 100 MB/s on anything that runs this,
    // and 8 tokens a round cannot read bytes faster than 8 rounds of 1 token would.
    EXPECT_GT(one, 1e8) << DTypeName(t);
    EXPECT_GT(eight, 0) << DTypeName(t);
    EXPECT_LT(eight, 8 * one) << DTypeName(t);
  }
}

TEST(NodeMeasure, MeasuresTheRequestedTypesAndTheCoRunSlowdown) {
  MeasureShape s = Small();
  s.types = {DType::kQ6_K, DType::kQ4_0};  // Q4_0 is the default table, not repeated
  const measure::NodeInfo n = MeasureNode("t", "", uint64_t{1} << 30, 1, s);
  ASSERT_EQ(n.weight_bw_batch.size(), 4u);
  ASSERT_EQ(n.type_bw_batch.size(), 1u);
  EXPECT_EQ(n.type_bw_batch[0].first, DType::kQ6_K);
  EXPECT_EQ(n.type_bw_batch[0].second.size(), 4u);
  EXPECT_TRUE(measure::ValidateNode(n).ok());
  // Two cores streaming at once: one factor per batch size, each at least 1.
  const std::vector<double> slow = MeasureCoRunSlowdown(s, 2);
  ASSERT_EQ(slow.size(), 4u);
  for (double f : slow) EXPECT_GE(f, 1.0);
  EXPECT_TRUE(MeasureCoRunSlowdown(s, 1).empty());  // one core has nobody to share with
}

}  // namespace
}  // namespace shoal::measure
