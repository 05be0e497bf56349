// Tensor-parallel layouts: parsing --parallel, grouping nodes, member slices and memory.
#include "planner/parallel.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/even_split.h"
#include "planner/capacity.h"

namespace shoal::planner {

namespace {

// Largest values a layout may name: a group of 64 members gathers 64 slices per collective,
// and a pipeline of 4096 stages is beyond any model's layer count.
constexpr int kMaxTp = 64;
constexpr int kMaxPp = 4096;

// A group priced as one node: its members' memory and speeds added (they compute their slices
// at once); latency and link as its first member's.
measure::NodeInfo GroupNode(const std::vector<measure::NodeInfo>& nodes, size_t first, int t,
                            uint64_t overhead) {
  measure::NodeInfo g = nodes[first];
  uint64_t limit = nodes[first].mem_limit;
  std::vector<std::string> names;
  for (int k = 0; k < t; ++k) {
    const measure::NodeInfo& n = nodes[first + static_cast<size_t>(k)];
    limit = std::min(limit, n.mem_limit);
    names.push_back(n.name);
  }
  g.name = fmt::format("{}", fmt::join(names, "+"));
  // Every member pays its own process overhead; the rest of a stage is shared out (MemberMemory
  // checks each member's exact share after planning).
  g.mem_limit = limit > overhead ? (limit - overhead) * static_cast<uint64_t>(t) + overhead : limit;
  const double s = t;
  g.mem_bw *= s;
  g.weight_bw *= s;
  g.attn_flops *= s;
  for (double& b : g.weight_bw_batch) b *= s;
  for (auto& [type, table] : g.type_bw_batch)
    for (double& b : table) b *= s;
  for (auto& [type, f] : g.matmul_flops) f *= s;
  return g;
}

// A split layout must be priced this much faster than the pipeline to be chosen by default: the
// calibrated cost model stays within 10% of measured tokens/s (docs/SCALE.md), so a smaller gain
// could be the model's error.
constexpr double kSplitGain = 1.10;

// Decode tokens/s PlanCapacity prices for `stages` stages of `tp` members each serving
// c.max_num_seqs sequences, on `node` (the cluster's slowest, with its smallest memory); 0 when
// that layout does not fit.
double PricedTokensPerSecond(const ModelProfile& p, const measure::NodeInfo& node,
                             const PlanConfig& c, int stages, int tp) {
  DevicePreset d;
  d.name = node.name;
  d.node = node;
  CapacityOptions o;
  o.nodes = static_cast<int64_t>(stages) * tp;
  o.context = c.max_model_len;
  o.concurrency = c.max_num_seqs;
  o.batch_tokens = c.max_batched_tokens;
  o.link_dtype = c.link_dtype;
  o.stages = stages;
  o.tp = tp;
  Result<CapacityReport> r = PlanCapacity(p, d, o);
  return r.ok() ? r->decode_tps_aggregate : 0.0;
}

// The default layout's group size when the layers fit the nodes as a pipeline: 1 (that
// pipeline) unless stages of t-member groups (t dividing the node count, t <= n_layer stages
// apart) are priced at least kSplitGain faster for the configured load (*why says so).
int ChooseTp(const ModelProfile& p, const std::vector<measure::NodeInfo>& nodes,
             const PlanConfig& c, std::string* why) {
  const int n = static_cast<int>(nodes.size());
  measure::NodeInfo slow = nodes[0];
  for (const measure::NodeInfo& x : nodes) {
    // An unmeasured node (`shoal node --no-measure`: placeholder speeds, no weight streaming
    // rate) gives nothing to price a split on.
    if (!(x.weight_bw > 0)) return 1;
    if (x.weight_bw < slow.weight_bw) slow = x;
  }
  for (const measure::NodeInfo& x : nodes) slow.mem_limit = std::min(slow.mem_limit, x.mem_limit);
  if (!measure::ValidateNode(slow).ok()) return 1;
  const int stages = std::min(n, p.n_layer());
  const double pipe = PricedTokensPerSecond(p, slow, c, stages, 1);
  int best = 1;
  double best_tps = pipe;
  for (int t = 2; t <= std::min(n, kMaxTp); ++t) {
    if (n % t != 0 || n / t > p.n_layer()) continue;
    const double tps = PricedTokensPerSecond(p, slow, c, n / t, t);
    if (tps > best_tps) {
      best = t;
      best_tps = tps;
    }
  }
  if (best == 1 || best_tps < kSplitGain * pipe) return 1;
  *why = fmt::format(
      "layout: tp={},pp={} chosen: priced {:.1f} tokens/s for {} sequence{} against {:.1f} for a "
      "pipeline of {} stages (--parallel forces one)",
      best, n / best, best_tps, c.max_num_seqs, c.max_num_seqs == 1 ? "" : "s", pipe, stages);
  return best;
}

}  // namespace

Result<Parallel> ParseParallel(const std::string& s) {
  Parallel p;
  if (s.empty()) return p;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    const std::string item = s.substr(at, comma - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return Errorf("--parallel: '{}' is not key=value", item);
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    int v = 0;
    try {
      size_t used = 0;
      v = std::stoi(val, &used);
      if (used != val.size()) throw std::invalid_argument(val);
    } catch (const std::exception&) {
      return Errorf("--parallel: '{}' is not a number", val);
    }
    if (key == "tp") {
      if (v < 1 || v > kMaxTp) return Errorf("--parallel: tp={} outside [1, {}]", v, kMaxTp);
      p.tp = v;
    } else if (key == "pp") {
      if (v < 1 || v > kMaxPp) return Errorf("--parallel: pp={} outside [1, {}]", v, kMaxPp);
      p.pp = v;
    } else if (key == "ep") {
      if (v < 1 || v > kMaxTp) return Errorf("--parallel: ep={} outside [1, {}]", v, kMaxTp);
      p.ep = v;
    } else {
      return Errorf("--parallel: unknown key '{}' (tp, pp, ep)", key);
    }
    at = comma + 1;
  }
  if (p.ep != 0 && p.ep != p.tp)
    return Errorf(
        "--parallel: ep={} with tp={}: experts are split over the members of each group, so ep "
        "equals tp",
        p.ep, p.tp);
  return p;
}

std::string FormatParallel(const Parallel& p) {
  return p.pp > 0 ? fmt::format("tp={},pp={}", p.tp, p.pp) : fmt::format("tp={}", p.tp);
}

Result<Plan> MakeParallelPlan(const ModelProfile& profile,
                              const std::vector<measure::NodeInfo>& nodes, const PlanConfig& config,
                              const Parallel& par) {
  const int n = static_cast<int>(nodes.size());
  if (n == 0) return Errorf("plan: no nodes");
  if (par.tp == 1 && par.pp <= 0) {
    // The default: a pipeline of every node while the layers fit them, unless groups that split
    // the layers are priced faster for the configured load (ChooseTp); else the smallest groups
    // that make the model fit (a layer larger than any node).
    Result<Plan> pipeline = MakePlan(profile, nodes, config);
    if (pipeline.ok() && n >= 2) {
      std::string why;
      const int t = ChooseTp(profile, nodes, config, &why);
      if (t > 1) {
        Result<Plan> split = MakeParallelPlan(profile, nodes, config, Parallel{t, n / t, 0});
        if (split.ok()) {
          split->choice = why;
          return split;
        }
      }
    }
    if (pipeline.ok() || n < 2) return pipeline;
    Status split_error;
    for (int t = 2; t <= std::min(n, kMaxTp); ++t) {
      Result<Plan> split = MakeParallelPlan(profile, nodes, config, Parallel{t, 0, 0});
      if (split.ok()) return split;
      split_error = split.status();
    }
    return Errorf("{}; split inside the layers (tp 2..{}), the last: {}",
                  pipeline.status().message(), std::min(n, kMaxTp), split_error.message());
  }
  const int tp = std::min(par.tp, n);
  if (tp <= 1) {
    if (par.pp <= 0 || par.pp >= n) return MakePlan(profile, nodes, config);
    return MakePlan(profile, {nodes.begin(), nodes.begin() + par.pp}, config);
  }
  // No more groups than layers: a stage holds at least one.
  const int groups =
      std::max(1, std::min(par.pp > 0 ? std::min(par.pp, n / tp) : n / tp, profile.n_layer()));
  std::vector<measure::NodeInfo> virt;
  for (int g = 0; g < groups; ++g)
    virt.push_back(GroupNode(nodes, static_cast<size_t>(g) * static_cast<size_t>(tp), tp,
                             config.process_overhead));
  SHOAL_ASSIGN_OR_RETURN(Plan plan, MakePlan(profile, virt, config));
  const HParams& hp = profile.hp;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    Stage& st = plan.stages[s];
    const int first = st.node * tp;  // MakePlan's node index is the group's
    st.node = first;
    st.members.clear();
    for (int k = 0; k < tp; ++k) {
      const int idx = first + k;
      st.members.push_back(idx);
      st.member_names.push_back(nodes[static_cast<size_t>(idx)].name);
      st.member_slices.push_back(MemberSlices(hp, tp, k));
      const StageMemory m = MemberMemory(profile, config, st.mem, st.first_layer, tp, k);
      st.member_mem.push_back(m);
      const uint64_t limit = nodes[static_cast<size_t>(idx)].mem_limit;
      if (m.total() > limit)
        return Errorf(
            "plan: member {} of stage {} ({}) needs {} for its slice of layers [{}, {}), "
            "over its {} limit",
            k, s, nodes[static_cast<size_t>(idx)].name, FormatMiB(m.total()), st.first_layer,
            st.last_layer, FormatMiB(limit));
    }
    st.mem_limit = nodes[static_cast<size_t>(first)].mem_limit;
    st.tp_fast = par.fast;
  }
  return plan;
}

std::string MemberSlices(const HParams& hp, int t, int k) {
  auto r = [](Slice s) { return fmt::format("[{}, {})", s.first, s.end()); };
  std::string out =
      fmt::format("heads {} embd {}", r(SliceOf(hp.n_head, t, k)), r(SliceOf(hp.n_embd, t, k)));
  if (hp.n_ff > 0) out += " ffn " + r(SliceOf(hp.n_ff, t, k));
  if (hp.n_expert > 0) out += " experts " + r(SliceOf(hp.n_expert, t, k));
  out += " vocab " + r(SliceOf(hp.n_vocab, t, k));
  return out;
}

std::string FormatGroups(const Plan& plan) {
  std::string out;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const Stage& st = plan.stages[s];
    const int t = static_cast<int>(st.members.size());
    if (t <= 1) continue;
    out += fmt::format("stage {}: layers [{}, {}) split over {} members ({})\n", s, st.first_layer,
                       st.last_layer, t, st.tp_fast ? "fast" : "exact");
    for (int k = 0; k < t; ++k)
      out += fmt::format(
          "  member {} {}: {} MiB planned; {}\n", k, st.member_names[static_cast<size_t>(k)],
          k < static_cast<int>(st.member_mem.size())
              ? fmt::format(
                    "{:.1f}",
                    static_cast<double>(st.member_mem[static_cast<size_t>(k)].total()) / 1048576.0)
              : "?",
          st.member_slices[static_cast<size_t>(k)]);
  }
  return out;
}

int64_t LargestGatherFloats(const ModelProfile& p, const PlanConfig& c) {
  const HParams& hp = p.hp;
  const int64_t n = std::max<int64_t>(1, c.max_batched_tokens);
  int64_t width = std::max({hp.n_head * hp.head_dim_v, hp.n_ff, hp.n_embd});
  if (hp.n_expert > 0) width = std::max(width, hp.n_expert_used * hp.n_embd);
  return std::max(n * width, int64_t{std::max(1, c.max_num_seqs)} * hp.n_vocab);
}

TpCollectives LayerCollectives(const HParams& hp, int32_t l, bool fast) {
  TpCollectives c;
  const auto E = static_cast<double>(hp.n_embd);
  double att = static_cast<double>(hp.n_head * hp.head_dim_v);
  if (hp.is_recurrent_layer(l)) {
    att = static_cast<double>(hp.n_head * hp.kda_head_dim);
  } else if (hp.is_mla()) {
    att = static_cast<double>(hp.n_head * hp.head_dim_v_mla);
  }
  // A projection back to the residual: a gather of its input and of its output, or (fast) one
  // all-reduce of its partial sums.
  auto project = [&](double in) {
    if (fast) {
      c.reduces.push_back(E);
    } else {
      c.gathers.push_back(in);
      c.gathers.push_back(E);
    }
  };
  project(att);
  if (!hp.is_moe_layer(l)) {
    project(static_cast<double>(hp.n_ff));
    return c;
  }
  const double lat = hp.n_expert_latent > 0 ? static_cast<double>(hp.n_expert_latent) : E;
  if (hp.n_expert_latent > 0) c.gathers.push_back(lat);  // routed_down
  c.gathers.push_back(static_cast<double>(hp.n_expert_used) * lat);
  if (hp.n_expert_latent > 0) c.gathers.push_back(E);  // routed_up
  if (hp.n_expert_shared > 0) project(static_cast<double>(hp.n_ff_exp * hp.n_expert_shared));
  return c;
}

uint64_t CollectiveBufferBytes(const ModelProfile& p, const PlanConfig& c) {
  constexpr uint64_t kCopies = 5;
  return kCopies * sizeof(float) * static_cast<uint64_t>(LargestGatherFloats(p, c));
}

StageMemory MemberMemory(const ModelProfile& p, const PlanConfig& c, const StageMemory& whole,
                         int32_t first_layer, int t, int k) {
  StageMemory m = whole;
  if (t <= 1) return m;
  m.buffers += CollectiveBufferBytes(p, c);
  const HParams& hp = p.hp;
  const int64_t group = std::max<int64_t>(1, hp.n_head / std::max<int64_t>(1, hp.n_head_kv));
  const Slice q = SliceOf(hp.n_head, t, k);
  const int64_t kv_heads = q.count == 0 ? 0 : (q.end() - 1) / group - q.first / group + 1;
  const double kv_share =
      hp.n_head_kv > 0 ? static_cast<double>(kv_heads) / static_cast<double>(hp.n_head_kv) : 1.0;
  const uint64_t embd = first_layer == 0 ? std::min(p.token_embd.bytes, whole.weights) : 0;
  m.weights =
      embd + (whole.weights - embd + static_cast<uint64_t>(t) - 1) / static_cast<uint64_t>(t);
  m.kv = static_cast<uint64_t>(static_cast<double>(whole.kv) * kv_share);
  return m;
}

}  // namespace shoal::planner
