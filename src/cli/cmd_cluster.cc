// `shoal cluster up`: N `shoal node` workers (and S standbys) on loopback and a coordinator
// serving the API in the foreground; a node that exits is failed over, Ctrl-C or SIGTERM stops
// them all.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/child_group.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/serve.h"

namespace shoal::cli {
namespace {

// A node binds its port at once, then measures itself (STREAM triad, matmuls: ~1-3 s, longer
// when N nodes share few cores); 120 s is far beyond that and still ends a stuck start.
constexpr int kNodeStartTimeoutMs = 120'000;
constexpr int kPollMs = 50;

// SIGINT/SIGTERM before the server takes them over: stop starting and clean up.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void OnStartSignal(int sig) { g_stop_signal = sig; }

struct ClusterUpArgs {
  ServeArgs serve;
  int n_nodes = 4, n_standby = 0, threads_per_node = 1;
  std::string node_mem;
  bool no_measure = false;
};

// A private temp folder (0700) with a fresh 32-byte cluster key (0600) in it.
Result<std::string> MakeKeyDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/shoal-cluster-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr)
    return Errorf("mkdtemp {}: {}", templ, std::strerror(errno));
  // The cluster key authenticates the links; the admin key opens drain/join/rebalance.
  for (const char* name : {"/cluster.key", "/admin.key"}) {
    uint8_t raw[32];
    std::ifstream rnd("/dev/urandom", std::ios::binary);
    if (!rnd.read(reinterpret_cast<char*>(raw), sizeof(raw)))
      return Errorf("cannot read /dev/urandom");
    std::string hex;
    for (uint8_t b : raw) hex += fmt::format("{:02x}", b);
    const std::string key = templ + name;
    const int fd = ::open(key.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return Errorf("{}: {}", key, std::strerror(errno));
    const bool ok = ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
    ::close(fd);
    if (!ok) return Errorf("{}: short write", key);
  }
  return templ;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The port from a node's "listening on 127.0.0.1:PORT" line, or 0 while it is not there.
int ListeningPort(const std::string& log) {
  const std::string tag = "listening on 127.0.0.1:";
  const size_t at = log.find(tag);
  if (at == std::string::npos) return 0;
  return std::atoi(log.c_str() + at + tag.size());
}

void PrintTail(const std::string& path, int lines) {
  const std::string s = ReadAll(path);
  size_t at = s.size();
  for (int i = 0; i <= lines && at > 0; ++i) at = s.rfind('\n', at - 1);
  std::fprintf(stderr, "--- %s\n%s", path.c_str(),
               s.substr(at == std::string::npos ? 0 : at + 1).c_str());
}

// The nodes started: addresses and pids, the first n_nodes for the plan, then the standbys.
struct LocalNodes {
  std::string nodes, standby;  // "127.0.0.1:P1,127.0.0.1:P2,..."
  std::vector<pid_t> pids;     // [node - 1]
};

// Starts the nodes and waits until each one listens.
Result<LocalNodes> StartNodes(const ClusterUpArgs& a, const std::string& dir, uint64_t mem,
                              ChildGroup* group) {
  SHOAL_ASSIGN_OR_RETURN(std::string exe, SelfExePath());
  const std::filesystem::path model = std::filesystem::absolute(a.serve.model);
  std::vector<std::string> logs;
  std::vector<pid_t> pids;
  for (int i = 1; i <= a.n_nodes + a.n_standby; ++i) {
    std::vector<std::string> argv = {exe,
                                     "node",
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--model-dir",
                                     model.parent_path().string(),
                                     "--mem-limit",
                                     std::to_string(mem),
                                     "--cluster-key-file",
                                     dir + "/cluster.key",
                                     "--name",
                                     "node" + std::to_string(i),
                                     "-t",
                                     std::to_string(a.threads_per_node)};
    if (a.no_measure) argv.push_back("--no-measure");
    argv.insert(argv.end(), {"--link-cipher", a.serve.link_cipher});
    logs.push_back(dir + "/node" + std::to_string(i) + ".log");
    SHOAL_ASSIGN_OR_RETURN(pid_t pid, group->Spawn(argv, logs.back()));
    pids.push_back(pid);
  }
  std::vector<int> ports(logs.size(), 0);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kNodeStartTimeoutMs);
  for (;;) {
    size_t ready = 0;
    for (size_t i = 0; i < logs.size(); ++i) {
      if (ports[i] == 0) ports[i] = ListeningPort(ReadAll(logs[i]));
      ready += ports[i] != 0;
    }
    if (ready == logs.size()) break;
    if (g_stop_signal != 0) return Errorf("stopped by signal {}", static_cast<int>(g_stop_signal));
    int st = 0;
    if (group->Reap(&st) != 0 || std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < logs.size(); ++i)
        if (ports[i] == 0) PrintTail(logs[i], 5);
      return Errorf("{} of {} nodes did not start", logs.size() - ready, logs.size());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
  }
  LocalNodes out;
  out.pids = pids;
  for (size_t i = 0; i < ports.size(); ++i) {
    const bool standby = static_cast<int>(i) >= a.n_nodes;
    const std::string line = ReadAll(logs[i]);
    std::fprintf(stderr, "shoal cluster: node%zu (pid %d)%s %s", i + 1, static_cast<int>(pids[i]),
                 standby ? " standby," : "", line.substr(0, line.find('\n') + 1).c_str());
    std::string& list = standby ? out.standby : out.nodes;
    list += (list.empty() ? "127.0.0.1:" : ",127.0.0.1:") + std::to_string(ports[i]);
  }
  return out;
}

int ClusterUp(const ClusterUpArgs& a) {
  if (a.n_nodes < 1) return Fail(Errorf("--nodes must be at least 1"));
  if (a.n_standby < 0) return Fail(Errorf("--standby must be at least 0"));
  if (a.threads_per_node < 1) return Fail(Errorf("--threads-per-node must be at least 1"));
  const int n_all = a.n_nodes + a.n_standby;
  // Default: the nodes share 90% of the memory available now (a standby gets a node's share:
  // it must be able to take any node's place).
  auto mem =
      ParseMemSize(a.node_mem.empty() ? std::to_string(0.9 / n_all) : a.node_mem, "--node-mem");
  if (!mem.ok()) return Fail(mem.status());
  std::signal(SIGINT, OnStartSignal);
  std::signal(SIGTERM, OnStartSignal);
  auto dir = MakeKeyDir();
  if (!dir.ok()) return Fail(dir.status());
  std::fprintf(stderr,
               "shoal cluster: keys and logs in %s (admin key for `shoal node drain|join`: "
               "%s/admin.key)\n",
               dir->c_str(), dir->c_str());
  int rc = 1;
  {
    ChildGroup group;
    auto nodes = StartNodes(a, *dir, *mem, &group);
    if (!nodes.ok()) {
      Fail(nodes.status());
    } else {
      ServeArgs s = a.serve;
      s.nodes = nodes->nodes;
      s.standby = nodes->standby;
      s.cluster_key_file = *dir + "/cluster.key";
      s.admin_key_file = *dir + "/admin.key";
      std::fprintf(stderr,
                   "shoal cluster: %d nodes and %d standbys up (%llu MiB each); coordinator "
                   "--nodes %s%s%s\n",
                   a.n_nodes, a.n_standby, static_cast<unsigned long long>(*mem >> 20),
                   nodes->nodes.c_str(), a.n_standby > 0 ? " --standby " : "",
                   nodes->standby.c_str());
      // A node that exits is failed over by the coordinator (a standby takes its place, or the
      // others re-plan without it; requests in flight replay, none is lost). Only when the last
      // node is gone nothing can come back: then stop the coordinator (its SIGTERM drain) and
      // exit 1. Polls every 200 ms.
      std::atomic<bool> serving{true}, all_died{false};
      std::thread watcher([&] {
        while (serving) {
          int st = 0;
          if (const pid_t p = group.Reap(&st); p != 0) {
            const auto it = std::find(nodes->pids.begin(), nodes->pids.end(), p);
            const size_t left = group.size();
            std::fprintf(stderr, "shoal cluster: node%d (pid %d) exited (%s %d); %s\n",
                         static_cast<int>(it - nodes->pids.begin()) + 1, static_cast<int>(p),
                         WIFSIGNALED(st) ? "signal" : "status",
                         WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
                         left > 0 ? fmt::format("the coordinator fails over ({} of {} nodes left)",
                                                left, n_all)
                                        .c_str()
                                  : "no node left: stopping");
            if (left > 0) continue;
            all_died = true;
            // Again each second until Serve returns: the first one may land before the server
            // has taken the signal over.
            for (int i = 0; serving; ++i) {
              if (i % 5 == 0) ::kill(::getpid(), SIGTERM);
              std::this_thread::sleep_for(std::chrono::milliseconds(200));
            }
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      });
      rc = g_stop_signal != 0 ? 1 : Serve(s);
      serving = false;
      watcher.join();
      if (all_died) rc = 1;
      if (rc != 0)
        for (int i = 1; i <= n_all; ++i) PrintTail(*dir + "/node" + std::to_string(i) + ".log", 5);
    }
    group.StopAll();
  }
  std::error_code ec;
  std::filesystem::remove_all(*dir, ec);
  std::fprintf(stderr, "shoal cluster: stopped\n");
  return rc;
}

}  // namespace

void AddClusterCommand(CLI::App& app, Runner* runner) {
  CLI::App* cluster = app.add_subcommand("cluster", "Local clusters");
  cluster->require_subcommand(1);
  auto a = std::make_shared<ClusterUpArgs>();
  a->serve.threads = 1;  // the coordinator only samples; the nodes compute
  CLI::App* up = cluster->add_subcommand(
      "up", "Start N `shoal node` workers on loopback and serve the API over them (foreground)");
  up->add_option("-m,--model", a->serve.model, "GGUF model file")->required();
  up->add_option("--nodes", a->n_nodes, "Number of nodes")->capture_default_str();
  up->add_option("--standby", a->n_standby,
                 "Extra nodes that wait as standbys and take a failed node's place")
      ->capture_default_str();
  up->add_option("--node-mem", a->node_mem,
                 "Memory limit of each node (e.g. 256M; default: 90% of available / nodes)");
  up->add_option("--threads-per-node", a->threads_per_node, "Compute threads of each node")
      ->capture_default_str();
  AddParallelOptions(up, &a->serve);
  up->add_option("--link-dtype", a->serve.link_dtype,
                 "Activations between stages: f32 (bit-exact), f16 or q8_0")
      ->capture_default_str();
  up->add_option("--host", a->serve.host, "Address the API listens on")->capture_default_str();
  up->add_option("--port", a->serve.port, "API port (0: pick a free one)")->capture_default_str();
  up->add_option("--api-key", a->serve.api_key, "Require 'Authorization: Bearer KEY' on /v1");
  up->add_option("--max-model-len", a->serve.max_model_len,
                 "Prompt + generated tokens per sequence (default: the model's training context)");
  up->add_option("--max-num-seqs", a->serve.max_num_seqs, "Sequences in one step")
      ->capture_default_str();
  up->add_option("--max-num-batched-tokens", a->serve.max_batched, "Tokens in one step")
      ->capture_default_str();
  up->add_option("--kv-type", a->serve.kv_type, "KV cache type: f16 or f32")->capture_default_str();
  up->add_flag("--no-measure", a->no_measure, "Nodes skip their bandwidth/matmul probe");
  up->add_option("--link-cipher", a->serve.link_cipher,
                 "Cipher of every node link: aes-256-gcm, or none (INSECURE, for measuring)")
      ->capture_default_str();
  up->add_flag("--dry-run", a->serve.dry_run, "Print the plan and stop everything");
  up->callback([a, runner] { *runner = [a] { return ClusterUp(*a); }; });
}

}  // namespace shoal::cli
