// Cost model of a pipeline stage: memory (weights, KV, buffers, overhead), time per token
// (roofline of memory bandwidth and matmul throughput) and link time. Shared by the placement
// (plan.h) and the cluster simulator.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"
#include "measure/node_info.h"
#include "planner/model_profile.h"

namespace shoal::planner {

// How activations travel between stages (the sender converts; DESIGN.md, node protocol).
enum class LinkDType { kF32, kF16, kQ8_0 };
std::string_view LinkDTypeName(LinkDType t);
Result<LinkDType> ParseLinkDType(std::string_view name);
// Bytes of one row of n_embd activations on the wire (q8_0: 34 bytes per 32 values).
uint64_t LinkRowBytes(LinkDType t, int64_t n_embd);

// What stages balance: the time of one decode token or of one prompt token.
enum class Balance { kDecode, kPrefill };

struct PlanConfig {
  int32_t max_num_seqs = 16;
  int32_t max_model_len = 2048;
  int32_t block_size = 16;
  DType kv_dtype = DType::kF16;
  int32_t max_batched_tokens = 512;
  LinkDType link_dtype = LinkDType::kF16;
  // Link defaults for nodes that report none: 1 Gb/s Ethernet (125 MB/s), the common link of
  // small clusters; 100 us one way, a LAN TCP hop through two kernels' network stacks.
  double link_bw = 125e6;
  double link_latency_s = 100e-6;
  // Context at which decode time is estimated (KV read and attention); 0 = max_model_len / 2,
  // the mean context of a sequence that fills its window.
  int32_t decode_context = 0;
  // Mean context a prompt token attends to in prefill; 0 = max_batched_tokens / 2 (one fresh
  // chunk of a full batch). Several prompts packed in one step each attend within their own.
  double prefill_context = 0;
  Balance balance = Balance::kDecode;
  uint64_t process_overhead = kProcessOverheadBytes;

  int32_t DecodeContext() const { return decode_context > 0 ? decode_context : max_model_len / 2; }
  double PrefillContext() const {
    return prefill_context > 0 ? prefill_context : max_batched_tokens / 2.0;
  }
};
Status ValidateConfig(const PlanConfig& c);

// KV tokens each layer of a stage holds: max_num_seqs full sequences, each rounded up to whole
// blocks (KvStore sizes its pool in blocks).
uint64_t KvTokensPerLayer(const PlanConfig& c);

struct StageMemory {
  uint64_t weights = 0;   // mapped tensors of the layers and the stage's extra tensors
  uint64_t kv = 0;        // KV pool for the layers
  uint64_t buffers = 0;   // activations and scratch (StageBufferBytes)
  uint64_t overhead = 0;  // the process itself
  uint64_t total() const { return weights + kv + buffers + overhead; }
};

// Memory of a stage serving [first, last) on `node` (which sets the attention-scratch threads).
StageMemory EstimateStageMemory(const ModelProfile& p, const measure::NodeInfo& node,
                                const PlanConfig& c, int32_t first, int32_t last);
// Buffers only for layers [first, last) (first == 0: the stage embeds tokens; last ==
// n_layer: it produces logits; the planes of hidden rows at both ends, HParams::hidden_planes).
uint64_t StageBuffers(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                      int32_t first, int32_t last);

// Seconds per token of layer `l` on `node`: decode of one sequence at DecodeContext(), or
// a prompt token in a max_batched_tokens batch (see docs/ARCHITECTURE.md, "planner").
double LayerDecodeSeconds(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                          int32_t l);
double LayerPrefillSeconds(const ModelProfile& p, const measure::NodeInfo& node,
                           const PlanConfig& c, int32_t l);
// Seconds of one decode step of `batch` sequences through layer l (weights read once, routed
// experts as far as the batch touches them, each sequence's cache at DecodeContext(); compute
// for batch tokens). LayerDecodeSeconds is batch 1.
double LayerDecodeStepSeconds(const ModelProfile& p, const measure::NodeInfo& node,
                              const PlanConfig& c, int32_t l, double batch);
// KV bytes per token of layer l and the fixed per-sequence state bytes (KDA) at c.kv_dtype.
uint64_t LayerKvBytesPerToken(const ModelProfile& p, const PlanConfig& c, int32_t l);
uint64_t LayerStateBytes(const ModelProfile& p, int32_t l);
// Seconds for the matmuls of `params` matrix parameters of the layer's weight types on `node`
// (2 flops each; the layer's type mix; 0 when the node reports no throughput).
double LayerMatmulSeconds(const ModelProfile& p, const measure::NodeInfo& node, int32_t l,
                          double params);
// Attention flops of one query token of layer l at context ctx.
double LayerAttentionFlops(const ModelProfile& p, int32_t l, double ctx);

// The rate `node` streams `cost`'s weights at `tokens` tokens: each matmul type at its own rate
// (measure::NodeInfo::WeightBw(tokens, type)), weighted by its bytes; the rest (norms) at the
// default.
double StreamBw(const measure::NodeInfo& node, const TensorCost& cost, double tokens);

// Seconds of the output head producing `rows` rows of logits in one step.
double HeadSeconds(const ModelProfile& p, const measure::NodeInfo& node, double rows);
// Seconds per decode token of a stage's extra tensors (the output head on the last stage).
double ExtrasDecodeSeconds(const ModelProfile& p, const measure::NodeInfo& node, int32_t first,
                           int32_t last);

struct StageTime {
  double decode_s = 0;
  double prefill_s = 0;
};
StageTime EstimateStageTime(const ModelProfile& p, const measure::NodeInfo& node,
                            const PlanConfig& c, int32_t first, int32_t last);
// One decode step of `batch` sequences through the stage (layers and extras).
double EstimateStageStepSeconds(const ModelProfile& p, const measure::NodeInfo& node,
                                const PlanConfig& c, int32_t first, int32_t last, double batch);

// One token's activations from `from` to the next stage: transfer (bytes / bandwidth) and
// latency.
struct LinkTime {
  double transfer_s = 0;
  double latency_s = 0;
  double total() const { return transfer_s + latency_s; }
};
// One activation row into layer next_layer (HParams::hidden_planes rows of the link type).
LinkTime EstimateLinkTime(const ModelProfile& p, const measure::NodeInfo& from, const PlanConfig& c,
                          int32_t next_layer);

}  // namespace shoal::planner
