// Pipeline placement by dynamic programming over (node, layers placed so far).
#include "planner/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shoal::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Stage times within this relative margin of the best bottleneck count as equal (float sums of
// the same layers in another order differ in the last bits).
constexpr double kTimeSlack = 1e-9;

// Per-node costs with O(1) range queries: node i is stage i, so whether it is first or last is
// fixed and its extras are constants.
struct NodeCosts {
  double fixed_time = 0;            // extras (the output head on the last stage)
  std::vector<double> time_prefix;  // [L + 1]
  uint64_t fixed_mem = 0;           // extras + buffers + overhead
  double Time(int32_t s, int32_t e) const {
    return fixed_time + time_prefix[static_cast<size_t>(e)] - time_prefix[static_cast<size_t>(s)];
  }
};

struct Tables {
  int32_t L = 0, N = 0;
  std::vector<uint64_t> mem_prefix;  // [L + 1] layer weights + KV
  std::vector<NodeCosts> nodes;
  uint64_t Mem(int32_t i, int32_t s, int32_t e) const {
    return nodes[static_cast<size_t>(i)].fixed_mem + mem_prefix[static_cast<size_t>(e)] -
           mem_prefix[static_cast<size_t>(s)];
  }
};

Tables BuildTables(const ModelProfile& p, const std::vector<measure::NodeInfo>& nodes,
                   const PlanConfig& c) {
  Tables t;
  t.L = p.n_layer();
  t.N = static_cast<int32_t>(nodes.size());
  t.mem_prefix.assign(static_cast<size_t>(t.L) + 1, 0);
  for (int32_t l = 0; l < t.L; ++l) {
    const uint64_t kv_layer = EstimateStageMemory(p, nodes[0], c, l, l + 1).kv;
    t.mem_prefix[static_cast<size_t>(l) + 1] =
        t.mem_prefix[static_cast<size_t>(l)] + p.layers[static_cast<size_t>(l)].bytes + kv_layer;
  }
  for (int32_t i = 0; i < t.N; ++i) {
    const measure::NodeInfo& n = nodes[static_cast<size_t>(i)];
    NodeCosts nc;
    // A range with this node's first/last role (N <= L makes these ranges valid): one layer,
    // or all of them for a single node, which is both first and last.
    const int32_t s0 = i == 0 ? 0 : (i == t.N - 1 ? t.L - 1 : 1);
    const int32_t e0 = t.N == 1 ? t.L : s0 + 1;
    nc.fixed_mem = EstimateStageMemory(p, n, c, s0, e0).total() -
                   (t.mem_prefix[static_cast<size_t>(e0)] - t.mem_prefix[static_cast<size_t>(s0)]);
    nc.fixed_time = c.balance == Balance::kDecode ? ExtrasDecodeSeconds(p, n, s0, e0) : 0;
    nc.time_prefix.assign(static_cast<size_t>(t.L) + 1, 0);
    for (int32_t l = 0; l < t.L; ++l) {
      const double lt = c.balance == Balance::kDecode ? LayerDecodeSeconds(p, n, c, l)
                                                      : LayerPrefillSeconds(p, n, c, l);
      nc.time_prefix[static_cast<size_t>(l) + 1] = nc.time_prefix[static_cast<size_t>(l)] + lt;
    }
    t.nodes.push_back(std::move(nc));
  }
  return t;
}

// DP over stages: value[i][e] is the best cost of placing layers [0, e) on nodes [0, i), every
// node taking >= 1 layer. `stage_cost(i, s, e)` returns the cost of node i serving [s, e) or
// +inf when not allowed; `combine` folds it into the prefix's value. Returns the layer counts,
// or empty when nothing is allowed.
template <typename StageCost, typename Combine>
std::vector<int32_t> SolveDp(const Tables& t, StageCost stage_cost, Combine combine) {
  const size_t W = static_cast<size_t>(t.L) + 1;
  std::vector<double> value((static_cast<size_t>(t.N) + 1) * W, kInf);
  std::vector<int32_t> from(value.size(), -1);
  auto at = [W](int32_t i, int32_t e) {
    return static_cast<size_t>(i) * W + static_cast<size_t>(e);
  };
  value[at(0, 0)] = 0;
  for (int32_t i = 1; i <= t.N; ++i) {
    for (int32_t e = i; e <= t.L - (t.N - i); ++e) {
      for (int32_t s = i - 1; s < e; ++s) {
        const double prev = value[at(i - 1, s)];
        if (prev == kInf) continue;
        const double cost = stage_cost(i - 1, s, e);
        if (cost == kInf) continue;
        const double v = combine(prev, cost);
        if (v < value[at(i, e)]) {
          value[at(i, e)] = v;
          from[at(i, e)] = s;
        }
      }
    }
  }
  if (value[at(t.N, t.L)] == kInf) return {};
  std::vector<int32_t> counts(static_cast<size_t>(t.N));
  for (int32_t i = t.N, e = t.L; i > 0; --i) {
    const int32_t s = from[at(i, e)];
    counts[static_cast<size_t>(i) - 1] = e - s;
    e = s;
  }
  return counts;
}

Status Shortfall(const ModelProfile& p, const std::vector<measure::NodeInfo>& nodes,
                 const PlanConfig& c, const Tables& t) {
  // The split that minimizes the largest overflow shows what is missing where.
  auto overflow = [&](int32_t i, int32_t s, int32_t e) {
    return static_cast<double>(t.Mem(i, s, e)) -
           static_cast<double>(nodes[static_cast<size_t>(i)].mem_limit);
  };
  const std::vector<int32_t> counts =
      SolveDp(t, overflow, [](double a, double b) { return std::max(a, b); });
  std::string msg = fmt::format(
      "no placement of {} ({} layers) fits {} node{}:", p.hp.name.empty() ? p.hp.arch : p.hp.name,
      t.L, t.N, t.N == 1 ? "" : "s");
  uint64_t need = 0, limit = 0, largest_layer = 0;
  for (int32_t l = 0; l < t.L; ++l)
    largest_layer = std::max(largest_layer, t.mem_prefix[static_cast<size_t>(l) + 1] -
                                                t.mem_prefix[static_cast<size_t>(l)]);
  for (int32_t i = 0, s = 0; i < t.N; ++i) {
    const measure::NodeInfo& n = nodes[static_cast<size_t>(i)];
    const int32_t e = s + counts[static_cast<size_t>(i)];
    const StageMemory m = EstimateStageMemory(p, n, c, s, e);
    need += m.total();
    limit += n.mem_limit;
    msg += fmt::format(
        "\n  node {}: layers [{}, {}) needs {} (weights {}, kv {}, buffers {}, "
        "overhead {}), limit {}",
        n.name, s, e, FormatMiB(m.total()), FormatMiB(m.weights), FormatMiB(m.kv),
        FormatMiB(m.buffers), FormatMiB(m.overhead), FormatMiB(n.mem_limit));
    if (m.total() > n.mem_limit) msg += ", short by " + FormatMiB(m.total() - n.mem_limit);
    s = e;
  }
  msg += fmt::format("\n  total: needs {}, limits {}", FormatMiB(need), FormatMiB(limit));
  if (need > limit) {
    msg += ", short by " + FormatMiB(need - limit);
  } else {
    msg += fmt::format(
        ": enough in total, but not split into whole layers per node (a layer with its KV takes "
        "up to {}; each stage also needs its buffers and the process overhead)",
        FormatMiB(largest_layer));
  }
  return Status::Error(msg);
}

}  // namespace

Result<Plan> MakePlan(const ModelProfile& p, const std::vector<measure::NodeInfo>& nodes,
                      const PlanConfig& c) {
  SHOAL_RETURN_IF_ERROR(ValidateConfig(c));
  if (nodes.empty()) return Errorf("plan: no nodes");
  for (const measure::NodeInfo& n : nodes) SHOAL_RETURN_IF_ERROR(measure::ValidateNode(n));
  const int32_t L = p.n_layer(), N = static_cast<int32_t>(nodes.size());
  if (N > L)
    return Errorf(
        "plan: {} nodes for a {}-layer model; every node serves at least one layer, so "
        "use at most {} nodes",
        N, L, L);
  const Tables t = BuildTables(p, nodes, c);
  auto fits = [&](int32_t i, int32_t s, int32_t e) {
    return t.Mem(i, s, e) <= nodes[static_cast<size_t>(i)].mem_limit;
  };
  // Pass 1: the smallest achievable slowest stage.
  auto stage_time = [&](int32_t i, int32_t s, int32_t e) {
    return fits(i, s, e) ? t.nodes[static_cast<size_t>(i)].Time(s, e) : kInf;
  };
  const std::vector<int32_t> minmax =
      SolveDp(t, stage_time, [](double a, double b) { return std::max(a, b); });
  if (minmax.empty()) return Shortfall(p, nodes, c, t);
  double bottleneck = 0;
  for (int32_t i = 0, s = 0; i < N; s += minmax[static_cast<size_t>(i)], ++i)
    bottleneck = std::max(bottleneck, stage_time(i, s, s + minmax[static_cast<size_t>(i)]));
  // Pass 2: under that bottleneck, the most even stages (least sum of squared times).
  const double cap = bottleneck * (1 + kTimeSlack);
  auto squared = [&](int32_t i, int32_t s, int32_t e) {
    const double x = stage_time(i, s, e);
    return x <= cap ? x * x : kInf;
  };
  std::vector<int32_t> counts = SolveDp(t, squared, [](double a, double b) { return a + b; });
  if (counts.empty()) counts = minmax;  // cannot happen: minmax itself satisfies the cap
  return EvaluatePlan(p, nodes, c, counts);
}

Result<Plan> EvaluatePlan(const ModelProfile& p, const std::vector<measure::NodeInfo>& nodes,
                          const PlanConfig& c, const std::vector<int32_t>& layer_counts) {
  SHOAL_RETURN_IF_ERROR(ValidateConfig(c));
  if (nodes.empty() || layer_counts.size() != nodes.size())
    return Errorf("plan: {} layer counts for {} nodes", layer_counts.size(), nodes.size());
  int64_t sum = 0;
  for (int32_t n : layer_counts) {
    if (n < 1) return Errorf("plan: every stage needs at least one layer");
    sum += n;
  }
  if (sum != p.n_layer())
    return Errorf("plan: stages cover {} layers, the model has {}", sum, p.n_layer());
  Plan plan;
  plan.model = p.hp.name.empty() ? p.hp.arch : p.hp.name;
  plan.n_layer = p.n_layer();
  plan.config = c;
  plan.kv_tokens_per_layer = KvTokensPerLayer(c);
  double slowest = 0;
  int32_t first = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const measure::NodeInfo& n = nodes[i];
    Stage st;
    st.node = static_cast<int32_t>(i);
    st.node_name = n.name;
    st.first_layer = first;
    st.last_layer = first + layer_counts[i];
    st.mem = EstimateStageMemory(p, n, c, st.first_layer, st.last_layer);
    st.mem_limit = n.mem_limit;
    st.time = EstimateStageTime(p, n, c, st.first_layer, st.last_layer);
    const bool last = i + 1 == nodes.size();
    if (!last) st.link = EstimateLinkTime(p, n, c, st.last_layer);
    plan.decode_s_per_token += st.time.decode_s + st.link.total();
    // The sampled token returns from the last stage to the first: latency only (4 bytes).
    if (last && nodes.size() > 1) plan.decode_s_per_token += EstimateLinkTime(p, n, c, 0).latency_s;
    const double occupancy = std::max(st.time.decode_s, st.link.transfer_s);
    if (occupancy > slowest) {
      slowest = occupancy;
      plan.bottleneck_stage = static_cast<int32_t>(i);
    }
    first = st.last_layer;
    plan.stages.push_back(std::move(st));
  }
  plan.decode_tokens_per_s = plan.decode_s_per_token > 0 ? 1.0 / plan.decode_s_per_token : 0;
  plan.throughput_tokens_per_s = slowest > 0 ? 1.0 / slowest : 0;
  return plan;
}

}  // namespace shoal::planner
