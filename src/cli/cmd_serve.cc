// `shoal serve`: the OpenAI-compatible HTTP server over one local engine.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include "cli/cluster_view.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/serve.h"
#include "cluster/cluster_file.h"
#include "cluster/failover_executor.h"
#include "cluster/remote_executor.h"
#include "io/mapped_file.h"
#include "net/link_cipher.h"
#include "planner/model_profile.h"
#include "server/server.h"

namespace shoal::cli {
namespace {

// The cluster side of `serve --nodes`: the nodes, standbys, key and plan sizes.
Status ClusterSetup(const ServeArgs& a, const EngineConfig& cfg, cluster::FailoverOptions* fo,
                    std::optional<net::ClusterKey>* key) {
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
  SHOAL_ASSIGN_OR_RETURN(net::ClusterKey k, net::ClusterKey::LoadFile(key_file));
  key->emplace(std::move(k));
  const size_t slash = a.model.find_last_of('/');
  co->model_file = slash == std::string::npos ? a.model : a.model.substr(slash + 1);
  co->plan.max_num_seqs = cfg.max_num_seqs;
  co->plan.max_model_len = cfg.n_ctx;
  co->plan.block_size = cfg.block_size;
  co->plan.kv_dtype = cfg.kv_dtype;
  co->plan.max_batched_tokens = cfg.max_num_batched_tokens;
  SHOAL_ASSIGN_OR_RETURN(co->plan.link_dtype, planner::ParseLinkDType(link));
  co->swap_blocks = cfg.swap_blocks;
  SHOAL_ASSIGN_OR_RETURN(co->link_cipher, net::ParseLinkCipher(a.link_cipher));
  co->watch.heartbeat_ms = a.heartbeat_ms;
  co->watch.suspect_ms = a.suspect_ms;
  co->watch.dead_ms = a.dead_ms;
  return cluster::CheckWatchConfig(co->watch);
}

}  // namespace

int Serve(const ServeArgs& a) {
  server::ServerConfig sc;
  sc.http.host = a.host;
  sc.http.port = a.port;
  sc.http.max_body_bytes = a.max_body;
  sc.http.max_connections = a.max_connections;
  sc.http.header_timeout_s = a.header_timeout;
  sc.http.keep_alive_timeout_s = a.keep_alive_timeout;
  if (a.ssl_certfile.empty() != a.ssl_keyfile.empty())
    return Fail(Errorf("--ssl-certfile and --ssl-keyfile go together"));
  sc.http.ssl_certfile = a.ssl_certfile;
  sc.http.ssl_keyfile = a.ssl_keyfile;
  sc.api_key = a.api_key;
  if (!a.api_key_file.empty()) {
    auto k = ReadKeyFile(a.api_key_file, "--api-key-file");
    if (!k.ok()) return Fail(k.status());
    sc.api_key = *k;
  }
  if (!a.admin_key_file.empty()) {
    auto k = ReadKeyFile(a.admin_key_file, "--admin-key-file");
    if (!k.ok()) return Fail(k.status());
    // 16 bytes, as for the cluster key: the admin key may put a node into the pipeline.
    if (k->size() < 16) return Fail(Errorf("--admin-key-file: the key needs >= 16 bytes"));
    if (*k == sc.api_key)
      return Fail(Errorf("--admin-key-file: the admin key must differ from the API key"));
    sc.admin_key = *k;
  }
  sc.max_queued_sequences = a.max_queued_seqs;
  sc.stream_buffer_bytes = a.stream_buffer;
  sc.stream_stall_timeout_s = a.stream_stall_timeout;
  std::string name = a.served_name;
  if (name.empty()) {
    const size_t slash = a.model.find_last_of('/');
    name = slash == std::string::npos ? a.model : a.model.substr(slash + 1);
  }
  sc.served_model_name = name;
  sc.max_queued_requests = a.max_queued;
  sc.drain_timeout_s = a.drain_timeout;

  EngineConfig cfg;
  cfg.n_threads = ResolveThreads(a.threads);
  cfg.block_size = a.block_size;
  cfg.max_num_seqs = a.max_num_seqs;
  cfg.max_num_batched_tokens = a.max_batched;
  cfg.enable_prefix_caching = !a.no_prefix_caching;
  auto kv = ParseKvType(a.kv_type);
  if (!kv.ok()) return Fail(kv.status());
  cfg.kv_dtype = *kv;
  uint64_t swap_bytes = 0;
  if (!a.kv_mem.empty()) {
    auto b = ParseMemSize(a.kv_mem, "--kv-mem");
    if (!b.ok()) return Fail(b.status());
    cfg.kv_mem_bytes = *b;
  }
  if (!a.swap_space.empty()) {
    auto b = ParseMemSize(a.swap_space, "--swap-space");
    if (!b.ok()) return Fail(b.status());
    swap_bytes = *b;
  }

  if (a.dry_run) {
    if (a.nodes.empty() && a.cluster_file.empty())
      return Fail(Errorf("--dry-run plans a cluster: give --nodes or --cluster"));
    auto b = LoadBundle(a.model, false);
    if (!b.ok()) return Fail(b.status());
    auto prof = planner::ProfileFromGguf(*b->file);
    if (!prof.ok()) return Fail(prof.status());
    cfg.n_ctx = a.max_model_len > 0
                    ? a.max_model_len
                    : static_cast<int32_t>(prof->hp.n_ctx_train > 0 ? prof->hp.n_ctx_train : 4096);
    cluster::FailoverOptions fo;
    std::optional<net::ClusterKey> key;
    if (Status s = ClusterSetup(a, cfg, &fo, &key); !s.ok()) return Fail(s);
    auto cl = cluster::ConnectAndPlan(fo.cluster, *b->file, *key);
    if (!cl.ok()) return Fail(cl.status());
    std::fprintf(stderr, "%s", planner::FormatPlan(cl->plan).c_str());
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
  Bundle bundle;
  // Set by the loader: stopped after the server drains, so an engine thread waiting for nodes
  // (nothing fits) gives up and the process exits.
  std::atomic<cluster::FailoverExecutor*> failover{nullptr};
  std::thread loader([&] {
    const bool local = a.nodes.empty() && a.cluster_file.empty();
    auto b = LoadBundle(a.model, local);
    if (!b.ok()) return srv.SetFailed(b.status());
    bundle = std::move(*b);
    auto prof = planner::ProfileFromGguf(*bundle.file);
    if (!prof.ok()) return srv.SetFailed(prof.status());
    const HParams hp = prof->hp;
    cfg.n_ctx = a.max_model_len > 0
                    ? a.max_model_len
                    : static_cast<int32_t>(hp.n_ctx_train > 0 ? hp.n_ctx_train : 4096);
    if (swap_bytes > 0) {
      auto per_token = planner::KvBytesPerTokenPerLayer(hp, cfg.kv_dtype);
      if (!per_token.ok()) return srv.SetFailed(per_token.status());
      cfg.swap_blocks = static_cast<int32_t>(
          swap_bytes / std::max<uint64_t>(1, *per_token * static_cast<uint64_t>(hp.n_layer) *
                                                 static_cast<uint64_t>(cfg.block_size)));
    }
    server::ServedModel m;
    m.tokenizer = bundle.tokenizer.get();
    m.eog = bundle.tokenizer->EogTokens();
    if (local) {
      auto engine = Engine::Create(bundle.model.get(), cfg, m.eog);
      if (!engine.ok()) return srv.SetFailed(engine.status());
      m.engine = std::move(*engine);
    } else {
      // A per-sequence recurrent state (kimi-k3) lives on the stages owning its layers, in slots
      // the scheduler allots: Engine::Create's rule (no swap, snapshots for the prefix cache, one
      // group).
      bool recurrent = false;
      for (int64_t il = 0; il < hp.n_layer; ++il)
        recurrent = recurrent || hp.is_recurrent_layer(il);
      if (recurrent) {
        cfg.state_slots = std::max(1, cfg.max_num_seqs);
        cfg.state_snapshots = StateSnapshotSlots(cfg.state_slots);  // the nodes allot them too
        cfg.swap_blocks = 0;
        cfg.pipeline_groups = 1;
      }
      cluster::FailoverOptions fo;
      std::optional<net::ClusterKey> key;
      if (Status s = ClusterSetup(a, cfg, &fo, &key); !s.ok()) return srv.SetFailed(s);
      auto ex = cluster::FailoverExecutor::Create(fo, *bundle.file, *key, hp.n_vocab, hp.n_embd);
      if (!ex.ok()) return srv.SetFailed(ex.status());
      std::unique_ptr<cluster::FailoverExecutor> exec = std::move(*ex);
      const cluster::FailoverStats first = exec->stats();
      std::fprintf(stderr, "%s", planner::FormatPlan(first.plan).c_str());
      const int32_t blocks = static_cast<int32_t>(planner::KvTokensPerLayer(fo.cluster.plan) /
                                                  fo.cluster.plan.block_size);
      const int32_t n_stages = static_cast<int32_t>(first.plan.stages.size());
      if (!recurrent) cfg.pipeline_groups = a.pipeline_groups > 0 ? a.pipeline_groups : n_stages;
      // Overlapped groups fill the pipeline themselves: one micro-batch per group step.
      const int32_t groups = cfg.pipeline_groups;
      exec->SetMicroBatches(
          [groups](int32_t stages) { return groups > 1 ? std::max(1, stages / groups) : stages; });
      cluster::FailoverExecutor* fx = exec.get();  // owned by the engine, which outlives m's views
      failover = fx;
      m.cluster_now = [fx] { return ClusterJson(fx->stats()); };
      m.extra_metrics = [fx] { return FailoverMetrics(fx->stats()); };
      m.unavailable = [fx] { return fx->Unavailable(); };
      m.drain = [fx](const std::string& node) { return fx->Drain(node); };
      m.join = [fx](const std::string& node, bool standby) { return fx->Join(node, standby); };
      m.rebalance = [fx] {
        fx->Rebalance();
        return Status::Ok();
      };
      m.stage_metrics = [fx] {
        std::vector<server::StageMetrics> out;
        const std::vector<cluster::StageLoad> loads = fx->StageLoads();
        const std::vector<std::string> names = fx->StageNames();
        for (size_t i = 0; i < loads.size(); ++i)
          out.push_back({static_cast<int32_t>(i), i < names.size() ? names[i] : "",
                         loads[i].busy_fraction, loads[i].tokens_per_s, loads[i].busy_s_total,
                         loads[i].tokens_total, cluster::StageStats::kWindowS});
        return out;
      };
      m.engine = std::make_unique<Engine>(std::move(exec), cfg, blocks, m.eog);
    }
    m.info.name = name;
    m.info.max_model_len = cfg.n_ctx;
    m.info.tokenizer = bundle.tokenizer.get();
    Result<ChatTemplateKind> kind =
        a.chat_template.empty()
            ? DetectChatTemplate(bundle.file->GetStringOr("tokenizer.chat_template", ""))
            : ChatTemplateFromName(a.chat_template);
    if (kind.ok()) {
      m.info.chat_template = *kind;
    } else if (!a.chat_template.empty()) {
      return srv.SetFailed(kind.status().Annotate("--chat-template"));
    } else {
      std::fprintf(stderr, "shoal serve: no usable chat template (%s); chat requests get 400\n",
                   kind.status().message().c_str());
    }
    m.meta = {{"n_vocab", hp.n_vocab},
              {"n_ctx_train", hp.n_ctx_train},
              {"n_embd", hp.n_embd},
              {"n_layer", hp.n_layer},
              {"kv_blocks", m.engine->kv_blocks()},
              {"block_size", cfg.block_size}};
    std::fprintf(stderr, "shoal serve: ready (%d KV blocks of %d tokens, max model len %d)\n",
                 m.engine->kv_blocks(), cfg.block_size, cfg.n_ctx);
    srv.SetReady(std::move(m));
  });
  const Status s = srv.Run();
  loader.join();
  if (cluster::FailoverExecutor* fx = failover.load()) fx->Stop();
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
