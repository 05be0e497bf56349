// Simulator options parsing and the report as text and JSON.
#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "sim/sim.h"

namespace shoal::sim {
namespace {

Result<double> Number(std::string_view s, std::string_view what) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !(v >= 0))
    return Errorf("sim: bad number '{}' in {}", s, what);
  return v;
}

nlohmann::json DistJson(const Dist& d) {
  return {{"n", d.n},     {"mean", d.mean}, {"p50", d.p50},
          {"p90", d.p90}, {"p99", d.p99},   {"max", d.max}};
}

std::string DistText(const Dist& d, double scale, const char* unit) {
  if (d.n == 0) return "(none)";
  return fmt::format("mean {:.1f} p50 {:.1f} p90 {:.1f} p99 {:.1f} max {:.1f} {} (n={})",
                     d.mean * scale, d.p50 * scale, d.p90 * scale, d.p99 * scale, d.max * scale,
                     unit, d.n);
}

}  // namespace

Result<Workload> ParseWorkload(const std::string& s) {
  Workload w;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string_view item(s.data() + pos, end - pos);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) return Errorf("sim: workload item '{}' lacks ':'", item);
    const std::string_view key = item.substr(0, colon);
    SHOAL_ASSIGN_OR_RETURN(double v, Number(item.substr(colon + 1), "--workload"));
    if (key == "poisson") {
      w.rate = v;
    } else if (key == "in") {
      w.in = static_cast<int32_t>(v);
    } else if (key == "out") {
      w.out = static_cast<int32_t>(v);
    } else if (key == "closed") {
      w.closed = static_cast<int32_t>(v);
    } else if (key == "requests") {
      w.requests = static_cast<int64_t>(v);
    } else {
      return Errorf("sim: unknown workload key '{}' (poisson, closed, requests, in, out)", key);
    }
    pos = end + 1;
  }
  if (!(w.rate > 0) || w.in < 1 || w.out < 1)
    return Errorf("sim: workload '{}' needs poisson > 0, in >= 1, out >= 1", s);
  return w;
}

Result<double> ParseDuration(const std::string& s) {
  if (s.empty()) return Errorf("sim: empty duration");
  double mul = 1;
  std::string_view num(s);
  switch (s.back()) {
    case 's':
      num.remove_suffix(1);
      break;
    case 'm':
      mul = 60;
      num.remove_suffix(1);
      break;
    case 'h':
      mul = 3600;
      num.remove_suffix(1);
      break;
    default:
      break;
  }
  SHOAL_ASSIGN_OR_RETURN(double v, Number(num, "--duration"));
  if (!(v > 0)) return Errorf("sim: duration '{}' must be > 0", s);
  return v * mul;
}

std::string FormatSimReport(const SimReport& r) {
  std::string o = fmt::format(
      "sim: {} on {} x {} ({} topology): {} replicas x {} nodes, {} stages, {} lanes, {:.0f} s "
      "simulated\n",
      r.model, r.nodes, r.device, r.topology, r.replicas, r.nodes_per_replica, r.stages, r.lanes,
      r.duration_s);
  o +=
      fmt::format("requests: {} arrived, {} done; {} tokens generated, {} prompt tokens computed\n",
                  r.requests_arrived, r.requests_done, r.tokens_generated, r.prompt_tokens);
  o += fmt::format(
      "throughput: {:.2f} tokens/s over {:.1f} s (planner, closed form: {:.2f} served, {:.2f} "
      "decode only)\n",
      r.throughput_tps, r.end_s, r.plan_served_tps, r.plan_decode_tps);
  o += "TTFT: " + DistText(r.ttft_s, 1, "s") + "\n";
  o += "TPOT: " + DistText(r.tpot_s, 1e3, "ms") + "\n";
  o += "E2E:  " + DistText(r.e2e_s, 1, "s") + "\n";
  double lo = 1, hi = 0;
  for (double u : r.stage_util) {
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  o += fmt::format(
      "stage utilisation (replica 0): mean {:.1f}%, min {:.1f}%, max {:.1f}%; pipeline bubbles "
      "(idle share of in-step time): mean {:.1f}%\n",
      100 * r.mean_util, 100 * (r.stage_util.empty() ? 0 : lo), 100 * hi, 100 * r.mean_bubble);
  if (r.stage_util.size() <= 16) {
    o += "  per stage (util / bubble):";
    for (size_t i = 0; i < r.stage_util.size(); ++i)
      o += fmt::format(" {:.0f}/{:.0f}%", 100 * r.stage_util[i], 100 * r.stage_bubble[i]);
    o += "\n";
  }
  o += fmt::format(
      "failures: {} hosts off, {} failovers, {} spares used, {} replicas lost; recovery "
      "(failure to an interrupted request's next token) {}\n",
      r.failures, r.failovers, r.spares_used, r.replicas_lost, DistText(r.recovery_s, 1, "s"));
  o += fmt::format("tokens lost: {}, duplicated: {}\n", r.tokens_lost, r.tokens_duplicated);
  o += fmt::format("simulation: {} activities, {:.1f} s wall\n", r.activities, r.wall_s);
  return o;
}

std::string SimReportToJson(const SimReport& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["device"] = r.device;
  j["topology"] = r.topology;
  j["nodes"] = r.nodes;
  j["replicas"] = r.replicas;
  j["nodes_per_replica"] = r.nodes_per_replica;
  j["stages"] = r.stages;
  j["lanes"] = r.lanes;
  j["duration_s"] = r.duration_s;
  j["requests_arrived"] = r.requests_arrived;
  j["requests_done"] = r.requests_done;
  j["tokens_generated"] = r.tokens_generated;
  j["throughput_tokens_per_s"] = r.throughput_tps;
  j["plan_tokens_per_s"] = r.plan_decode_tps;
  j["ttft_s"] = DistJson(r.ttft_s);
  j["tpot_s"] = DistJson(r.tpot_s);
  j["e2e_s"] = DistJson(r.e2e_s);
  j["stage_utilisation"] = r.stage_util;
  j["stage_bubble"] = r.stage_bubble;
  j["mean_bubble"] = r.mean_bubble;
  j["plan_served_tokens_per_s"] = r.plan_served_tps;
  j["end_s"] = r.end_s;
  j["failures"] = r.failures;
  j["failovers"] = r.failovers;
  j["spares_used"] = r.spares_used;
  j["replicas_lost"] = r.replicas_lost;
  j["recovery_s"] = DistJson(r.recovery_s);
  j["tokens_lost"] = r.tokens_lost;
  j["tokens_duplicated"] = r.tokens_duplicated;
  j["activities"] = r.activities;
  j["wall_s"] = r.wall_s;
  return j.dump(2);
}

}  // namespace shoal::sim
