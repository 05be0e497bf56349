// Capacity planning: sizes, node counts, placement (MakePlan or layer groups) and speed.
#include "planner/capacity.h"

#include <algorithm>
#include <cmath>

namespace shoal::planner {
namespace {

int64_t CeilDiv(double a, double b) { return static_cast<int64_t>(std::ceil(a / b - 1e-12)); }

// Smallest prefill chunk the planner shrinks to: below ~16 rows a matmul is a matvec anyway.
constexpr int32_t kMinBatchTokens = 16;

WeightsBreakdown Weights(const ModelProfile& p) {
  WeightsBreakdown w;
  w.total = p.total_bytes;
  w.embeddings = p.token_embd.bytes;
  w.head = p.head.bytes;
  w.other = p.other.bytes;
  w.layer_min = UINT64_MAX;
  for (int32_t l = 0; l < p.n_layer(); ++l) {
    const uint64_t x = p.experts.empty() ? 0 : p.experts[static_cast<size_t>(l)].bytes;
    const uint64_t b = p.layers[static_cast<size_t>(l)].bytes;
    w.experts += x;
    w.layers += b - x;
    w.layer_min = std::min(w.layer_min, b);
    w.layer_max = std::max(w.layer_max, b);
    w.params += static_cast<double>(p.layers[static_cast<size_t>(l)].matmul_params());
    w.active_params += p.ActiveParams(l);
  }
  TensorCost head = p.head;
  if (p.hp.tied_embeddings) head.Add(p.token_embd);
  w.params += static_cast<double>(p.token_embd.matmul_params() + p.head.matmul_params());
  w.active_params += static_cast<double>(head.matmul_params());
  return w;
}

// Whole layers per node: the fewest pipeline stages MakePlan accepts (from the greedy packing
// count up), or 0 when one layer with its KV and the stage extras overflows a node.
int32_t MinPipelineStages(const ModelProfile& p, const measure::NodeInfo& node,
                          const PlanConfig& c) {
  const int32_t L = p.n_layer();
  int32_t stages = 0;
  for (int32_t f = 0; f < L;) {
    int32_t e = f;
    while (e < L && EstimateStageMemory(p, node, c, f, e + 1).total() <= node.mem_limit) ++e;
    if (e == f) return 0;
    ++stages;
    f = e;
  }
  for (int32_t s = stages; s <= L; ++s) {
    std::vector<measure::NodeInfo> nodes(static_cast<size_t>(s), node);
    if (MakePlan(p, nodes, c).ok()) return s;
  }
  return 0;
}

// One replica as layer groups: embedding holders, one group per layer, the head's shards.
Result<std::vector<StageSpec>> LayerGroups(const ModelProfile& p, const PlanConfig& c,
                                           uint64_t usable, int64_t* max_per_layer,
                                           int64_t* experts_per_node) {
  std::vector<StageSpec> out;
  const double U = static_cast<double>(usable);
  if (!p.hp.tied_embeddings) {
    StageSpec e;
    e.embed_only = true;
    e.dense_nodes = CeilDiv(static_cast<double>(p.token_embd.bytes), U);
    out.push_back(e);
  }
  for (int32_t l = 0; l < p.n_layer(); ++l) {
    StageSpec s;
    s.first_layer = l;
    s.last_layer = l + 1;
    s.layer_group = true;
    const double x = p.experts.empty() ? 0 : static_cast<double>(p.experts[l].bytes);
    const double cache =
        static_cast<double>(LayerKvBytesPerToken(p, c, l) * KvTokensPerLayer(c) +
                            LayerStateBytes(p, l) * static_cast<uint64_t>(c.max_num_seqs));
    const double dense = static_cast<double>(p.layers[l].bytes) - x + cache;
    if (dense + x > U) {
      s.dense_nodes = CeilDiv(dense, U);
      if (x > 0 && p.moe.n_expert > 0) {
        const double one = x / static_cast<double>(p.moe.n_expert);
        const int64_t per_node = static_cast<int64_t>(U / one);
        if (per_node < 1)
          return Errorf("layer {}: one expert ({}) does not fit a node's {} usable", l,
                        FormatMiB(static_cast<uint64_t>(one)), FormatMiB(usable));
        s.expert_nodes =
            CeilDiv(static_cast<double>(p.moe.n_expert), static_cast<double>(per_node));
        *experts_per_node = std::max(*experts_per_node, std::min(per_node, p.moe.n_expert));
      } else if (x > 0) {
        s.dense_nodes = CeilDiv(dense + x, U);
      }
    }
    *max_per_layer = std::max(*max_per_layer, s.nodes());
    out.push_back(s);
  }
  StageSpec h;
  h.first_layer = h.last_layer = p.n_layer();
  TensorCost head = p.head;
  if (p.hp.tied_embeddings) head.Add(p.token_embd);
  h.dense_nodes = std::max<int64_t>(1, CeilDiv(static_cast<double>(head.bytes), U));
  out.push_back(h);
  return out;
}

int64_t NodesOf(const std::vector<StageSpec>& v) {
  int64_t n = 0;
  for (const StageSpec& s : v) n += s.nodes();
  return n;
}

// Prefill of `n_prompts` prompts of `prompt` tokens, in steps of up to max_batched_tokens
// rows of whole chunks. One group: a step's chunks are cut into min(stages, chunks)
// micro-batches that fill and drain the pipeline, then the next step starts. Several groups:
// their steps overlap, so chunks follow each other through the stages (first latency, then one
// occupancy each).
double PrefillSeconds(const ModelProfile& p, const DevicePreset& d, const CapacityReport& r,
                      double prompt, double n_prompts) {
  const double T = r.config.max_batched_tokens;
  const double chunk = std::min(T, prompt);
  const double chunks = n_prompts * std::ceil(prompt / chunk - 1e-9);
  // A micro-batch of `rows` prompt rows from `prompts` prompts (each sampled once); every row
  // attends within its own prompt, prompt / 2 positions on average.
  double sum_busy = 0;  // of the last pass, every stage
  auto pass = [&](double rows, double prompts, double* lat, double* busy) {
    *lat = 0;
    *busy = 0;
    sum_busy = 0;
    for (const StageSpec& s : r.stages) {
      const StepCost pc = StageMixedCost(p, d.node, r.config, s, rows, prompts, prompt / 2);
      *lat += pc.latency_s;
      *busy = std::max(*busy, pc.busy_s);
      sum_busy += pc.core_s();
    }
  };
  double lat = 0, busy = 0;
  if (r.groups > 1) {
    pass(chunk, 1, &lat, &busy);
    // Stages sharing C cores (--host-cores): a chunk's work at every stage over min(C, stages)
    // cores apart, if that is longer than the busiest stage's occupancy.
    const double cores =
        std::min<double>(r.opt.host_cores, static_cast<double>(r.nodes_per_replica));
    if (cores > 0) busy = std::max(busy, sum_busy / cores);
    return lat + (chunks - 1) * busy + r.opt.step_overhead_s;
  }
  const double per_step = std::min(chunks, std::max(1.0, std::floor(T / chunk)));
  const double steps = std::ceil(chunks / per_step - 1e-9);
  const double mbs = std::min(static_cast<double>(r.stages.size()), per_step);
  // Sampled rows: the chunks that end a prompt, about one per prompt-sized share of the rows.
  const double rows = per_step * chunk / mbs;
  pass(rows, std::max(1.0, rows / prompt), &lat, &busy);
  return steps * (lat + (mbs - 1) * busy + r.opt.step_overhead_s);
}

// Groups `shoal serve` runs: --pipeline-groups, else one per stage (one for recurrent models),
// never more than the sequences (Engine::Engine's rule).
int32_t PipelineGroups(const ModelProfile& p, const CapacityOptions& o, double stages,
                       double seqs) {
  bool recurrent = false;
  for (const LayerAttn& a : p.attn) recurrent = recurrent || a.state_bytes > 0;
  const double g = o.pipeline_groups > 0 ? o.pipeline_groups : recurrent ? 1 : stages;
  return static_cast<int32_t>(std::max(1.0, std::min(g, seqs)));
}

// One decode pass of `mb` sequences through every stage.
struct DecodePass {
  double latency_s = 0;    // summed over the stages
  double busy_s = 0;       // the busiest stage's occupancy
  double sum_busy_s = 0;   // every stage's CPU (StepCost::core_s), for shared cores
  size_t busiest = 0;      // that stage's index
  const char* bound = "";  // and what binds it
};

DecodePass PriceDecodePass(const ModelProfile& p, const measure::NodeInfo& node,
                           const CapacityReport& r, double mb) {
  DecodePass out;
  for (size_t i = 0; i < r.stages.size(); ++i) {
    const StepCost s = StageDecodeCost(p, node, r.config, r.stages[i], mb);
    out.latency_s += s.latency_s;
    out.sum_busy_s += s.core_s();
    if (s.busy_s > out.busy_s) {
      out.busy_s = s.busy_s;
      out.bound = s.bound;
      out.busiest = i;
    }
  }
  return out;
}

// A decode round (one token for every sequence of a replica) as PriceDecode prices it, and
// what the closed-loop pricing reuses.
struct DecodeRound {
  DevicePreset run;         // the device as each stage runs it (co-running, or alone)
  bool co_running = false;  // stages share one machine and overlap their groups' steps
  double cores = 0;         // min(host_cores, nodes of a replica), with host_cores > 0
  double trip = 0;          // one group step's work, every stage
  double cycle = 0;         // seconds per round
};

// Groups, micro-batches, the round's length, the decode rates, the bubble and what binds.
DecodeRound PriceDecode(const ModelProfile& p, const DevicePreset& d, CapacityReport* r) {
  const double b_r = r->config.max_num_seqs;
  const double S = static_cast<double>(r->stages.size());
  r->groups = PipelineGroups(p, r->opt, S, b_r);
  DecodeRound round;
  // Stages that share one machine (--host-cores) and overlap their groups' steps compute at the
  // same time and share its memory bus: priced on the node as it runs beside the others.
  // A tensor-parallel group's members always compute at the same time.
  round.co_running = r->opt.host_cores > 0 && ((r->groups > 1 && S > 1) || r->opt.tp > 1);
  round.cores = std::min<double>(r->opt.host_cores, static_cast<double>(r->nodes_per_replica));
  round.run = d;
  if (round.co_running) round.run.node = measure::CoRunning(d.node);
  const double ovh = r->opt.step_overhead_s;
  // G groups of b_r / G sequences, each group step cut into m_g micro-batches (the cluster runtime:
  // one micro-batch per group step once groups fill the pipeline, else stages / groups). A group's
  // step fills and drains the pipeline; the G groups' steps overlap, so a round (one token for
  // every sequence) lasts the longer of one group's step and the busiest stage's occupancy.
  const double G = r->groups;
  const double m_g = G > 1 ? std::max(1.0, std::floor(S / G)) : std::min(S, b_r);
  r->micro_batches = static_cast<int32_t>(G * m_g);
  r->micro_batch = std::ceil(b_r / r->micro_batches);
  const DecodePass mb = PriceDecodePass(p, round.run.node, *r, r->micro_batch);
  // Stages sharing C cores: a round's G m_g micro-batches through every stage, and the
  // coordinator's overhead after each of the G group steps, on min(C, S) cores.
  round.trip = m_g * mb.sum_busy_s + ovh;
  const double shared = r->opt.host_cores > 0 ? G * round.trip / round.cores : 0;
  const double single = PriceDecodePass(p, d.node, *r, 1).latency_s;  // one sequence alone
  const double group_step = mb.latency_s + (m_g - 1) * mb.busy_s + ovh;
  const double full = std::max(G * m_g * mb.busy_s, shared);
  round.cycle = std::max(group_step, full);
  // The ideal pipeline for comparison: min(stages, sequences) groups of one micro-batch each.
  const double m_ideal = std::min(S, b_r);
  const DecodePass ideal = PriceDecodePass(p, round.run.node, *r, std::ceil(b_r / m_ideal));
  const double overlap_cycle = std::max(ideal.latency_s, m_ideal * ideal.busy_s) + ovh;
  r->decode_tps_stream = 1.0 / round.cycle;
  r->decode_tps_single = 1.0 / (single + ovh);
  r->decode_tps_aggregate = static_cast<double>(r->replicas) * b_r / round.cycle;
  r->decode_tps_overlap = static_cast<double>(r->replicas) * b_r / overlap_cycle;
  r->bubble = round.cycle > 0 ? std::max(0.0, 1.0 - full / round.cycle) : 0;
  const StageSpec& bs = r->stages[mb.busiest];
  if (r->bubble < 0.05 || r->stages.size() == 1) {
    r->binding = fmt::format("{} of stage {} (layers [{}, {}))", mb.bound, mb.busiest,
                             bs.first_layer, bs.last_layer);
  } else {
    r->binding = fmt::format(
        "latency: {} micro-batch{} in a {}-stage pipeline (bubbles: {:.0f}% of stage time idle)",
        r->micro_batches, r->micro_batches == 1 ? "" : "es", r->stages.size(), 100.0 * r->bubble);
  }
  return round;
}

// Closed loop: a replica's b_r requests start together, their prompts are prefilled (whole
// chunks packed up to max_batched_tokens a step), then output - 1 decode steps of b_r. Sets
// the batch TTFT, the request time and the served tokens/s; r->ttft_s is already set.
void PriceClosedLoop(const ModelProfile& p, const DecodeRound& round, double prompt,
                     CapacityReport* r) {
  const double b_r = r->config.max_num_seqs;
  const double G = r->groups;
  const DevicePreset& run = round.run;
  const double first = PrefillSeconds(p, run, *r, prompt, 1);  // one prompt alone
  if (r->groups > 1 || b_r <= 1) {
    // The groups' prompts follow each other through the stages, the k-th one's first token
    // k - 1 gaps after the first's (PrefillSeconds is linear in the prompts here), so the
    // mean TTFT is halfway between the first and the last. (The last one's, reported as TTFT
    // before, read 962 ms for 2 stages x 4 in flight where the requests' mean was 644.)
    r->prefill_batch_s = PrefillSeconds(p, run, *r, prompt, b_r);
    r->ttft_batch_s = (first + r->prefill_batch_s) / 2;
    r->request_s = r->prefill_batch_s + (r->opt.output - 1) * round.cycle;
    if (round.co_running) {
      // Shared cores, overlapped groups, requests arriving as others finish: a new prompt's
      // step holds each stage in turn for its whole prompt, and the other groups' decode
      // steps queue behind it there. Beside it they do the rest of the trip they were on
      // (half, on average) and one trip in its wake (its stage's queue runs while it
      // computes at the next stage): 1.5 group steps each. The rest of the decode work
      // shares the cores. 4 stages x 4 in flight on 2 cores (Zen 5 host): 9-12% idle, 1.2-1.4
      // s a wave of 4 requests, against 1.1 s priced with the cores packed; this prices 1.39.
      // A prompt co-runs (`first`, on the co-running node) only while those trips run on the
      // other cores, and alone (r->ttft_s) the rest of its time: 4 x 4 reads 4.5 trips of
      // ~14 ms beside a prompt of ~150 ms. Priced co-running all through, that row read
      // -3.9 +- 2.9% over 18 stored calibration runs.
      const double cores = round.cores;
      const double decode_work = (r->opt.output - 1) * G * round.trip;
      const double beside = std::min(decode_work, b_r * (G - 1) * 1.5 * round.trip);
      const double overlap =
          cores > 1 ? std::min(1.0, beside / b_r / ((cores - 1) * r->ttft_s)) : 0.0;
      const double prompt_s = r->ttft_s + overlap * (first - r->ttft_s);
      r->request_s = std::max(r->request_s, b_r * prompt_s + (decode_work - beside) / cores);
    }
  } else {
    // One group: the requests reach the server one after another and an idle engine steps
    // at the first, so its prompt is prefilled alone and the other b_r - 1 together in the
    // next step (as the sim and `shoal serve` do). TTFT is the mean over the b_r requests;
    // the round lasts until the second step is done. Pricing all b_r as one step gave 1
    // stage x 4 in flight a TTFT of 917 ms against 825 measured (sim 667).
    const double rest = PrefillSeconds(p, run, *r, prompt, b_r - 1);
    r->ttft_batch_s = (first + (b_r - 1) * (first + rest)) / b_r;
    r->prefill_batch_s = first + rest;
    r->request_s = r->prefill_batch_s + (r->opt.output - 1) * round.cycle;
  }
  r->served_tps = static_cast<double>(r->replicas) * b_r * r->opt.output / r->request_s;
}

// Decode, prefill and (with opt.output) closed-loop speed, power and cost.
void Speed(const ModelProfile& p, const DevicePreset& d, CapacityReport* r) {
  const PlanConfig& c = r->config;
  const DecodeRound round = PriceDecode(p, d, r);
  const double prompt = r->opt.prompt > 0 ? r->opt.prompt : std::max(1, r->opt.context / 2);
  const double chunk = std::min<double>(c.max_batched_tokens, prompt);
  double pre_busy = 0;
  for (const StageSpec& s : r->stages)
    pre_busy = std::max(pre_busy, StagePrefillCost(p, d.node, c, s, chunk).busy_s);
  r->prefill_tps = static_cast<double>(r->replicas) * chunk / pre_busy;
  // The prefill step samples the first token.
  r->ttft_s = PrefillSeconds(p, d, *r, prompt, 1);
  if (r->opt.output > 0) PriceClosedLoop(p, round, prompt, r);
  r->power_w = d.power_w * static_cast<double>(r->nodes_used);
  r->cost_usd = d.price_usd * static_cast<double>(r->nodes_used);
  r->joules_per_token = r->power_w > 0 ? r->power_w / r->decode_tps_aggregate : 0;
}

}  // namespace

Result<CapacityReport> PlanCapacity(const ModelProfile& p, const DevicePreset& d,
                                    const CapacityOptions& o) {
  SHOAL_RETURN_IF_ERROR(measure::ValidateNode(d.node));
  if (o.context < 1 || o.concurrency < 1 || o.nodes < 0 || o.batch_tokens < 1)
    return Errorf("plan: context, concurrency and batch tokens must be >= 1, nodes >= 0");
  if (o.stages < 0 || o.output < 0 || !(o.step_overhead_s >= 0) || o.host_cores < 0)
    return Errorf("plan: stages, output, step overhead and host cores must be >= 0");
  if (o.tp < 1 || o.tp > 64 || !(o.collective_s >= 0))
    return Errorf("plan: tp must be 1-64 and the collective cost >= 0");
  CapacityReport r;
  r.model = p.hp.name.empty() ? p.hp.arch : p.hp.name;
  r.device = d.name;
  r.opt = o;
  r.w = Weights(p);
  for (int32_t l = 0; l < p.n_layer(); ++l) {
    const AttnKind k = p.Attn(l).kind;
    (k == AttnKind::kGqa ? r.n_gqa : k == AttnKind::kMla ? r.n_mla : r.n_kda)++;
  }
  PlanConfig c;
  c.max_model_len = o.context;
  c.max_num_seqs = o.concurrency;
  c.max_batched_tokens = o.batch_tokens;
  c.link_dtype = o.link_dtype;
  // With a known request shape, decode is priced at the mean context of a request.
  if (o.output > 0)
    c.decode_context = std::max(1, (o.prompt > 0 ? o.prompt : o.context / 2) + o.output / 2);
  for (int32_t l = 0; l < p.n_layer(); ++l) {
    r.kv_bytes_per_token += LayerKvBytesPerToken(p, c, l);
    r.state_bytes_per_seq += LayerStateBytes(p, l);
  }
  r.kv_total = r.kv_bytes_per_token * static_cast<uint64_t>(o.context) *
                   static_cast<uint64_t>(o.concurrency) +
               r.state_bytes_per_seq * static_cast<uint64_t>(o.concurrency);
  r.wire_bytes_per_token = LinkRowBytes(o.link_dtype, p.hp.n_embd);
  const uint64_t limit = d.node.mem_limit;
  while (c.max_batched_tokens > kMinBatchTokens &&
         StageBuffers(p, d.node, c, 0, p.n_layer()) > limit / 4)
    c.max_batched_tokens /= 2;
  const uint64_t fixed = c.process_overhead + StageBuffers(p, d.node, c, 0, p.n_layer());
  if (fixed >= limit)
    return Errorf("plan: a {} node ({}) cannot hold the process and its buffers ({})", d.name,
                  FormatMiB(limit), FormatMiB(fixed));
  r.node_usable = limit - fixed;
  r.node_limit = limit;
  r.n_layer = p.n_layer();
  r.nodes_weights =
      CeilDiv(static_cast<double>(r.w.total), static_cast<double>(limit - c.process_overhead));
  r.nodes_weights_kv =
      CeilDiv(static_cast<double>(r.w.total + r.kv_total), static_cast<double>(r.node_usable));

  // Pass 1 sizes a replica for every sequence and sets how many replicas the nodes allow;
  // pass 2 places one replica for its share of the sequences over nodes / replicas.
  int64_t replicas = 1;
  for (int pass = 0; pass < 2; ++pass) {
    c.max_num_seqs = static_cast<int32_t>((o.concurrency + replicas - 1) / replicas);
    // A tensor-parallel group holds what T nodes hold (each member 1/T of the layers, planner/
    // parallel.h MemberMemory, with the embedding whole: a little less).
    const int64_t tp = std::max(1, o.tp);
    measure::NodeInfo group = d.node;
    group.mem_limit *= static_cast<uint64_t>(tp);
    const int32_t pipe = MinPipelineStages(p, group, c);
    if (o.stages > 0 && (pipe == 0 || o.stages < pipe || o.stages > p.n_layer()))
      return Errorf(
          "plan: --stages {} is not possible: {} needs {} whole-layer stages{} and has {} "
          "layers",
          o.stages, r.model, pipe, pipe == 0 ? " (a layer must be split)" : "", p.n_layer());
    if (pipe > 0) {
      int64_t per = o.stages > 0 ? o.stages : pipe;
      if (pass == 1 && o.stages == 0 && o.nodes > 0 && o.nodes >= pipe * tp)
        per = std::min<int64_t>(p.n_layer(), std::max<int64_t>(pipe, o.nodes / replicas / tp));
      std::vector<measure::NodeInfo> nodes(static_cast<size_t>(per), group);
      for (size_t i = 0; i < nodes.size(); ++i) nodes[i].name = fmt::format("n{}", i);
      SHOAL_ASSIGN_OR_RETURN(Plan plan, MakePlan(p, nodes, c));
      r.mode = tp > 1 ? "tensor parallel" : per == 1 ? "single node" : "pipeline";
      r.stages.clear();
      for (const Stage& s : plan.stages)
        r.stages.push_back({s.first_layer, s.last_layer, tp, 0, o.tp_fast, o.collective_s});
      r.pipeline = std::move(plan);
      r.nodes_per_replica = per * tp;
    } else {
      int64_t per_layer = 1, per_node = 0;
      SHOAL_ASSIGN_OR_RETURN(r.stages, LayerGroups(p, c, r.node_usable, &per_layer, &per_node));
      r.mode = "layer split";
      r.pipeline.reset();
      r.max_nodes_per_layer = per_layer;
      r.experts_per_node = per_node;
      r.nodes_per_replica = NodesOf(r.stages);
    }
    if (o.nodes > 0 && o.nodes < r.nodes_per_replica)
      return Errorf(
          "plan: {} on {} x {} does not fit: needs {} nodes at {} tokens x {} sequences "
          "(weights alone: {} nodes)",
          r.model, o.nodes, d.name, r.nodes_per_replica, o.context, c.max_num_seqs,
          r.nodes_weights);
    if (pass == 0) {
      const int64_t reps = o.nodes > 0 ? std::max<int64_t>(1, o.nodes / r.nodes_per_replica) : 1;
      replicas = std::min<int64_t>(reps, o.concurrency);
      if (replicas == 1 && o.nodes <= r.nodes_per_replica) break;
    }
  }
  r.replicas = replicas;
  r.nodes_used = r.replicas * r.nodes_per_replica;
  r.config = c;
  Speed(p, d, &r);
  return r;
}

}  // namespace shoal::planner
