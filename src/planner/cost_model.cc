// Cost model of a pipeline stage: memory, roofline time per token, link time.
#include "planner/cost_model.h"

#include <algorithm>

namespace shoal::planner {
namespace {

uint64_t KvPerTokenLayer(const ModelProfile& p, const PlanConfig& c, int32_t l) {
  // ValidateConfig rejects KV types other than f16 and f32 first.
  return p.KvBytesPerToken(l, c.kv_dtype == DType::kF32 ? 4 : 2);
}

// Seconds for `flops_per_param` flops per matmul parameter over `cost`'s matrices on `node`
// (0 when the node reports no throughput: memory-bound model only).
double MatmulSeconds(const TensorCost& cost, const measure::NodeInfo& node,
                     double flops_per_param) {
  double s = 0;
  for (const TypedParams& t : cost.matmul) {
    const double f = node.FlopsFor(t.type);
    if (f > 0) s += flops_per_param * static_cast<double>(t.params) / f;
  }
  return s;
}

double AttnSeconds(const measure::NodeInfo& node, double flops) {
  const double f = node.AttnFlops();
  return f > 0 ? flops / f : 0;
}

}  // namespace

double StreamBw(const measure::NodeInfo& node, const TensorCost& cost, double tokens) {
  const double fallback = node.WeightBw(tokens);
  if (node.type_bw_batch.empty() || cost.bytes == 0) return fallback;
  double bytes_left = static_cast<double>(cost.bytes), seconds = 0;
  for (const TypedParams& t : cost.matmul) {
    // Bytes per parameter from a 256-wide row (a whole block of every type).
    const double bytes = static_cast<double>(RowBytes(t.type, 256).value_or(0)) / 256.0 *
                         static_cast<double>(t.params);
    seconds += bytes / node.WeightBw(tokens, t.type);
    bytes_left -= bytes;
  }
  seconds += std::max(0.0, bytes_left) / fallback;
  return seconds > 0 ? static_cast<double>(cost.bytes) / seconds : fallback;
}

std::string_view LinkDTypeName(LinkDType t) {
  switch (t) {
    case LinkDType::kF32:
      return "f32";
    case LinkDType::kF16:
      return "f16";
    case LinkDType::kQ8_0:
      return "q8_0";
  }
  return "?";
}

Result<LinkDType> ParseLinkDType(std::string_view name) {
  for (LinkDType t : {LinkDType::kF32, LinkDType::kF16, LinkDType::kQ8_0})
    if (LinkDTypeName(t) == name) return t;
  return Errorf("unknown link type '{}' (use f32, f16 or q8_0)", name);
}

uint64_t LinkRowBytes(LinkDType t, int64_t n_embd) {
  const uint64_t n = static_cast<uint64_t>(n_embd);
  switch (t) {
    case LinkDType::kF32:
      return 4 * n;
    case LinkDType::kF16:
      return 2 * n;
    case LinkDType::kQ8_0:
      return (n + 31) / 32 * 34;  // f16 scale + 32 int8 per block
  }
  return 4 * n;
}

Status ValidateConfig(const PlanConfig& c) {
  if (c.max_num_seqs < 1) return Errorf("plan: max_num_seqs must be >= 1");
  if (c.max_model_len < 1) return Errorf("plan: max_model_len must be >= 1");
  if (c.block_size < 1) return Errorf("plan: block_size must be >= 1");
  if (c.max_batched_tokens < 1) return Errorf("plan: max_batched_tokens must be >= 1");
  if (c.kv_dtype != DType::kF16 && c.kv_dtype != DType::kF32)
    return Errorf("plan: KV cache type {} not supported (use f16 or f32)", DTypeName(c.kv_dtype));
  if (!(c.link_bw > 0) || !(c.link_latency_s >= 0))
    return Errorf("plan: link bandwidth must be > 0 and latency >= 0");
  if (c.decode_context < 0 || !(c.prefill_context >= 0))
    return Errorf("plan: decode_context and prefill_context must be >= 0");
  return Status::Ok();
}

uint64_t KvTokensPerLayer(const PlanConfig& c) {
  const uint64_t bs = static_cast<uint64_t>(c.block_size);
  const uint64_t blocks_per_seq = (static_cast<uint64_t>(c.max_model_len) + bs - 1) / bs;
  return static_cast<uint64_t>(c.max_num_seqs) * blocks_per_seq * bs;
}

uint64_t StageBuffers(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                      int32_t first, int32_t last) {
  BufferInputs in;
  in.max_tokens = c.max_batched_tokens;
  // Logit rows per step: at most one per scheduled sequence.
  in.max_out_rows = std::min(c.max_num_seqs, c.max_batched_tokens);
  in.max_context = c.max_model_len;
  in.n_threads = node.n_threads;
  in.link_row_bytes = LinkRowBytes(c.link_dtype, p.hp.n_embd);
  in.planes_in = p.hp.hidden_planes(first);
  in.planes_out = p.hp.hidden_planes(last);
  // The stack a forward over [first, last) banks: the received planes and its own banks.
  in.banked = p.hp.hidden_planes(last) - 1;
  return StageBufferBytes(p, first == 0, last == p.n_layer(), in).total();
}

StageMemory EstimateStageMemory(const ModelProfile& p, const measure::NodeInfo& node,
                                const PlanConfig& c, int32_t first, int32_t last) {
  StageMemory m;
  m.weights = p.StageWeightBytes(first, last);
  for (int32_t l = first; l < last; ++l)
    m.kv += KvPerTokenLayer(p, c, l) * KvTokensPerLayer(c) +
            LayerStateBytes(p, l) * static_cast<uint64_t>(c.max_num_seqs);
  m.buffers = StageBuffers(p, node, c, first, last);
  m.overhead = c.process_overhead;
  return m;
}

uint64_t LayerKvBytesPerToken(const ModelProfile& p, const PlanConfig& c, int32_t l) {
  return KvPerTokenLayer(p, c, l);
}

uint64_t LayerStateBytes(const ModelProfile& p, int32_t l) { return p.Attn(l).state_bytes; }

double LayerAttentionFlops(const ModelProfile& p, int32_t l, double ctx) {
  const LayerAttn a = p.Attn(l);
  return a.flops_per_ctx * ctx + a.flops_fixed;
}

double LayerMatmulSeconds(const ModelProfile& p, const measure::NodeInfo& node, int32_t l,
                          double params) {
  const TensorCost& L = p.layers[static_cast<size_t>(l)];
  const double all = static_cast<double>(L.matmul_params());
  return all > 0 ? MatmulSeconds(L, node, 2.0) * params / all : 0;
}

double LayerDecodeStepSeconds(const ModelProfile& p, const measure::NodeInfo& node,
                              const PlanConfig& c, int32_t l, double batch) {
  const TensorCost& L = p.layers[static_cast<size_t>(l)];
  const double ctx = c.DecodeContext();
  const double expert_bytes =
      p.experts.empty() ? 0 : static_cast<double>(p.experts[static_cast<size_t>(l)].bytes);
  // Every dense weight byte once per step and the routed experts the batch touches, at the
  // kernels' streaming rate, or their matmuls' compute if that is longer; then attention, a
  // phase of its own after the projections: each sequence's cached K/V rows (or its fixed
  // state, read and written back) at the triad's rate, or its flops if longer. Pricing
  // attention inside the weights' roofline hid it: 4 sequences at ~100 positions on one core
  // here attend for ~3 ms of a 30 ms step that plan priced at 26.
  const double weights =
      static_cast<double>(L.bytes) - expert_bytes + expert_bytes * p.ExpertsTouched(batch);
  const double cache = batch * (ctx * static_cast<double>(KvPerTokenLayer(p, c, l)) +
                                2.0 * static_cast<double>(LayerStateBytes(p, l)));
  const double proj_s = std::max(weights / StreamBw(node, L, batch),
                                 batch * LayerMatmulSeconds(p, node, l, p.ActiveParams(l)));
  const double attn_s =
      std::max(cache / node.mem_bw, batch * AttnSeconds(node, LayerAttentionFlops(p, l, ctx)));
  return proj_s + attn_s;
}

double LayerDecodeSeconds(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                          int32_t l) {
  return LayerDecodeStepSeconds(p, node, c, l, 1.0);
}

double LayerPrefillSeconds(const ModelProfile& p, const measure::NodeInfo& node,
                           const PlanConfig& c, int32_t l) {
  const TensorCost& L = p.layers[static_cast<size_t>(l)];
  const double B = c.max_batched_tokens;
  const double expert_bytes =
      p.experts.empty() ? 0 : static_cast<double>(p.experts[static_cast<size_t>(l)].bytes);
  // A batch of B prompt tokens reads the weights (the experts it touches) once and writes B
  // rows of K/V; its tokens attend on average to PrefillContext() positions (B / 2 for a
  // fresh chunk of B).
  const double weights =
      static_cast<double>(L.bytes) - expert_bytes + expert_bytes * p.ExpertsTouched(B);
  const double mem_s = weights / B / StreamBw(node, L, B) +
                       static_cast<double>(KvPerTokenLayer(p, c, l)) / node.mem_bw;
  const double compute_s = LayerMatmulSeconds(p, node, l, p.ActiveParams(l)) +
                           AttnSeconds(node, LayerAttentionFlops(p, l, c.PrefillContext()));
  return std::max(mem_s, compute_s);
}

double HeadSeconds(const ModelProfile& p, const measure::NodeInfo& node, double rows) {
  TensorCost head = p.head;
  if (p.hp.tied_embeddings) head.Add(p.token_embd);
  // The weights once per step, the compute per row of logits.
  return std::max(static_cast<double>(head.bytes) / StreamBw(node, head, rows),
                  rows * MatmulSeconds(head, node, 2.0));
}

double ExtrasDecodeSeconds(const ModelProfile& p, const measure::NodeInfo& node, int32_t first,
                           int32_t last) {
  if (last != p.n_layer()) return 0;  // the first stage's embedding lookup reads one row
  return HeadSeconds(p, node, 1.0);
}

StageTime EstimateStageTime(const ModelProfile& p, const measure::NodeInfo& node,
                            const PlanConfig& c, int32_t first, int32_t last) {
  StageTime t;
  for (int32_t l = first; l < last; ++l) {
    t.decode_s += LayerDecodeSeconds(p, node, c, l);
    t.prefill_s += LayerPrefillSeconds(p, node, c, l);
  }
  t.decode_s += ExtrasDecodeSeconds(p, node, first, last);
  return t;
}

double EstimateStageStepSeconds(const ModelProfile& p, const measure::NodeInfo& node,
                                const PlanConfig& c, int32_t first, int32_t last, double batch) {
  double s = 0;
  for (int32_t l = first; l < last; ++l) s += LayerDecodeStepSeconds(p, node, c, l, batch);
  if (last == p.n_layer()) s += HeadSeconds(p, node, batch);  // the output head
  return s;
}

LinkTime EstimateLinkTime(const ModelProfile& p, const measure::NodeInfo& from, const PlanConfig& c,
                          int32_t next_layer) {
  const double bw = from.link_bw > 0 ? from.link_bw : c.link_bw;
  LinkTime t;
  t.transfer_s = static_cast<double>(LinkRowBytes(c.link_dtype, p.hp.n_embd)) *
                 p.hp.hidden_planes(next_layer) / bw;
  t.latency_s = from.link_latency_s > 0 ? from.link_latency_s : c.link_latency_s;
  return t;
}

}  // namespace shoal::planner
