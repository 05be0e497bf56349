// `shoal node`: a pipeline worker that serves the layers a coordinator assigns it.
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "dist/node_agent.h"
#include "net/conn.h"

namespace shoal::cli {
namespace {

struct NodeArgs {
  std::string listen = "127.0.0.1:0", mem_limit, model_dir = ".", cache_dir, key_file, name;
  int threads = 1;
  bool no_measure = false;
};

dist::NodeAgent* g_agent = nullptr;
extern "C" void OnStopSignal(int) {
  if (g_agent) g_agent->Stop();  // only sets atomics: async-signal-safe
}

int RunNode(const NodeArgs& a) {
  auto listen = net::ParseHostPort(a.listen);
  if (!listen.ok()) return Fail(listen.status().Annotate("--listen"));
  dist::NodeOptions o;
  o.host = listen->first;
  o.port = listen->second;
  o.n_threads = ResolveThreads(a.threads);
  o.model_dir = a.model_dir;
  o.cache_dir = a.cache_dir;
  o.name = a.name;
  o.measure = !a.no_measure;
  // Without --mem-limit the node may use 90% of the memory available now.
  auto m = ParseMemSize(a.mem_limit.empty() ? "0.9" : a.mem_limit, "--mem-limit");
  if (!m.ok()) return Fail(m.status());
  o.mem_limit = *m;
  if (a.key_file.empty()) return Fail(Errorf("--cluster-key-file is required"));
  auto key = net::ClusterKey::LoadFile(a.key_file);
  if (!key.ok()) return Fail(key.status());
  auto agent = dist::NodeAgent::Start(o, std::move(*key));
  if (!agent.ok()) return Fail(agent.status());
  const planner::NodeInfo& info = (*agent)->info();
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
  cmd->callback([a, runner] { *runner = [a] { return RunNode(*a); }; });
}

}  // namespace shoal::cli
