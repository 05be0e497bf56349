// ClusterJson and FailoverMetrics.
#include "server/cluster_view.h"

#include <cstdio>

namespace shoal::server {

namespace {

// A split stage's members: node, address, slices, memory, and their load counters with the
// per-token figures they give (collective time and bytes received per token since the plan).
nlohmann::json MembersJson(const cluster::FailoverStats& s, size_t i) {
  const planner::Stage& st = s.plan.stages[i];
  nlohmann::json out = nlohmann::json::array();
  for (size_t k = 0; k < st.members.size(); ++k) {
    auto get = [&](const auto& v) {
      return i < v.size() && k < v[i].size() ? v[i][k] : typename std::decay_t<decltype(v[0][0])>{};
    };
    const ProcessMemory mem = get(s.member_memory);
    const cluster::NodeLoad load = get(s.member_load);
    const cluster::NodeLoadRate rate = get(s.member_rate);
    const double tok = static_cast<double>(std::max<uint64_t>(load.tokens, 1));
    out.push_back(
        {{"member", k},
         {"node", k < st.member_names.size() ? st.member_names[k] : ""},
         {"address", get(s.member_addresses)},
         {"slices", k < st.member_slices.size() ? st.member_slices[k] : ""},
         {"mem_rss_bytes", mem.rss_bytes},
         {"mem_peak_rss_bytes", mem.peak_rss_bytes},
         {"tokens_total", load.tokens},
         {"busy_seconds_total", static_cast<double>(load.busy_ns) * 1e-9},
         {"collective_seconds_total", static_cast<double>(load.collective_ns) * 1e-9},
         {"collective_calls_total", load.collective_calls},
         {"collective_bytes_in_total", load.collective_bytes_in},
         {"collective_ms_per_token", static_cast<double>(load.collective_ns) * 1e-6 / tok},
         {"collective_bytes_per_token", static_cast<double>(load.collective_bytes_in) / tok},
         {"busy_fraction", rate.busy_fraction},
         {"collective_fraction", rate.collective_fraction},
         {"tokens_per_s", rate.tokens_per_s}});
  }
  return out;
}

}  // namespace

nlohmann::json ClusterJson(const cluster::FailoverStats& s) {
  nlohmann::json stages = nlohmann::json::array();
  for (size_t i = 0; i < s.plan.stages.size(); ++i) {
    const planner::Stage& st = s.plan.stages[i];
    const ProcessMemory mem = i < s.stage_memory.size() ? s.stage_memory[i] : ProcessMemory{};
    stages.push_back({{"node", st.node_name},
                      {"address", i < s.stage_addresses.size() ? s.stage_addresses[i] : ""},
                      {"layers", {st.first_layer, st.last_layer}},
                      {"mem_predicted_bytes", st.mem.total()},
                      {"mem_rss_bytes", mem.rss_bytes},
                      {"mem_peak_rss_bytes", mem.peak_rss_bytes},
                      {"mem_limit_bytes", st.mem_limit},
                      {"decode_ms_per_token", st.time.decode_s * 1e3}});
    if (st.members.size() > 1) stages.back()["members"] = MembersJson(s, i);
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (const cluster::MemberState& m : s.members)
    nodes.push_back(
        {{"name", m.name}, {"address", m.address}, {"role", m.role}, {"state", m.health}});
  bool split = false;
  for (const planner::Stage& st : s.plan.stages) split = split || st.members.size() > 1;
  nlohmann::json j = {{"mode", split ? "tensor-parallel pipeline" : "pipeline"},
                      {"link_dtype", std::string(planner::LinkDTypeName(s.plan.config.link_dtype))},
                      {"stages", stages},
                      {"nodes", nodes},
                      {"epoch", s.epoch},
                      {"failovers", s.failovers},
                      {"drains", s.drains},
                      {"rebalances", s.rebalances},
                      {"replayed_tokens", s.replayed_tokens},
                      {"last_recovery_s", s.last_recovery_s},
                      {"recovery_s_max", s.recovery_s_max},
                      {"predicted_decode_tokens_per_s", s.plan.decode_tokens_per_s},
                      {"predicted_throughput_tokens_per_s", s.plan.throughput_tokens_per_s}};
  if (!s.last_failure.empty()) j["last_failure"] = s.last_failure;
  if (!s.unavailable.empty()) j["unavailable"] = s.unavailable;
  return j;
}

std::string FailoverMetrics(const cluster::FailoverStats& s) {
  std::string out;
  auto line = [&](const char* name, const char* help, const char* type, double v) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "# HELP %s %s\n# TYPE %s %s\n%s %.6g\n", name, help, name, type,
                  name, v);
    out += buf;
  };
  line("shoal_cluster_epoch", "Plan epoch (bumped by every failover).", "gauge", s.epoch);
  line("shoal_failovers_total", "Re-plans after a node failure.", "counter",
       static_cast<double>(s.failovers));
  line("shoal_drains_total", "Planned re-plans without a drained node.", "counter",
       static_cast<double>(s.drains));
  line("shoal_rebalances_total", "Planned re-plans onto every live node.", "counter",
       static_cast<double>(s.rebalances));
  line("shoal_replayed_tokens_total", "Tokens recomputed after failovers.", "counter",
       static_cast<double>(s.replayed_tokens));
  line("shoal_recovery_seconds_sum", "Failure detected to new plan loaded, summed.", "counter",
       s.recovery_s_total);
  line("shoal_recovery_seconds_max", "Longest recovery.", "gauge", s.recovery_s_max);
  line("shoal_cluster_available", "1 while the live nodes hold the model.", "gauge",
       s.unavailable.empty() ? 1 : 0);
  out += "# HELP shoal_node_up Node health: 1 alive, 0.5 suspect, 0 dead or unknown.\n";
  out += "# TYPE shoal_node_up gauge\n";
  for (const cluster::MemberState& m : s.members) {
    const double v = m.health == "alive" ? 1 : m.health == "suspect" ? 0.5 : 0;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "shoal_node_up{node=\"%s\",address=\"%s\",role=\"%s\",state=\"%s\"} %.1f\n",
                  m.name.c_str(), m.address.c_str(), m.role.c_str(), m.health.c_str(), v);
    out += buf;
  }
  return out;
}

std::vector<StageMetrics> StageMetricsOf(const cluster::ClusterControl& c) {
  std::vector<StageMetrics> out;
  const std::vector<cluster::StageLoad> loads = c.StageLoads();
  const std::vector<std::string> names = c.StageNames();
  for (size_t i = 0; i < loads.size(); ++i)
    out.push_back({static_cast<int32_t>(i), i < names.size() ? names[i] : "",
                   loads[i].busy_fraction, loads[i].tokens_per_s, loads[i].busy_s_total,
                   loads[i].tokens_total, cluster::StageStats::kWindowS});
  return out;
}

}  // namespace shoal::server
