// `shoal status --url URL`: a server's pipeline (stages, layers, memory) and load, or a router's
// replicas, from GET /v1/cluster, printed as a table (or the JSON with --json).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "loadgen/http_client.h"

namespace shoal::cli {
namespace {

// A split stage's members: slices, memory and their collectives' cost per token.
void PrintMembers(const nlohmann::json& members) {
  for (const auto& m : members) {
    const double tokens = std::max(1.0, m.value("tokens_total", 0.0));
    std::printf(
        "  member %lld %-16s %-22s RSS %.1f MiB; busy %.1f%% (collectives %.1f%%); "
        "collectives %.3f ms and %.0f bytes per token\n    %s\n",
        static_cast<long long>(m.value("member", 0)), m.value("node", "?").c_str(),
        m.value("address", "?").c_str(), m.value("mem_rss_bytes", 0.0) / 1048576.0,
        100.0 * m.value("busy_fraction", 0.0), 100.0 * m.value("collective_fraction", 0.0),
        m.value("collective_ms_per_token", 0.0), m.value("collective_bytes_in_total", 0.0) / tokens,
        m.value("slices", "").c_str());
  }
}

struct StatusArgs {
  std::string url = "http://127.0.0.1:8080", api_key;
  bool json = false;
};

int RunStatus(const StatusArgs& a) {
  auto url = loadgen::ParseUrl(a.url);
  if (!url.ok()) return Fail(url.status());
  auto target = loadgen::ResolveTarget(*url);
  if (!target.ok()) return Fail(target.status());
  auto body = loadgen::HttpGet(*target, "/v1/cluster", a.api_key, 10.0);
  if (!body.ok()) return Fail(body.status());
  nlohmann::json j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Fail(Errorf("{}: not a JSON object", a.url));
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  if (j.value("role", "") == "router") {  // `shoal router`: its replicas
    std::printf("router, policy %s, at most %lld in flight per replica\n",
                j.value("policy", "?").c_str(),
                static_cast<long long>(j.value("max_in_flight_per_replica", 0)));
    for (const auto& r : j.value("replicas", nlohmann::json::array()))
      std::printf("  replica %-32s %-4s %lld in flight, %lld requests, %lld failed\n",
                  r.value("url", "?").c_str(), r.value("up", false) ? "up" : "down",
                  static_cast<long long>(r.value("in_flight", 0)),
                  static_cast<long long>(r.value("requests_total", 0)),
                  static_cast<long long>(r.value("failures_total", 0)));
    return 0;
  }
  std::printf("model %s, %s, %lld running, %lld waiting, KV %.1f%% used, %lld tokens generated\n",
              j.value("model", "?").c_str(), j.value("mode", "?").c_str(),
              static_cast<long long>(j.value("requests_running", 0)),
              static_cast<long long>(j.value("requests_waiting", 0)),
              100.0 * j.value("kv_cache_usage", 0.0),
              static_cast<long long>(j.value("generation_tokens_total", 0)));
  if (j.contains("server_rss_bytes"))
    std::printf("server process: RSS %.1f MiB, peak %.1f MiB\n",
                j.value("server_rss_bytes", 0.0) / 1048576.0,
                j.value("server_peak_rss_bytes", 0.0) / 1048576.0);
  if (j.contains("stages") && j["stages"].is_array()) {
    std::printf("links %s; predicted %.1f tokens/s single stream, %.1f full pipeline\n",
                j.value("link_dtype", "?").c_str(), j.value("predicted_decode_tokens_per_s", 0.0),
                j.value("predicted_throughput_tokens_per_s", 0.0));
    std::printf("%-6s %-16s %-22s %-10s %9s %9s %9s %9s %7s %9s\n", "stage", "node", "address",
                "layers", "plan MiB", "RSS MiB", "peak MiB", "limit MiB", "busy %", "tok/s");
    int i = 0;
    for (const auto& s : j["stages"]) {
      const auto layers = s.value("layers", nlohmann::json::array({0, 0}));
      const std::string range = "[" + std::to_string(layers[0].get<int>()) + ", " +
                                std::to_string(layers[1].get<int>()) + ")";
      std::printf("%-6d %-16s %-22s %-10s %9.1f %9.1f %9.1f %9.1f %7.1f %9.1f\n", i++,
                  s.value("node", "?").c_str(), s.value("address", "?").c_str(), range.c_str(),
                  s.value("mem_predicted_bytes", 0.0) / 1048576.0,
                  s.value("mem_rss_bytes", 0.0) / 1048576.0,
                  s.value("mem_peak_rss_bytes", 0.0) / 1048576.0,
                  s.value("mem_limit_bytes", 0.0) / 1048576.0,
                  100.0 * s.value("busy_fraction", 0.0), s.value("tokens_per_s", 0.0));
      if (s.contains("members") && s["members"].is_array()) PrintMembers(s["members"]);
    }
    std::printf("(RSS and peak: measured by each node, from its last heartbeat answer)\n");
    if (j.contains("load_window_s"))
      std::printf("(busy %% and tok/s: measured over the last %d s)\n",
                  j.value("load_window_s", 0));
  }
  if (j.contains("nodes") && j["nodes"].is_array()) {
    std::printf(
        "epoch %lld, %lld failovers, %lld drains, %lld rebalances, %lld tokens replayed, last "
        "recovery %.3f s, max %.3f s\n",
        static_cast<long long>(j.value("epoch", 0)),
        static_cast<long long>(j.value("failovers", 0)),
        static_cast<long long>(j.value("drains", 0)),
        static_cast<long long>(j.value("rebalances", 0)),
        static_cast<long long>(j.value("replayed_tokens", 0)), j.value("last_recovery_s", 0.0),
        j.value("recovery_s_max", 0.0));
    if (j.contains("unavailable"))
      std::printf("UNAVAILABLE (new requests get 503): %s\n", j.value("unavailable", "").c_str());
    std::printf("%-16s %-22s %-10s %s\n", "node", "address", "role", "state");
    for (const auto& n : j["nodes"])
      std::printf("%-16s %-22s %-10s %s\n", n.value("name", "?").c_str(),
                  n.value("address", "?").c_str(), n.value("role", "?").c_str(),
                  n.value("state", "?").c_str());
  }
  return 0;
}

}  // namespace

void AddStatusCommand(CLI::App& app, Runner* runner) {
  auto a = std::make_shared<StatusArgs>();
  CLI::App* cmd =
      app.add_subcommand("status", "Show a server's pipeline and load (GET /v1/cluster)");
  cmd->add_option("--url", a->url, "Server base URL")->capture_default_str();
  cmd->add_option("--api-key", a->api_key, "API key of the server");
  cmd->add_flag("--json", a->json, "Print the JSON as it is");
  cmd->callback([a, runner] { *runner = [a] { return RunStatus(*a); }; });
}

}  // namespace shoal::cli
