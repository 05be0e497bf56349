// Stage pricing for capacity plans: whole-layer stages through the cost model, layers split
// over a node group (dense tensors sharded, routed experts spread) built from the same terms.
#include <algorithm>
#include <cmath>

#include "planner/capacity.h"
#include "planner/parallel.h"

namespace shoal::planner {
namespace {

double Bw(const measure::NodeInfo& n, const PlanConfig& c) {
  return n.link_bw > 0 ? n.link_bw : c.link_bw;
}
double Lat(const measure::NodeInfo& n, const PlanConfig& c) {
  return n.link_latency_s > 0 ? n.link_latency_s : c.link_latency_s;
}

// The same node with its matmul throughput removed: the cost model then gives the memory term.
measure::NodeInfo MemoryOnly(const measure::NodeInfo& n) {
  measure::NodeInfo m = n;
  m.matmul_flops.clear();
  m.attn_flops = 0;
  return m;
}

// Tensor-parallel all-reduce of `rows` activation rows over d nodes: ring transfer of
// 2 (d - 1) / d of the data, and a tree's 2 log2(d) latencies.
double AllReduce(double rows, double row_bytes, int64_t d, double bw, double lat) {
  if (d <= 1) return 0;
  const double dd = static_cast<double>(d);
  return 2.0 * (dd - 1) / dd * rows * row_bytes / bw + 2.0 * std::ceil(std::log2(dd)) * lat;
}

struct Parts {
  double dense = 0, dense_mem = 0, experts = 0, net = 0, latency = 0;
};

// One layer split over s.dense_nodes + s.expert_nodes, for `tokens` rows, each attending to
// `ctx` cached positions (decode: DecodeContext(); prefill: tokens / 2).
Parts SplitLayer(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                 const StageSpec& s, double tokens, double ctx, bool prefill) {
  const int32_t l = s.first_layer;
  const double d = static_cast<double>(s.dense_nodes);
  const TensorCost& L = p.layers[static_cast<size_t>(l)];
  const TensorCost& X = p.experts[static_cast<size_t>(l)];
  const bool moe = p.moe.n_expert > 0 && X.bytes > 0;
  const double x_bytes = moe ? static_cast<double>(X.bytes) : 0;
  const double x_params = moe ? static_cast<double>(X.matmul_params()) : 0;
  const double dense_bytes = static_cast<double>(L.bytes) - x_bytes;
  const double dense_params = static_cast<double>(L.matmul_params()) - x_params;
  const double kv = static_cast<double>(LayerKvBytesPerToken(p, c, l));
  const double state = static_cast<double>(LayerStateBytes(p, l));
  const double attn = node.AttnFlops();
  Parts r;
  // Dense shard: 1/d of the weights and of the sequences' cache per node.
  const double cache = prefill ? tokens * kv : tokens * (ctx * kv + 2 * state);
  const double w_mem = dense_bytes / StreamBw(node, L, tokens) / d;
  const double c_mem = cache / node.mem_bw / d;
  const double mm = tokens * LayerMatmulSeconds(p, node, l, dense_params) / d;
  const double at = tokens * (attn > 0 ? LayerAttentionFlops(p, l, ctx) / attn : 0) / d;
  r.dense_mem = w_mem + c_mem;
  // Decode: the projections' roofline, then attention's (LayerDecodeStepSeconds).
  r.dense = prefill ? std::max(r.dense_mem, mm + at) : std::max(w_mem, mm) + std::max(c_mem, at);
  const double row = static_cast<double>(LinkRowBytes(c.link_dtype, p.hp.n_embd));
  const double bw = Bw(node, c), lat = Lat(node, c);
  r.net = AllReduce(tokens, row, s.dense_nodes, bw, lat);
  r.latency = s.dense_nodes > 1 ? 2.0 * std::ceil(std::log2(d)) * lat : 0;
  if (moe && s.expert_nodes > 0) {
    const double xn = static_cast<double>(s.expert_nodes);
    const double n_exp = static_cast<double>(p.moe.n_expert);
    const double k = static_cast<double>(p.moe.n_expert_used);
    const double per_node = std::ceil(n_exp / xn);
    const double one_expert = x_bytes / n_exp;
    // The busiest expert node: its share of the touched experts, at least one when any is.
    const double touched = std::min(per_node, std::max(1.0, per_node * p.ExpertsTouched(tokens)));
    const double assignments = std::max(1.0, tokens * k / xn);
    const double mem = touched * one_expert / StreamBw(node, X, assignments / touched);
    const double comp = assignments * LayerMatmulSeconds(p, node, l, x_params / n_exp);
    r.experts = std::max(mem, comp);
    // Scatter to the experts and gather back: 2 tokens k rows leave / enter the dense shards.
    r.net += 2.0 * tokens * k * row / (d * bw);
    r.latency += 2.0 * lat;
  } else if (moe) {
    // Experts on the dense node(s) themselves.
    const double mem = x_bytes * p.ExpertsTouched(tokens) / d / StreamBw(node, X, tokens);
    const double comp =
        tokens * LayerMatmulSeconds(p, node, l, x_params * p.moe.n_expert_used / p.moe.n_expert) /
        d;
    r.dense += std::max(mem, comp);
  }
  return r;
}

// The output head split over d nodes (vocabulary rows), `rows` logit rows.
Parts SplitHead(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                int64_t d, double rows) {
  TensorCost head = p.head;
  if (p.hp.tied_embeddings) head.Add(p.token_embd);
  const double dn = static_cast<double>(d);
  Parts r;
  r.dense_mem = static_cast<double>(head.bytes) / dn / StreamBw(node, head, rows);
  double comp = 0;
  for (const TypedParams& t : head.matmul) {
    const double f = node.FlopsFor(t.type);
    if (f > 0) comp += rows * 2.0 * static_cast<double>(t.params) / f / dn;
  }
  r.dense = std::max(r.dense_mem, comp);
  // Each shard returns its best candidates (top-k) for the sampler: latency only.
  r.latency = d > 1 ? Lat(node, c) : 0;
  return r;
}

double LinkCpu(const measure::NodeInfo& n, double bytes);

// A whole-layer range split over s.dense_nodes members as the runtime splits it (`--parallel
// tp=T`): each member computes 1/T of the stage's work (weights, cache, attention, the head's
// vocabulary; the norms and the embedding lookup are whole but small), then, layer by layer, the
// collectives of planner::LayerCollectives, and the last stage gathers the sampled rows' logits.
// A call costs s.collective_s (or the link's latency) plus its bytes in at the link's rate, or
// the network stacks' CPU for the bytes a member sends where that is longer; the members compute
// nothing meanwhile, so busy and latency both hold it all. `whole`: the stage's cost on one
// node; hop_bytes: member 0's send to the next stage.
StepCost SplitRange(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                    const StageSpec& s, const Parts& whole, double tokens, double sampled,
                    bool last, double hop_bytes) {
  const double T = static_cast<double>(s.dense_nodes);
  const double bw = Bw(node, c);
  const double call = s.collective_s > 0 ? s.collective_s : Lat(node, c);
  double calls = 0, comm = 0;
  auto add = [&](double rows, double floats, bool reduce) {
    // Bytes a member receives and sends: (T - 1) shares of 1/T (gather) or whole vectors.
    const double bytes = rows * floats * 4.0 * (T - 1) / (reduce ? 1.0 : T);
    calls += 1;
    comm += std::max(bytes / bw, LinkCpu(node, bytes));
  };
  for (int32_t l = s.first_layer; l < s.last_layer; ++l) {
    const TpCollectives lc = LayerCollectives(p.hp, l, s.tp_fast);
    for (double f : lc.gathers) add(tokens, f, false);
    for (double f : lc.reduces) add(tokens, f, true);
  }
  if (last) add(sampled, static_cast<double>(p.hp.n_vocab), false);
  StepCost out;
  out.members = s.dense_nodes;
  const double compute = whole.dense / T;
  const double hop = hop_bytes / bw, hop_cpu = LinkCpu(node, hop_bytes);
  out.busy_s = compute + calls * call + comm + hop_cpu;
  out.latency_s = compute + calls * call + comm + std::max(hop, hop_cpu) + Lat(node, c);
  out.bound = calls * call + comm > compute            ? "collectives"
              : whole.dense_mem >= 0.999 * whole.dense ? "memory bandwidth"
                                                       : "compute";
  return out;
}

// The network stacks' CPU for `bytes` sent (both ends): time the sending stage computes
// nothing else. It overlaps the bytes' time on the wire, so it adds to a step's latency only
// where it is the longer of the two.
double LinkCpu(const measure::NodeInfo& n, double bytes) { return bytes * n.link_cpu_s_per_byte; }

StepCost FromParts(const Parts& r, double hop_bytes, const measure::NodeInfo& node,
                   const PlanConfig& c) {
  StepCost s;
  const double hop = hop_bytes / Bw(node, c);
  const double net = r.net + hop;
  const double cpu = LinkCpu(node, hop_bytes);
  s.busy_s = std::max({r.dense + cpu, r.experts, net});
  s.latency_s = r.dense + r.experts + std::max(net, cpu) + r.latency + Lat(node, c);
  s.bound = net >= std::max(r.dense + cpu, r.experts)
                ? "network bandwidth"
                : (std::max(r.dense_mem, r.experts) >= 0.999 * std::max(r.dense, r.experts)
                       ? "memory bandwidth"
                       : "compute");
  return s;
}

// `tokens` rows through the stage, `sampled` of them producing logits on the last stage; a
// prefill step prices its rows as prompt tokens attending to `ctx` positions on average
// (compute per row, weights once), a decode step as sequences at the decode context.
StepCost Cost(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
              const StageSpec& s, double tokens, double sampled, bool prefill, double ctx) {
  const double row = static_cast<double>(LinkRowBytes(c.link_dtype, p.hp.n_embd));
  // The stage that produces logits (the output head, alone or after the last layers).
  const bool last = s.first_layer >= p.n_layer() ||
                    (!s.embed_only && !s.layer_group && s.last_layer >= p.n_layer());
  // The last stage sends the f32 logits of every sampled row to the coordinator, which samples
  // (the cluster runtime today): one row per sequence in decode, one per prompt chunk in prefill.
  const double hop_bytes = last ? 4.0 * static_cast<double>(p.hp.n_vocab) * sampled : row * tokens;
  if (s.embed_only) {
    StepCost e;
    e.busy_s = std::max(hop_bytes / Bw(node, c), LinkCpu(node, hop_bytes));
    e.latency_s = e.busy_s + Lat(node, c);
    e.bound = "network bandwidth";
    return e;
  }
  Parts r;
  if (s.first_layer >= p.n_layer()) {
    r = SplitHead(p, node, c, s.dense_nodes, sampled);
  } else if (s.layer_group) {
    r = SplitLayer(p, node, c, s, tokens, prefill ? ctx : c.DecodeContext(), prefill);
  } else if (prefill) {
    PlanConfig pc = c;
    pc.max_batched_tokens = std::max(1, static_cast<int32_t>(tokens));
    pc.prefill_context = ctx;
    const double t = EstimateStageTime(p, node, pc, s.first_layer, s.last_layer).prefill_s;
    r.dense = t * tokens;
    r.dense_mem =
        EstimateStageTime(p, MemoryOnly(node), pc, s.first_layer, s.last_layer).prefill_s * tokens;
    if (last) r.dense += HeadSeconds(p, node, sampled);
  } else {
    r.dense = EstimateStageStepSeconds(p, node, c, s.first_layer, s.last_layer, tokens);
    r.dense_mem =
        EstimateStageStepSeconds(p, MemoryOnly(node), c, s.first_layer, s.last_layer, tokens);
  }
  if (s.dense_nodes > 1 && !s.layer_group && s.first_layer < p.n_layer())  // --parallel tp=T
    return SplitRange(p, node, c, s, r, tokens, sampled, last, hop_bytes);
  return FromParts(r, hop_bytes, node, c);
}

}  // namespace

StepCost StageDecodeCost(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                         const StageSpec& s, double batch) {
  const double b = std::max(batch, 1.0);
  return Cost(p, node, c, s, b, b, false, 0);
}

StepCost StagePrefillCost(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                          const StageSpec& s, double tokens) {
  const double t = std::max(tokens, 1.0);
  return Cost(p, node, c, s, t, 1.0, true, t / 2);
}

StepCost StageMixedCost(const ModelProfile& p, const measure::NodeInfo& node, const PlanConfig& c,
                        const StageSpec& s, double rows, double sampled, double ctx) {
  return Cost(p, node, c, s, std::max(rows, 1.0), std::max(sampled, 1.0), true, std::max(ctx, 0.5));
}

}  // namespace shoal::planner
