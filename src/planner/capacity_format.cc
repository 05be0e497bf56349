// Capacity report as text and JSON, and the seed write-up's PS3 arithmetic.
#include <cmath>
#include <nlohmann/json.hpp>

#include "planner/capacity.h"

namespace shoal::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Bytes(uint64_t b) {
  const double x = static_cast<double>(b);
  if (x >= 1024.0 * kGiB) return fmt::format("{:.2f} TiB", x / (1024.0 * kGiB));
  if (x >= kGiB) return fmt::format("{:.2f} GiB", x / kGiB);
  if (x >= 1024.0 * 1024.0) return fmt::format("{:.1f} MiB", x / (1024.0 * 1024.0));
  return fmt::format("{:.1f} KiB", x / 1024.0);
}

std::string Seconds(double s) {
  if (s >= 1) return fmt::format("{:.2f} s", s);
  return fmt::format("{:.1f} ms", s * 1e3);
}

std::string StageText(const StageSpec& s, int32_t n_layer) {
  if (s.embed_only) return fmt::format("token embedding on {} node(s)", s.dense_nodes);
  if (s.first_layer >= n_layer) return fmt::format("output head on {} node(s)", s.dense_nodes);
  std::string t = fmt::format("layers [{}, {})", s.first_layer, s.last_layer);
  if (s.dense_nodes > 1 && !s.layer_group)
    return t + fmt::format(", split over {} members ({}: heads, FFN columns, experts, vocabulary)",
                           s.dense_nodes, s.tp_fast ? "fast" : "exact");
  if (s.dense_nodes > 1) t += fmt::format(", dense tensors + KV sharded over {}", s.dense_nodes);
  if (s.expert_nodes > 0) t += fmt::format(", experts over {} nodes", s.expert_nodes);
  return t;
}

}  // namespace

std::string FormatCapacity(const CapacityReport& r) {
  const WeightsBreakdown& w = r.w;
  std::string o = fmt::format("model {} on {}: {} tokens of context x {} sequences\n", r.model,
                              r.device, r.opt.context, r.opt.concurrency);
  o += fmt::format("weights: {} ({:.1f}B matrix parameters, {:.1f}B active per token)\n",
                   Bytes(w.total), w.params / 1e9, w.active_params / 1e9);
  o += fmt::format("  layers (dense part) {}, routed experts {}, embeddings {}, head {}",
                   Bytes(w.layers), Bytes(w.experts), Bytes(w.embeddings), Bytes(w.head));
  if (w.other) o += fmt::format(", other {}", Bytes(w.other));
  o += fmt::format("\n  per layer {} .. {}\n", Bytes(w.layer_min), Bytes(w.layer_max));
  o += fmt::format(
      "attention: {} GQA, {} MLA, {} KDA layers; KV {} per token, state {} per "
      "sequence; KV total {}\n",
      r.n_gqa, r.n_mla, r.n_kda, Bytes(r.kv_bytes_per_token), Bytes(r.state_bytes_per_seq),
      Bytes(r.kv_total));
  o += fmt::format("wire: {} bytes per token per hop ({})\n", r.wire_bytes_per_token,
                   LinkDTypeName(r.config.link_dtype));
  o += fmt::format("node: {} usable of {} after process overhead and buffers ({} batched tokens)\n",
                   Bytes(r.node_usable), Bytes(r.node_limit), r.config.max_batched_tokens);
  o += fmt::format("nodes needed: {} for weights alone, {} for weights + KV (bytes only)\n",
                   r.nodes_weights, r.nodes_weights_kv);
  o += fmt::format("placement: {}, {} nodes per replica x {} replica{} = {} nodes\n", r.mode,
                   r.nodes_per_replica, r.replicas, r.replicas == 1 ? "" : "s", r.nodes_used);
  if (r.mode == "layer split")
    o += fmt::format("  every layer is split: up to {} nodes per layer, {} experts per node\n",
                     r.max_nodes_per_layer, r.experts_per_node);
  if (r.pipeline && r.opt.tp == 1) {
    o += FormatPlan(*r.pipeline);
  } else {
    const size_t shown = std::min<size_t>(r.stages.size(), 4);
    for (size_t i = 0; i < shown; ++i)
      o += fmt::format("  stage {}: {}\n", i, StageText(r.stages[i], r.n_layer));
    if (r.stages.size() > shown) o += fmt::format("  ... {} stages in all\n", r.stages.size());
  }
  o += fmt::format("prefill: {:.1f} tokens/s; TTFT for a {}-token prompt: {}\n", r.prefill_tps,
                   r.opt.prompt > 0 ? r.opt.prompt : std::max(1, r.opt.context / 2),
                   Seconds(r.ttft_s));
  o += fmt::format(
      "decode: {:.2f} tokens/s for one sequence alone; {:.2f} tokens/s per stream and {:.1f} "
      "aggregate with {} in flight ({} micro-batches of {:.0f})\n",
      r.decode_tps_single, r.decode_tps_stream, r.decode_tps_aggregate, r.opt.concurrency,
      r.micro_batches, r.micro_batch);
  o += fmt::format(
      "  pipeline bubbles: {:.0f}% of the busiest stage idle per step ({}); {:.1f} "
      "aggregate with one group per stage\n",
      100 * r.bubble,
      r.groups > 1 ? fmt::format("{} groups' steps overlap", r.groups) : "one step in flight",
      r.decode_tps_overlap);
  if (r.opt.output > 0)
    o += fmt::format(
        "served: {:.2f} output tokens/s with prefill ({} requests of {} + {} "
        "tokens, {} each{})\n",
        r.served_tps, r.opt.concurrency,
        r.opt.prompt > 0 ? r.opt.prompt : std::max(1, r.opt.context / 2), r.opt.output,
        Seconds(r.request_s),
        r.opt.step_overhead_s > 0
            ? fmt::format(", {:.2f} ms overhead per step", 1e3 * r.opt.step_overhead_s)
            : std::string());
  o += fmt::format("binding: {}\n", r.binding);
  if (r.power_w > 0)
    o += fmt::format("power: {:.1f} kW, {:.2f} J per token; price ${:.0f}\n", r.power_w / 1e3,
                     r.joules_per_token, r.cost_usd);
  return o;
}

std::string CapacityToJson(const CapacityReport& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["device"] = r.device;
  j["context"] = r.opt.context;
  j["concurrency"] = r.opt.concurrency;
  j["weights"] = {
      {"total", r.w.total},           {"layers", r.w.layers}, {"experts", r.w.experts},
      {"embeddings", r.w.embeddings}, {"head", r.w.head},     {"layer_min", r.w.layer_min},
      {"layer_max", r.w.layer_max},   {"params", r.w.params}, {"active_params", r.w.active_params}};
  j["attention"] = {{"gqa", r.n_gqa}, {"mla", r.n_mla}, {"kda", r.n_kda}};
  j["kv_bytes_per_token"] = r.kv_bytes_per_token;
  j["state_bytes_per_seq"] = r.state_bytes_per_seq;
  j["kv_total"] = r.kv_total;
  j["wire_bytes_per_token"] = r.wire_bytes_per_token;
  j["node_usable"] = r.node_usable;
  j["batch_tokens"] = r.config.max_batched_tokens;
  j["nodes_weights"] = r.nodes_weights;
  j["nodes_weights_kv"] = r.nodes_weights_kv;
  j["mode"] = r.mode;
  j["nodes_per_replica"] = r.nodes_per_replica;
  j["replicas"] = r.replicas;
  j["nodes_used"] = r.nodes_used;
  j["max_nodes_per_layer"] = r.max_nodes_per_layer;
  j["experts_per_node"] = r.experts_per_node;
  nlohmann::json st = nlohmann::json::array();
  for (const StageSpec& s : r.stages)
    st.push_back({{"first_layer", s.first_layer},
                  {"last_layer", s.last_layer},
                  {"dense_nodes", s.dense_nodes},
                  {"tp_fast", s.tp_fast},
                  {"expert_nodes", s.expert_nodes},
                  {"embed_only", s.embed_only}});
  j["stages"] = st;
  j["prefill_tokens_per_s"] = r.prefill_tps;
  j["ttft_s"] = r.ttft_s;
  j["decode_tokens_per_s_single"] = r.decode_tps_single;
  j["decode_tokens_per_s_stream"] = r.decode_tps_stream;
  j["decode_tokens_per_s_aggregate"] = r.decode_tps_aggregate;
  j["decode_tokens_per_s_overlapped"] = r.decode_tps_overlap;
  j["pipeline_groups"] = r.groups;
  j["bubble_fraction"] = r.bubble;
  j["served_tokens_per_s"] = r.served_tps;
  j["request_s"] = r.request_s;
  j["ttft_batch_s"] = r.ttft_batch_s;
  j["prefill_batch_s"] = r.prefill_batch_s;
  j["output"] = r.opt.output;
  j["step_overhead_s"] = r.opt.step_overhead_s;
  j["binding"] = r.binding;
  j["power_w"] = r.power_w;
  j["cost_usd"] = r.cost_usd;
  j["joules_per_token"] = r.joules_per_token;
  return j.dump(2);
}

SeedCheck ComputeSeedCheck() {
  // The write-up's figures: 100,000 consoles of 200 GFLOPS, 256 MiB, 25.6 GB/s; 7B parameters
  // at 2 bytes, 70B at half a byte; nodes = bytes over one console's 256 MiB.
  constexpr double kNodes = 100000, kMem = 256.0 * 1024 * 1024;
  SeedCheck s;
  s.pflops = kNodes * 200e9 / 1e15;
  s.memory_tib = kNodes * kMem / (1024.0 * kGiB);
  s.bandwidth_pbs = kNodes * 25.6e9 / 1e15;
  s.gib_7b_fp16 = 7e9 * 2 / kGiB;
  s.gib_70b_q4 = 70e9 * 0.5 / kGiB;
  s.nodes_7b = static_cast<int64_t>(std::ceil(7e9 * 2 / kMem));
  s.nodes_70b = static_cast<int64_t>(std::ceil(70e9 * 0.5 / kMem));
  return s;
}

std::string FormatSeedCheck(const SeedCheck& s) {
  std::string o = "The write-up's arithmetic for 100,000 PS3s:\n";
  o += fmt::format("  compute   100,000 x 200 GFLOPS  = {:.0f} PFLOPS\n", s.pflops);
  o += fmt::format("  memory    100,000 x 256 MiB     = {:.2f} TiB\n", s.memory_tib);
  o += fmt::format("  bandwidth 100,000 x 25.6 GB/s   = {:.2f} PB/s\n", s.bandwidth_pbs);
  o += fmt::format(
      "  7B at FP16   = {:.3f} GiB (13.04) -> ceil(bytes / 256 MiB) = {} nodes (printed: 52)\n",
      s.gib_7b_fp16, s.nodes_7b);
  o += fmt::format(
      "  70B at 4 bit = {:.3f} GiB (32.59) -> ceil(bytes / 256 MiB) = {} nodes (printed: 128)\n",
      s.gib_70b_q4, s.nodes_70b);
  o += "What it leaves out (see `shoal plan --model ... --device ps3`):\n";
  o += "  - usable memory: Linux on a PS3 leaves ~209 MiB of the 256 MiB to a process, and a\n"
       "    shoal node needs ~16 MiB of its own plus activation buffers;\n";
  o += "  - the KV cache: context x concurrency x KV bytes per token, on top of the weights;\n";
  o += "  - whole layers: a node holds whole layers (or a layer is split and pays all-reduces\n"
       "    and expert scatter/gather on the wire);\n";
  o += "  - activations on the wire: every token crosses every stage boundary (n_embd x 2\n"
       "    bytes at f16), and MoE expert parallelism sends 2 x k rows per token per layer;\n";
  o += "  - hop latency: ~100 us per 1 GbE hop, paid per stage per token by one sequence;\n";
  o += "  - 4-bit is not 0.5 bytes: q4_0 stores 18 bytes per 32 weights (4.5 bits), MXFP4 17;\n";
  o += "  - peak FLOPS are not reached: decode is bound by memory bandwidth and the network.\n";
  return o;
}

}  // namespace shoal::planner
