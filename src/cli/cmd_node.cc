// `shoal node`: a pipeline worker that serves the layers a coordinator assigns it.
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "cluster/node_agent.h"
#include "loadgen/http_client.h"
#include "net/conn.h"

namespace shoal::cli {
namespace {

struct NodeArgs {
  std::string listen = "127.0.0.1:0", mem_limit, model_dir = ".", cache_dir, key_file, name;
  std::string link_cipher = "aes-256-gcm";
  int threads = 1;
  int max_links = 64;
  bool no_measure = false;
};

cluster::NodeAgent* g_agent = nullptr;
extern "C" void OnStopSignal(int) {
  if (g_agent) g_agent->Stop();  // only sets atomics: async-signal-safe
}

int RunNode(const NodeArgs& a) {
  auto listen = net::ParseHostPort(a.listen);
  if (!listen.ok()) return Fail(listen.status().Annotate("--listen"));
  cluster::NodeOptions o;
  o.host = listen->first;
  o.port = listen->second;
  o.n_threads = ResolveThreads(a.threads);
  o.model_dir = a.model_dir;
  o.cache_dir = a.cache_dir;
  o.name = a.name;
  o.measure = !a.no_measure;
  o.max_links = a.max_links;
  auto cipher = net::ParseLinkCipher(a.link_cipher);
  if (!cipher.ok()) return Fail(cipher.status().Annotate("--link-cipher"));
  o.link_cipher = *cipher;
  if (o.link_cipher == net::LinkCipher::kNone)
    std::fprintf(stderr,
                 "shoal node: --link-cipher none: links are neither encrypted nor "
                 "integrity-protected (for measuring only)\n");
  // Without --mem-limit the node may use 90% of the memory available now.
  auto m = ParseMemSize(a.mem_limit.empty() ? "0.9" : a.mem_limit, "--mem-limit");
  if (!m.ok()) return Fail(m.status());
  o.mem_limit = *m;
  if (a.key_file.empty()) return Fail(Errorf("--cluster-key-file is required"));
  auto key = net::ClusterKey::LoadFile(a.key_file);
  if (!key.ok()) return Fail(key.status());
  auto agent = cluster::NodeAgent::Start(o, std::move(*key));
  if (!agent.ok()) return Fail(agent.status());
  const measure::NodeInfo& info = (*agent)->info();
  std::fprintf(stderr,
               "shoal node: listening on %s:%u (mem limit %llu MiB, %.1f GB/s, %d threads, %s)\n",
               o.host.c_str(), (*agent)->port(), static_cast<unsigned long long>(o.mem_limit >> 20),
               info.mem_bw / 1e9, o.n_threads, info.isa.c_str());
  g_agent = agent->get();
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  const Status s = (*agent)->Run();
  g_agent = nullptr;
  agent->reset();
  return s.ok() ? 0 : Fail(s);
}

// `shoal node drain|join|rebalance`: a membership change sent to the coordinator.
struct DrainArgs {
  enum class Op { kDrain, kJoin, kRebalance } op = Op::kDrain;
  std::string node, url = "http://127.0.0.1:8080", admin_key_file;
  bool standby = false;  // join: wait as a spare instead of taking load now
};

int RunDrain(const DrainArgs& d) {
  auto url = loadgen::ParseUrl(d.url);
  if (!url.ok()) return Fail(url.status());
  auto target = loadgen::ResolveTarget(*url);
  if (!target.ok()) return Fail(target.status());
  using Op = DrainArgs::Op;
  nlohmann::json body = nlohmann::json::object();
  if (d.op != Op::kRebalance) body["node"] = d.node;
  if (d.op == Op::kJoin) body["standby"] = d.standby;
  const char* path = d.op == Op::kDrain  ? "/v1/cluster/drain"
                     : d.op == Op::kJoin ? "/v1/cluster/join"
                                         : "/v1/cluster/rebalance";
  auto admin = ReadKeyFile(d.admin_key_file, "--admin-key-file");
  if (!admin.ok()) return Fail(admin.status());
  auto r = loadgen::HttpPost(*target, path, body.dump(), *admin, 10.0);
  if (!r.ok()) return Fail(r.status());
  if (d.op == Op::kDrain)
    std::printf("%s: draining (the cluster re-plans without it at its next step)\n",
                d.node.c_str());
  else if (d.op == Op::kRebalance)
    std::printf("rebalancing (the cluster re-plans over every live node at its next step)\n");
  else if (d.standby)
    std::printf("%s: joined as a standby\n", d.node.c_str());
  else
    std::printf("%s: joined (the cluster rebalances onto it at its next step)\n", d.node.c_str());
  return 0;
}

}  // namespace

void AddNodeCommand(CLI::App& app, Runner* runner) {
  auto a = std::make_shared<NodeArgs>();
  CLI::App* cmd = app.add_subcommand("node", "Run a pipeline worker for `shoal serve --nodes`");
  cmd->add_option("--listen", a->listen, "HOST:PORT to listen on (port 0: pick one)")
      ->capture_default_str();
  cmd->add_option("--mem-limit", a->mem_limit,
                  "Memory this node may use (e.g. 256M; default 90% of available); assignments "
                  "that do not fit are refused");
  cmd->add_option("-t,--threads", a->threads, "Compute threads")->capture_default_str();
  cmd->add_option("--model-dir", a->model_dir, "Folder holding the model files")
      ->capture_default_str();
  cmd->add_option("--cache-dir", a->cache_dir,
                  "Where tensors received from the coordinator are cached by content hash "
                  "(default MODEL_DIR/.shoal-cache)");
  cmd->add_option("--cluster-key-file", a->key_file, "Shared cluster key file (>= 16 bytes)");
  cmd->add_option("--name", a->name, "Node name in plans and logs (default HOST:PORT)");
  cmd->add_flag("--no-measure", a->no_measure, "Skip the bandwidth/matmul probe at start");
  cmd->add_option("--link-cipher", a->link_cipher,
                  "Cipher of every cluster link after the handshake: aes-256-gcm, or none "
                  "(INSECURE, for measuring its cost only); the coordinator and every node must "
                  "use the same")
      ->capture_default_str();
  cmd->add_option("--max-links", a->max_links,
                  "Links served at once; one more is refused at once (bounds a flood of "
                  "connections)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  // The membership subcommands ask a serving coordinator (--url) to change its nodes.
  auto coordinator_call = [runner](CLI::App* sub, const std::shared_ptr<DrainArgs>& args) {
    sub->add_option("--url", args->url, "The coordinator's base URL")->capture_default_str();
    sub->add_option("--admin-key-file", args->admin_key_file,
                    "The cluster's admin key (the server's --admin-key-file; `shoal cluster up` "
                    "prints where its own is)")
        ->required();
    sub->callback([args, runner] { *runner = [args] { return RunDrain(*args); }; });
  };
  // `shoal node drain NODE --url URL`: the coordinator re-plans without NODE (no request lost).
  auto d = std::make_shared<DrainArgs>();
  CLI::App* drain = cmd->add_subcommand("drain", "Take a node out of a serving cluster");
  drain->add_option("node", d->node, "Node name or HOST:PORT")->required();
  coordinator_call(drain, d);
  auto j = std::make_shared<DrainArgs>();
  j->op = DrainArgs::Op::kJoin;
  CLI::App* join = cmd->add_subcommand(
      "join", "Add a running node to a serving cluster (it takes layers at the next step)");
  join->add_option("node", j->node, "The node's HOST:PORT")->required();
  join->add_flag("--standby", j->standby,
                 "Wait as a spare (take a failed node's place) instead of rebalancing onto it");
  coordinator_call(join, j);
  auto rb = std::make_shared<DrainArgs>();
  rb->op = DrainArgs::Op::kRebalance;
  CLI::App* rebalance = cmd->add_subcommand(
      "rebalance", "Re-plan a serving cluster over every live node, standbys included");
  coordinator_call(rebalance, rb);
  cmd->callback([a, runner, drain, join, rebalance] {
    if (drain->parsed() || join->parsed() || rebalance->parsed()) return;
    *runner = [a] { return RunNode(*a); };
  });
}

}  // namespace shoal::cli
