// `shoal serve`: flags -> ServerConfig + ServeModelOptions; the server and BuildServedModel do
// the rest (the model loads on a thread while /health answers 503).
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/serve.h"
#include "cluster/cluster_engine.h"
#include "cluster/cluster_file.h"
#include "cluster/remote_executor.h"
#include "net/link_cipher.h"
#include "planner/cost_model.h"
#include "planner/plan.h"
#include "server/served_model.h"
#include "server/server.h"

namespace shoal::cli {
namespace {

// The cluster side of `serve --nodes`: the nodes, standbys, key, link types and failure
// detection (the plan's sizes come from the engine config: cluster::SetPlanSizes).
Result<server::PipelineOptions> ClusterSetup(const ServeArgs& a) {
  cluster::FailoverOptions failover;
  cluster::FailoverOptions* fo = &failover;
  cluster::ClusterOptions* co = &fo->cluster;
  std::string key_file = a.cluster_key_file, link = a.link_dtype;
  if (!a.cluster_file.empty()) {
    if (!a.nodes.empty()) return Errorf("give --nodes or --cluster, not both");
    SHOAL_ASSIGN_OR_RETURN(cluster::ClusterFile cf, cluster::LoadClusterFile(a.cluster_file));
    co->nodes = std::move(cf.nodes);
    co->overrides = std::move(cf.overrides);
    fo->standby = std::move(cf.standby);
    fo->standby_overrides = std::move(cf.standby_overrides);
    if (key_file.empty()) key_file = cf.key_file;
    if (!a.link_dtype_set && !cf.link_dtype.empty()) link = cf.link_dtype;
  } else {
    co->nodes = SplitList(a.nodes);
  }
  for (const std::string& s : SplitList(a.standby)) fo->standby.push_back(s);
  if (key_file.empty())
    return Errorf("a cluster needs --cluster-key-file (or key_file in the cluster file)");
  SHOAL_ASSIGN_OR_RETURN(net::ClusterKey key, net::ClusterKey::LoadFile(key_file));
  const size_t slash = a.model.find_last_of('/');
  co->model_file = slash == std::string::npos ? a.model : a.model.substr(slash + 1);
  SHOAL_ASSIGN_OR_RETURN(co->plan.link_dtype, planner::ParseLinkDType(link));
  SHOAL_ASSIGN_OR_RETURN(co->link_cipher, net::ParseLinkCipher(a.link_cipher));
  SHOAL_ASSIGN_OR_RETURN(co->parallel, planner::ParseParallel(a.parallel));
  if (a.tp_mode != "exact" && a.tp_mode != "fast")
    return Errorf("--tp-mode {}: exact or fast", a.tp_mode);
  co->parallel.fast = a.tp_mode == "fast";
  co->watch.heartbeat_ms = a.heartbeat_ms;
  co->watch.suspect_ms = a.suspect_ms;
  co->watch.dead_ms = a.dead_ms;
  SHOAL_RETURN_IF_ERROR(cluster::CheckWatchConfig(co->watch));
  return server::PipelineOptions{std::move(failover), std::move(key), a.pipeline_groups};
}

// The HTTP side: listener, keys, queue and stream limits.
Status ServerSetup(const ServeArgs& a, server::ServerConfig* sc) {
  sc->http.host = a.host;
  sc->http.port = a.port;
  sc->http.max_body_bytes = a.max_body;
  sc->http.max_connections = a.max_connections;
  sc->http.header_timeout_s = a.header_timeout;
  sc->http.keep_alive_timeout_s = a.keep_alive_timeout;
  if (a.ssl_certfile.empty() != a.ssl_keyfile.empty())
    return Errorf("--ssl-certfile and --ssl-keyfile go together");
  sc->http.ssl_certfile = a.ssl_certfile;
  sc->http.ssl_keyfile = a.ssl_keyfile;
  sc->api_key = a.api_key;
  if (!a.api_key_file.empty()) {
    SHOAL_ASSIGN_OR_RETURN(sc->api_key, ReadKeyFile(a.api_key_file, "--api-key-file"));
  }
  if (!a.admin_key_file.empty()) {
    SHOAL_ASSIGN_OR_RETURN(std::string k, ReadKeyFile(a.admin_key_file, "--admin-key-file"));
    // 16 bytes, as for the cluster key: the admin key may put a node into the pipeline.
    if (k.size() < 16) return Errorf("--admin-key-file: the key needs >= 16 bytes");
    if (k == sc->api_key)
      return Errorf("--admin-key-file: the admin key must differ from the API key");
    sc->admin_key = k;
  }
  sc->max_queued_sequences = a.max_queued_seqs;
  sc->stream_buffer_bytes = a.stream_buffer;
  sc->stream_stall_timeout_s = a.stream_stall_timeout;
  sc->served_model_name = server::ServedModelName(a.served_name, a.model);
  sc->max_queued_requests = a.max_queued;
  sc->drain_timeout_s = a.drain_timeout;
  return Status::Ok();
}

// The model side: engine sizes, swap space, chat template, and the pipeline if any.
Status ModelSetup(const ServeArgs& a, server::ServeModelOptions* o) {
  o->model_path = a.model;
  o->served_name = a.served_name;
  o->chat_template = a.chat_template;
  o->max_model_len = a.max_model_len;
  EngineConfig& cfg = o->engine;
  cfg.n_threads = ResolveThreads(a.threads);
  cfg.block_size = a.block_size;
  cfg.max_num_seqs = a.max_num_seqs;
  cfg.max_num_batched_tokens = a.max_batched;
  cfg.enable_prefix_caching = !a.no_prefix_caching;
  SHOAL_ASSIGN_OR_RETURN(cfg.kv_dtype, ParseKvType(a.kv_type));
  if (!a.kv_mem.empty()) {
    SHOAL_ASSIGN_OR_RETURN(cfg.kv_mem_bytes, ParseMemSize(a.kv_mem, "--kv-mem"));
  }
  if (!a.swap_space.empty()) {
    SHOAL_ASSIGN_OR_RETURN(o->swap_bytes, ParseMemSize(a.swap_space, "--swap-space"));
  }
  if (a.nodes.empty() && a.cluster_file.empty()) return Status::Ok();
  SHOAL_ASSIGN_OR_RETURN(server::PipelineOptions p, ClusterSetup(a));
  o->pipeline.emplace(std::move(p));
  return Status::Ok();
}

}  // namespace

void AddParallelOptions(CLI::App* cmd, ServeArgs* a) {
  cmd->add_option("--parallel", a->parallel,
                  "With --nodes or --cluster: force a layout, tp=T,pp=P[,ep=T]: stages of T "
                  "nodes each that split every layer (heads, FFN columns, experts) "
                  "(default: a pipeline of every node)");
  cmd->add_option("--tp-mode", a->tp_mode,
                  "How a split layer computes: exact (bit-identical to one process) or fast "
                  "(partial sums added in member order: half the collectives, not bit-identical)")
      ->capture_default_str();
}

int Serve(const ServeArgs& a) {
  server::ServerConfig sc;
  server::ServeModelOptions mo;
  if (Status s = ServerSetup(a, &sc); !s.ok()) return Fail(s);
  if (Status s = ModelSetup(a, &mo); !s.ok()) return Fail(s);
  if (a.dry_run) {  // plans the cluster over the nodes and prints the plan
    auto plan = server::PlanPipeline(mo);
    if (!plan.ok()) return Fail(plan.status());
    std::fprintf(stderr, "%s", planner::FormatPlan(*plan).c_str());
    return 0;
  }
  // 64 descriptors beside the connections: the model file, logs, node links and the listener.
  if (const uint64_t fds = RaiseFileLimit(); fds > 0 && fds < uint64_t(a.max_connections) + 64)
    std::fprintf(stderr,
                 "shoal serve: the descriptor limit (%llu) is below --max-connections %d + 64; "
                 "connections past it wait in the backlog\n",
                 static_cast<unsigned long long>(fds), a.max_connections);
  server::Server srv(sc);
  if (Status s = srv.Listen(); !s.ok()) return Fail(s);
  std::fprintf(stderr, "shoal serve: listening on %s://%s:%d (loading %s)\n",
               a.ssl_certfile.empty() ? "http" : "https", a.host.c_str(), srv.port(),
               a.model.c_str());
  // The model loads while /health already answers 503.
  std::thread loader([&] {
    auto m = server::BuildServedModel(std::move(mo));
    if (!m.ok()) return srv.SetFailed(m.status());
    if (m->cluster)
      std::fprintf(stderr, "%s", planner::FormatPlan(m->cluster->stats().plan).c_str());
    std::fprintf(stderr, "shoal serve: ready (%d KV blocks of %d tokens, max model len %d)\n",
                 m->engine->kv_blocks(), m->engine->config().block_size, m->engine->config().n_ctx);
    srv.SetReady(std::move(*m));
  });
  const Status s = srv.Run();
  loader.join();
  if (!s.ok()) return Fail(s);
  std::fprintf(stderr, "shoal serve: stopped\n");
  return 0;
}

void AddServeCommand(CLI::App& app, Runner* runner) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("--host", a->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", a->port, "TCP port (0: pick a free one)")->capture_default_str();
  cmd->add_option("--api-key", a->api_key, "Require 'Authorization: Bearer KEY' on /v1 paths");
  cmd->add_option("--api-key-file", a->api_key_file, "Read the API key from this file");
  cmd->add_option("--admin-key-file", a->admin_key_file,
                  "The cluster's admin key (>= 16 bytes, not the API key): the only credential "
                  "for /v1/cluster/drain, /join and /rebalance (without it they answer 403)");
  cmd->add_option("--served-model-name", a->served_name,
                  "Model name in the API (default: the file name)");
  cmd->add_option("-t,--threads", a->threads, "Compute threads (0: all)")->capture_default_str();
  cmd->add_option("--max-model-len", a->max_model_len,
                  "Prompt + generated tokens per sequence (default: the model's training context)");
  cmd->add_option("--kv-mem", a->kv_mem,
                  "KV cache budget: bytes with a unit (2G, 512M) or a fraction of free RAM (0.3)");
  cmd->add_option("--kv-type", a->kv_type, "KV cache type: f16 or f32")->capture_default_str();
  cmd->add_option("--block-size", a->block_size, "Tokens per KV block")->capture_default_str();
  cmd->add_option("--max-num-seqs", a->max_num_seqs, "Sequences in one step")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", a->max_batched, "Tokens in one step")
      ->capture_default_str();
  cmd->add_flag("--no-enable-prefix-caching", a->no_prefix_caching,
                "Disable reuse of cached prompt prefixes");
  cmd->add_option("--swap-space", a->swap_space,
                  "CPU memory for swapped-out KV blocks (e.g. 4G); default: preempt by recompute");
  cmd->add_option("--max-queued-requests", a->max_queued,
                  "Requests waiting for their first token before new ones get 429 (-1: no limit)")
      ->capture_default_str();
  cmd->add_option("--max-queued-sequences", a->max_queued_seqs,
                  "Sequences (prompts x n) of those requests before new ones get 429 (-1: no "
                  "limit)")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", a->max_body, "Larger request bodies get 413")
      ->capture_default_str();
  cmd->add_option("--max-connections", a->max_connections,
                  "Open connections; one more gets 503 and is closed at once")
      ->capture_default_str();
  cmd->add_option("--header-timeout", a->header_timeout,
                  "Seconds a request (headers and body) may take to arrive")
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout", a->keep_alive_timeout,
                  "Seconds an idle keep-alive connection is kept")
      ->capture_default_str();
  cmd->add_option("--ssl-certfile", a->ssl_certfile,
                  "PEM certificate chain: with --ssl-keyfile the API speaks only HTTPS");
  cmd->add_option("--ssl-keyfile", a->ssl_keyfile, "PEM private key of --ssl-certfile");
  cmd->add_option("--stream-buffer-bytes", a->stream_buffer,
                  "A stream whose client lags by more bytes is paused until it reads")
      ->capture_default_str();
  cmd->add_option("--stream-stall-timeout", a->stream_stall_timeout,
                  "Seconds a paused stream waits for its client before it is dropped")
      ->capture_default_str();
  cmd->add_option("--drain-timeout", a->drain_timeout,
                  "Seconds in-flight requests get to finish after SIGTERM")
      ->capture_default_str();
  cmd->add_option("--chat-template", a->chat_template,
                  "Chat template name, overriding the model's (llama3, chatml, ...)");
  cmd->add_option("--nodes", a->nodes,
                  "Run as a pipeline over these `shoal node` workers: HOST:PORT,HOST:PORT,...");
  cmd->add_option("--cluster-key-file", a->cluster_key_file,
                  "Shared cluster key (>= 16 bytes) that authenticates every node link");
  cmd->add_option("--cluster", a->cluster_file,
                  "Run as a pipeline over the nodes of this TOML file (see docs/CLUSTER.md)");
  CLI::Option* link = cmd->add_option("--link-dtype", a->link_dtype,
                                      "Activations between stages: f32 (bit-exact), f16 or q8_0")
                          ->capture_default_str();
  cmd->add_option("--link-cipher", a->link_cipher,
                  "Cipher of every node link after the handshake: aes-256-gcm, or none "
                  "(INSECURE: for measuring its cost only; every node must use the same)")
      ->capture_default_str();
  cmd->add_option("--pipeline-groups", a->pipeline_groups,
                  "With --nodes or --cluster: sequence groups whose steps overlap in the "
                  "pipeline (0: one per stage; 1: one step at a time)")
      ->capture_default_str();
  cmd->add_flag("--dry-run", a->dry_run, "With --nodes or --cluster: print the plan and exit");
  AddParallelOptions(cmd, a.get());
  cmd->add_option("--standby", a->standby,
                  "Spare nodes that take a failed node's place: HOST:PORT,HOST:PORT,...");
  cmd->add_option("--heartbeat-ms", a->heartbeat_ms, "Ping every node link this often")
      ->capture_default_str();
  cmd->add_option("--suspect-ms", a->suspect_ms, "A node silent this long is suspect (waited for)")
      ->capture_default_str();
  cmd->add_option("--dead-ms", a->dead_ms,
                  "A node silent this long is dead: re-plan without it (a closed link is at once)")
      ->capture_default_str();
  cmd->callback([a, runner, link] {
    a->link_dtype_set = link->count() > 0;
    *runner = [a] { return Serve(*a); };
  });
}

}  // namespace shoal::cli
