// Tests of capacity planning: the seed write-up's arithmetic, preset sizes checked by hand, KV
// per attention kind, node counts and placement modes.
#include "planner/capacity.h"

#include <gtest/gtest.h>

#include "planner/presets.h"

namespace shoal::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

TEST(SeedCheck, ReproducesTheWriteUp) {
  const SeedCheck s = ComputeSeedCheck();
  EXPECT_NEAR(s.pflops, 20.0, 1e-9);
  EXPECT_NEAR(s.memory_tib, 24.41, 0.005);
  EXPECT_NEAR(s.bandwidth_pbs, 2.56, 1e-9);
  EXPECT_NEAR(s.gib_7b_fp16, 13.04, 0.005);
  EXPECT_NEAR(s.gib_70b_q4, 32.59, 0.01);
  EXPECT_EQ(s.nodes_7b, 53);
  EXPECT_EQ(s.nodes_70b, 131);
  const std::string text = FormatSeedCheck(s);
  EXPECT_NE(text.find("KV cache"), std::string::npos);
  EXPECT_NE(text.find("209 MiB"), std::string::npos);
}

TEST(Presets, Llama8bSizesByHand) {
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kF16);
  ASSERT_TRUE(p.ok()) << p.status().message();
  // Per layer: q, o 4096^2; k, v 4096 x 1024; gate, up, down 4096 x 14336.
  const int64_t layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336;
  EXPECT_EQ(p->layers[0].matmul_params(), layer);
  EXPECT_EQ(p->layers[0].bytes, static_cast<uint64_t>(layer) * 2 + 2 * 4096 * 4);
  // 8.03B parameters in all (Meta's model card: 8.03B).
  const double total = 32.0 * layer + 2.0 * 128256 * 4096;
  EXPECT_NEAR(total / 1e9, 8.03, 0.01);
  // GQA: 2 * 8 heads * 128 * 2 bytes per layer and token.
  EXPECT_EQ(p->KvBytesPerToken(0, 2), 4096u);
}

TEST(Presets, MoeTotalsMatchPublishedCounts) {
  auto ds = ModelPresetProfile("deepseek-v3", std::nullopt);
  ASSERT_TRUE(ds.ok());
  CapacityOptions o;
  auto d = FindDevicePreset("h200-sxm");
  ASSERT_TRUE(d.ok());
  auto r = PlanCapacity(*ds, *d, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r->w.params / 1e9, 671, 2);          // DeepSeek-V3: 671B total (w/o the MTP layer)
  EXPECT_NEAR(r->w.active_params / 1e9, 37, 1.5);  // 37B activated
  // MLA caches 512 + 64 elements per layer and token.
  EXPECT_EQ(ds->KvBytesPerToken(5, 2), 576u * 2);
  EXPECT_EQ(r->n_mla, 61);

  auto k3 = ModelPresetProfile("kimi-k3", std::nullopt);
  ASSERT_TRUE(k3.ok());
  auto r3 = PlanCapacity(*k3, *d, o);
  ASSERT_TRUE(r3.ok()) << r3.status().message();
  EXPECT_NEAR(r3->w.params / 1e12, 2.8, 0.05);
  EXPECT_NEAR(r3->w.active_params / 1e9, 104, 3);
  EXPECT_EQ(r3->n_kda, 69);
  EXPECT_EQ(r3->n_mla, 24);
  EXPECT_EQ(k3->moe.n_expert, 896);
  // KDA keeps no per-token cache, a fixed state: 64 heads x 128 x 128 f32 + 3 conv rows x 3 x
  // 8192 f32.
  int32_t kda = 0;
  while (k3->Attn(kda).kind != AttnKind::kKda) ++kda;
  EXPECT_EQ(k3->KvBytesPerToken(kda, 2), 0u);
  EXPECT_EQ(k3->Attn(kda).state_bytes, 64u * 128 * 128 * 4 + 3u * 3 * 8192 * 4);
  // Routed experts are MXFP4 (17 bytes per 32 weights).
  EXPECT_EQ(k3->experts[5].matmul[0].type, DType::kMXFP4);
}

TEST(Capacity, NodeCountsAndPipelineOnSmallDevice) {
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("rpi5-8g");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 8192;
  o.concurrency = 4;
  auto r = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // 4.3 GiB of q4_0 weights fit one 7 GiB node; KV 4 x 8192 x 128 KiB = 4 GiB does not.
  EXPECT_EQ(r->nodes_weights, 1);
  EXPECT_EQ(r->kv_total, 4ull * 8192 * 32 * 4096);
  EXPECT_GE(r->nodes_weights_kv, 2);
  EXPECT_EQ(r->mode, "pipeline");
  EXPECT_EQ(r->nodes_used, r->nodes_per_replica);
  // Decode one sequence: every weight byte per token, at most bw / bytes.
  EXPECT_LT(r->decode_tps_single, d->node.mem_bw / static_cast<double>(r->w.total));
  EXPECT_GT(r->decode_tps_aggregate, r->decode_tps_stream);
  // Twice the nodes: two replicas of two sequences each. Memory-bound decode batches better
  // in one replica (weights read once for more sequences), so the aggregate does not double.
  o.nodes = 2 * r->nodes_per_replica;
  auto r2 = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->replicas, 2);
  EXPECT_EQ(r2->config.max_num_seqs, 2);
  EXPECT_EQ(r2->nodes_used, o.nodes);
  EXPECT_GT(r2->decode_tps_stream, r->decode_tps_stream);
  // Too few nodes is an error naming the need.
  o.nodes = 1;
  auto r3 = PlanCapacity(*p, *d, o);
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("does not fit"), std::string::npos);
}

TEST(Capacity, Ps3SplitsEveryKimiLayer) {
  auto p = ModelPresetProfile("kimi-k3", std::nullopt);
  auto d = FindDevicePreset("ps3");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 4096;
  o.concurrency = 16;
  auto r = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->mode, "layer split");
  // Bytes-only count <= placed count (whole experts per node waste some memory).
  EXPECT_LE(r->nodes_weights_kv, r->nodes_used);
  EXPECT_GT(r->nodes_weights, 1.35 * 1024 * kGiB / (209.0 * 1024 * 1024));
  EXPECT_GT(r->max_nodes_per_layer, 50);
  EXPECT_GT(r->experts_per_node, 0);
  // Decode per stream is bounded by the per-layer scatter/gather over 1 GbE: k = 16 experts x
  // 2 directions x 14 KiB rows at 125 MB/s is 3.7 ms per layer, 92 MoE layers.
  EXPECT_LT(r->decode_tps_single, 1.0 / (92 * 2 * 16 * 14336 / 125e6));
  EXPECT_GT(r->decode_tps_single, 0.1);
}

TEST(Capacity, HandComputedSingleNodeDecode) {
  // One llama-8b f16 on an H100 alone: decode = max(bytes / bw, flops / F) summed over layers,
  // the hop latency and the head. Memory term: 16.06 GB / 3.35 TB/s = 4.8 ms.
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kF16);
  auto d = FindDevicePreset("h100-sxm");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 2;  // negligible KV
  auto r = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->mode, "single node");
  const double bytes = static_cast<double>(r->w.total - r->w.embeddings);
  EXPECT_NEAR(1.0 / r->decode_tps_single, bytes / 3.35e12 + 2e-6, 0.02 * bytes / 3.35e12);
}

TEST(Capacity, ForcedStagesAndPipelineGroups) {
  // llama-8b q4_0 on H100s (one node would do): --stages 4 forces a 4-stage pipeline.
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("h100-sxm");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 1024;
  o.concurrency = 8;
  o.stages = 4;
  o.pipeline_groups = 1;
  auto r = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->stages.size(), 4u);
  EXPECT_EQ(r->groups, 1);
  EXPECT_EQ(r->micro_batches, 4);
  // One step in flight: sum of the stage latencies + 3 busiest occupancies per step, never
  // faster than the overlapped pipeline; the bubble is what the busiest stage idles.
  double sum = 0, busy = 0;
  for (const StageSpec& s : r->stages) {
    const StepCost c = StageDecodeCost(*p, d->node, r->config, s, r->micro_batch);
    sum += c.latency_s;
    busy = std::max(busy, c.busy_s);
  }
  EXPECT_NEAR(1.0 / r->decode_tps_stream, sum + 3 * busy, 1e-12);
  EXPECT_LE(r->decode_tps_aggregate, r->decode_tps_overlap);
  EXPECT_NEAR(r->bubble, 1.0 - 4 * busy / (sum + 3 * busy), 1e-9);
  // serve's default (0): one group per stage, each step one micro-batch of 2: the ideal pipeline.
  o.pipeline_groups = 0;
  auto ov = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(ov.ok());
  EXPECT_EQ(ov->groups, 4);
  EXPECT_EQ(ov->micro_batches, 4);
  EXPECT_DOUBLE_EQ(ov->decode_tps_aggregate, r->decode_tps_overlap);
  EXPECT_GT(ov->decode_tps_aggregate, r->decode_tps_aggregate);
  // 2 groups over 4 stages: each group step is cut into 2 micro-batches of 2; a round is the
  // longer of one group step (fill + drain) and the busiest stage's 4 occupancies.
  o.pipeline_groups = 2;
  auto g2 = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(g2.ok());
  EXPECT_EQ(g2->groups, 2);
  EXPECT_EQ(g2->micro_batches, 4);
  EXPECT_NEAR(1.0 / g2->decode_tps_stream, std::max(sum + busy, 4 * busy), 1e-12);
  // Never more groups than sequences.
  o.concurrency = 2;
  o.pipeline_groups = 0;
  auto few = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(few.ok());
  EXPECT_EQ(few->groups, 2);
  // Too many stages (more than layers) is an error.
  o.stages = 33;
  EXPECT_FALSE(PlanCapacity(*p, *d, o).ok());
}

TEST(Capacity, ServedTokensIncludePrefillAndStepOverhead) {
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("h100-sxm");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 1024;
  o.concurrency = 1;
  o.prompt = 100;
  o.output = 50;
  auto r = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r.ok());
  // One request alone: TTFT (its prefill step samples the first token), then 49 decode steps.
  EXPECT_NEAR(r->request_s, r->ttft_s + 49.0 / r->decode_tps_stream, 1e-12);
  EXPECT_NEAR(r->served_tps, 50.0 / r->request_s, 1e-9);
  // The prefill counts: slower than 50 tokens in 49 decode steps alone would be.
  EXPECT_LT(r->served_tps, 50.0 / (49.0 / r->decode_tps_stream));
  EXPECT_GT(r->ttft_s, 0);
  // Decode is priced at the request's mean context, 100 + 25.
  EXPECT_EQ(r->config.DecodeContext(), 125);
  // A fixed step overhead adds to every step: 50 steps per request.
  o.step_overhead_s = 1e-3;
  auto r2 = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r2.ok());
  EXPECT_NEAR(r2->request_s - r->request_s, 50 * 1e-3, 1e-9);
}

TEST(Capacity, ClosedLoopPrefillsTheFirstPromptAlone) {
  // 4 requests on one stage (one group): the first prompt is prefilled alone, the other 3 in the
  // next step; TTFT is their mean, and the round's prefill ends with that second step.
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("h100-sxm");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 1024;
  o.concurrency = 4;
  o.prompt = 100;
  o.output = 50;
  auto r = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->groups, 1);
  const double first = r->ttft_s;  // one prompt alone
  const double rest = r->request_s - 49.0 / r->decode_tps_stream - first;
  EXPECT_GT(rest, 0);
  EXPECT_NEAR(r->ttft_batch_s, first + 0.75 * rest, 1e-12);
  EXPECT_LT(r->ttft_batch_s, first + rest);  // the first request does not wait for the others
  // One request: no second step.
  o.concurrency = 1;
  auto one = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(one.ok());
  EXPECT_DOUBLE_EQ(one->ttft_batch_s, one->ttft_s);
}

TEST(Capacity, WeightsStreamAtTheKernelsRate) {
  // A node whose kernels read weights at half its triad decodes one stream about half as fast
  // (KV negligible at context 2); the table's 4-token entry prices a batch of 4.
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("rpi5-8g");
  ASSERT_TRUE(p.ok() && d.ok());
  d->node.matmul_flops.clear();  // memory-bound only
  CapacityOptions o;
  o.context = 2;
  auto triad = PlanCapacity(*p, *d, o);
  d->node.weight_bw = d->node.mem_bw / 2;
  auto half = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(triad.ok() && half.ok());
  EXPECT_NEAR(half->decode_tps_single / triad->decode_tps_single, 0.5, 0.01);
  d->node.weight_bw_batch = {d->node.mem_bw / 2, d->node.mem_bw / 2, d->node.mem_bw / 4};
  o.concurrency = 4;
  auto four = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(four.ok());
  // 4 sequences per step at a quarter of the triad: 4 tokens per (1 / (single / 2)).
  EXPECT_NEAR(four->decode_tps_aggregate / (4 * half->decode_tps_single / 2), 1.0, 0.02);
}

TEST(Capacity, EachWeightTypeStreamsAtItsOwnRate) {
  // Q8_0 layers on a memory-bound node whose Q8_0 kernel reads 2 or more tokens at half the
  // default rate: a step of 2 or 4 sequences (8B at Q8_0 needs 2 stages, so 2 groups of 2)
  // takes about twice as long; one sequence is unchanged.
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ8_0);
  auto d = FindDevicePreset("rpi5-8g");
  ASSERT_TRUE(p.ok() && d.ok());
  d->node.matmul_flops.clear();
  const double bw = d->node.mem_bw / 2;
  d->node.weight_bw_batch = {bw, bw, bw};
  CapacityOptions o;
  o.context = 2;
  o.concurrency = 4;
  auto plain = PlanCapacity(*p, *d, o);
  d->node.type_bw_batch = {{DType::kQ8_0, {bw, bw / 2, bw / 2}}};
  auto typed = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(plain.ok() && typed.ok());
  EXPECT_NEAR(typed->decode_tps_aggregate / plain->decode_tps_aggregate, 0.5, 0.03);
  EXPECT_NEAR(typed->decode_tps_single / plain->decode_tps_single, 1.0, 1e-9);
}

TEST(Capacity, OverlappedStagesOnOneMachineShareItsMemoryBus) {
  // 4 memory-bound stages on one 4-core machine whose cores stream at half speed when all do:
  // overlapped groups (4 sequences) decode about half as fast; one sequence (one group, one
  // stage at a time) and stages on machines of their own are unchanged.
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("h100-sxm");
  ASSERT_TRUE(p.ok() && d.ok());
  d->node.matmul_flops.clear();
  CapacityOptions o;
  o.context = 2;
  o.concurrency = 4;
  o.stages = 4;
  o.host_cores = 4;
  auto alone = PlanCapacity(*p, *d, o);
  d->node.corun_slowdown = {2, 2, 2, 2};
  auto shared = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(alone.ok() && shared.ok()) << shared.status().message();
  EXPECT_GT(shared->groups, 1);
  EXPECT_NEAR(shared->decode_tps_aggregate / alone->decode_tps_aggregate, 0.5, 0.05);
  EXPECT_DOUBLE_EQ(shared->decode_tps_single, alone->decode_tps_single);
  o.host_cores = 0;
  auto apart = PlanCapacity(*p, *d, o);
  o.concurrency = 1;
  o.host_cores = 4;
  auto one = PlanCapacity(*p, *d, o);
  d->node.corun_slowdown.clear();
  auto one_alone = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(apart.ok() && one.ok() && one_alone.ok());
  EXPECT_DOUBLE_EQ(apart->decode_tps_aggregate, alone->decode_tps_aggregate);
  EXPECT_DOUBLE_EQ(one->decode_tps_aggregate, one_alone->decode_tps_aggregate);
}

TEST(Capacity, StagesSharingCoresOfOneMachine) {
  // 4 stages of llama-8b, one group per stage (overlapped), every stage on one 2-core box: a
  // round lasts at least all stages' work over 2 cores, not the busiest stage's alone.
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("h100-sxm");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 1024;
  o.concurrency = 4;
  o.stages = 4;
  auto apart = PlanCapacity(*p, *d, o);
  o.host_cores = 2;
  auto shared = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(apart.ok() && shared.ok()) << shared.status().message();
  double sum = 0;
  for (const StageSpec& s : shared->stages)
    sum += StageDecodeCost(*p, d->node, shared->config, s, shared->micro_batch).busy_s;
  EXPECT_NEAR(1.0 / shared->decode_tps_stream,
              std::max(1.0 / apart->decode_tps_stream, shared->micro_batches * sum / 2), 1e-12);
  EXPECT_LT(shared->decode_tps_aggregate, 0.9 * apart->decode_tps_aggregate);
  // As many cores as stages: each stage has its own, as on separate machines.
  o.host_cores = 4;
  auto enough = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(enough.ok());
  EXPECT_DOUBLE_EQ(enough->decode_tps_aggregate, apart->decode_tps_aggregate);
  o.host_cores = -1;
  EXPECT_FALSE(PlanCapacity(*p, *d, o).ok());
}

TEST(Capacity, PromptsHoldSharedCoresWhileOtherGroupsQueue) {
  // Closed loop on 4 stages sharing 2 cores, one group per stage: each request's prompt passes
  // the stages alone while the other 3 groups queue behind it, so a round of requests lasts at
  // least its prompts one after another plus the decode work they left over 2 cores. A 1-token
  // prompt leaves the cores packed as before; a long one costs more than the packed price.
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("rpi5-8g");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 1024;
  o.concurrency = 4;
  o.stages = 4;
  o.output = 32;
  o.host_cores = 2;
  o.prompt = 1;
  auto tiny = PlanCapacity(*p, *d, o);
  o.prompt = 512;
  auto longp = PlanCapacity(*p, *d, o);
  o.host_cores = 0;
  auto apart = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(tiny.ok() && longp.ok() && apart.ok());
  ASSERT_EQ(longp->groups, 4);
  EXPECT_NEAR(tiny->request_s, tiny->prefill_batch_s + 31 / tiny->decode_tps_stream, 1e-9);
  const double packed = longp->prefill_batch_s + 31 / longp->decode_tps_stream;
  EXPECT_GT(longp->request_s, 1.05 * packed);
  // One prompt after another: at least the 4 prompts' latency.
  o.host_cores = 2;
  o.concurrency = 1;
  auto one = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(one.ok());
  EXPECT_GT(longp->request_s, 4 * one->ttft_s);
  // Machines of their own: the packed price, no queue behind a prompt on shared cores.
  EXPECT_NEAR(apart->request_s, apart->prefill_batch_s + 31 / apart->decode_tps_stream, 1e-9);
  // Overlapped groups' prompts follow each other a stage occupancy apart: the mean TTFT lies
  // halfway between the first prompt's (alone) and the last one's.
  EXPECT_NEAR(apart->ttft_batch_s, (apart->ttft_s + apart->prefill_batch_s) / 2, 1e-9);
  EXPECT_LT(apart->ttft_batch_s, 0.9 * apart->prefill_batch_s);
  // On 2 shared cores the 4 stages' prompts pass one another at most 2 at a time: successive
  // prompts' first tokens are half of all stages' prefill apart, not one stage's occupancy.
  // (Linear in the prompt's place, so the gap is (last - mean) / 1.5 for 4 prompts.)
  const double gap_shared = (longp->prefill_batch_s - longp->ttft_batch_s) / 1.5;
  const double gap_apart = (apart->prefill_batch_s - apart->ttft_batch_s) / 1.5;
  EXPECT_GT(gap_shared, 1.5 * gap_apart);
}

TEST(Capacity, MixedStepsReadWeightsOnce) {
  // One forward pass of 64 prompt rows and 3 decodes on a single whole-model stage: cheaper than
  // a prefill step plus a decode step of its own (the weights are read once), dearer than the
  // prompt alone (3 more rows of compute and 3 more logits rows).
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("rpi5-8g");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 512;
  auto r = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->stages.size(), 1u);
  const StageSpec& s = r->stages[0];
  const StepCost pre = StagePrefillCost(*p, d->node, r->config, s, 64);
  const StepCost dec = StageDecodeCost(*p, d->node, r->config, s, 3);
  const StepCost mix = StageMixedCost(*p, d->node, r->config, s, 67, 4, 32);
  EXPECT_GT(mix.busy_s, pre.busy_s);
  EXPECT_LT(mix.busy_s, 0.98 * (pre.busy_s + dec.busy_s));
  // One chunk from position 0 is the mixed cost of its rows at half their length.
  const StepCost same = StageMixedCost(*p, d->node, r->config, s, 64, 1, 32);
  EXPECT_DOUBLE_EQ(same.busy_s, pre.busy_s);
  // Four 64-token prompts packed in one step attend within their own prompt: cheaper than one
  // 256-token prompt, whose rows attend to 128 positions on average.
  const StepCost packed = StageMixedCost(*p, d->node, r->config, s, 256, 4, 32);
  const StepCost longer = StagePrefillCost(*p, d->node, r->config, s, 256);
  EXPECT_LT(packed.busy_s, longer.busy_s);
}

TEST(Capacity, LinkCpuIsTheSendingStagesTime) {
  // The network stacks' CPU per byte sent: the last stage's decode step of 4 sequences sends 4
  // rows of f32 logits and computes nothing else meanwhile, so its busy time grows by those
  // bytes times the cost, the first stage's by its 4 hidden rows. At 5 ns a byte that is less
  // than their time on the rpi5's 1 GbE, which it overlaps: the latency stays.
  auto p = ModelPresetProfile("llama-3.1-8b", DType::kQ4_0);
  auto d = FindDevicePreset("rpi5-8g");
  ASSERT_TRUE(p.ok() && d.ok());
  CapacityOptions o;
  o.context = 512;
  o.stages = 2;
  o.nodes = 2;
  auto r = PlanCapacity(*p, *d, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->stages.size(), 2u);
  measure::NodeInfo slow = d->node;
  slow.link_cpu_s_per_byte = 5e-9;
  const double logits = 4.0 * 4 * static_cast<double>(p->hp.n_vocab);
  const double hidden = 4.0 * static_cast<double>(LinkRowBytes(r->config.link_dtype, p->hp.n_embd));
  for (size_t i = 0; i < 2; ++i) {
    const StepCost a = StageDecodeCost(*p, d->node, r->config, r->stages[i], 4);
    const StepCost b = StageDecodeCost(*p, slow, r->config, r->stages[i], 4);
    const double bytes = i == 1 ? logits : hidden;
    EXPECT_DOUBLE_EQ(b.latency_s, a.latency_s) << "stage " << i;
    EXPECT_NEAR(b.busy_s - a.busy_s, bytes * 5e-9, 1e-12) << "stage " << i;
  }
  // Where the CPU outlasts the wire (50 ns a byte: 20 MB/s against 125), it is the hop's time.
  slow.link_cpu_s_per_byte = 50e-9;
  const StepCost a = StageDecodeCost(*p, d->node, r->config, r->stages[1], 4);
  const StepCost b = StageDecodeCost(*p, slow, r->config, r->stages[1], 4);
  EXPECT_NEAR(b.latency_s - a.latency_s, logits * 50e-9 - logits / 125e6, 1e-9);
  // And it survives a trip through the node file.
  auto back = measure::NodeInfoFromJson(measure::NodeInfoToJson(slow));
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->link_cpu_s_per_byte, 50e-9);
  slow.link_cpu_s_per_byte = -1;
  EXPECT_FALSE(measure::ValidateNode(slow).ok());
}

TEST(Presets, UnknownNamesAreErrors) {
  EXPECT_FALSE(FindDevicePreset("pdp-11").ok());
  EXPECT_FALSE(ModelPresetProfile("gpt-9", std::nullopt).ok());
  EXPECT_FALSE(FindLinkPreset("carrier-pigeon").ok());
  auto d =
      DeviceFromJson(R"({"name":"x","mem_limit":1073741824,"mem_bw":1e10,"power_w":5})", "x.json");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->power_w, 5);
}

}  // namespace
}  // namespace shoal::planner
