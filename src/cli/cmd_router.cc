// `shoal router`: the OpenAI-compatible front door over several replicas (router/router.h).
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "router/router.h"

namespace shoal::cli {

namespace {

struct RouterArgs {
  std::string listen = "127.0.0.1:8080";
  std::vector<std::string> replicas;
  std::string api_key, api_key_file, replica_api_key_file, policy = "affinity";
  int64_t max_in_flight = 64;
  int64_t affinity_bytes = 512;
};

Result<router::RouterConfig> MakeConfig(const RouterArgs& a) {
  router::RouterConfig c;
  const size_t colon = a.listen.rfind(':');
  if (colon == std::string::npos) return Errorf("--listen {}: want HOST:PORT", a.listen);
  c.http.host = a.listen.substr(0, colon);
  if (c.http.host.size() > 2 && c.http.host.front() == '[' && c.http.host.back() == ']')
    c.http.host = c.http.host.substr(1, c.http.host.size() - 2);
  try {
    size_t used = 0;
    const std::string port = a.listen.substr(colon + 1);
    c.http.port = std::stoi(port, &used);
    if (used != port.size() || c.http.port < 0 || c.http.port > 65535)
      throw std::out_of_range(port);
  } catch (const std::exception&) {
    return Errorf("--listen {}: the port must be 0-65535", a.listen);
  }
  c.replicas = a.replicas;
  c.api_key = a.api_key;
  if (!a.api_key_file.empty()) {
    SHOAL_ASSIGN_OR_RETURN(c.api_key, ReadKeyFile(a.api_key_file, "--api-key-file"));
  }
  if (!a.replica_api_key_file.empty()) {
    SHOAL_ASSIGN_OR_RETURN(c.replica_api_key,
                           ReadKeyFile(a.replica_api_key_file, "--replica-api-key-file"));
  }
  c.policy = a.policy == "least-loaded"  ? router::Policy::kLeastLoaded
             : a.policy == "round-robin" ? router::Policy::kRoundRobin
                                         : router::Policy::kAffinity;
  c.max_in_flight = a.max_in_flight;
  c.affinity_bytes = static_cast<size_t>(a.affinity_bytes);
  return c;
}

}  // namespace

void AddRouterCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand(
      "router", "OpenAI-compatible front door spreading requests over several replicas");
  auto a = std::make_shared<RouterArgs>();
  cmd->add_option("--listen", a->listen, "HOST:PORT to serve on (port 0: any free port)")
      ->capture_default_str();
  cmd->add_option("--replica", a->replicas,
                  "A replica's URL (a `shoal serve`, single-process or a cluster's "
                  "coordinator): http://host:port; repeat for each")
      ->required();
  cmd->add_option("--api-key", a->api_key, "Require 'Authorization: Bearer KEY' on /v1 paths");
  cmd->add_option("--api-key-file", a->api_key_file, "Read the API key from this file");
  cmd->add_option("--replica-api-key-file", a->replica_api_key_file,
                  "The key the replicas require (sent to them as a bearer key)");
  cmd->add_option("--policy", a->policy,
                  "affinity (a prompt's prefix picks its replica, bounded by load), "
                  "least-loaded or round-robin")
      ->check(CLI::IsMember({"affinity", "least-loaded", "round-robin"}))
      ->capture_default_str();
  cmd->add_option("--max-in-flight", a->max_in_flight,
                  "Requests in flight per replica; all replicas full: 429")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--affinity-bytes", a->affinity_bytes, "Prompt bytes that key the affinity")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->callback([a, runner] {
    *runner = [a]() -> int {
      auto cfg = MakeConfig(*a);
      if (!cfg.ok()) return Fail(cfg.status());
      router::Router r(std::move(*cfg));
      if (Status s = r.Listen(); !s.ok()) return Fail(s);
      fmt::print(stderr, "shoal router listening on http://{}:{} over {} replica(s)\n",
                 a->listen.substr(0, a->listen.rfind(':')), r.port(), a->replicas.size());
      std::fflush(stderr);
      Status s = r.Run();
      return s.ok() ? 0 : Fail(s);
    };
  });
}

}  // namespace shoal::cli
