// `shoal serve`: the OpenAI-compatible HTTP server over one local engine.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/serve.h"
#include "dist/cluster_file.h"
#include "dist/remote_executor.h"
#include "io/mapped_file.h"
#include "planner/model_profile.h"
#include "server/server.h"

namespace shoal::cli {
namespace {

// The cluster side of `serve --nodes`: connect, plan (printed), and with `assign` load layers.
Result<dist::Cluster> SetUpCluster(const ServeArgs& a, const EngineConfig& cfg,
                                   const gguf::File& file, bool assign, dist::ClusterOptions* co) {
  std::string key_file = a.cluster_key_file, link = a.link_dtype;
  if (!a.cluster_file.empty()) {
    if (!a.nodes.empty()) return Errorf("give --nodes or --cluster, not both");
    SHOAL_ASSIGN_OR_RETURN(dist::ClusterFile cf, dist::LoadClusterFile(a.cluster_file));
    co->nodes = std::move(cf.nodes);
    co->overrides = std::move(cf.overrides);
    if (key_file.empty()) key_file = cf.key_file;
    if (!a.link_dtype_set && !cf.link_dtype.empty()) link = cf.link_dtype;
  } else {
    co->nodes = SplitList(a.nodes);
  }
  if (key_file.empty())
    return Errorf("a cluster needs --cluster-key-file (or key_file in the cluster file)");
  SHOAL_ASSIGN_OR_RETURN(net::ClusterKey key, net::ClusterKey::LoadFile(key_file));
  const size_t slash = a.model.find_last_of('/');
  co->model_file = slash == std::string::npos ? a.model : a.model.substr(slash + 1);
  co->plan.max_num_seqs = cfg.max_num_seqs;
  co->plan.max_model_len = cfg.n_ctx;
  co->plan.block_size = cfg.block_size;
  co->plan.kv_dtype = cfg.kv_dtype;
  co->plan.max_batched_tokens = cfg.max_num_batched_tokens;
  SHOAL_ASSIGN_OR_RETURN(co->plan.link_dtype, planner::ParseLinkDType(link));
  co->swap_blocks = cfg.swap_blocks;
  SHOAL_ASSIGN_OR_RETURN(dist::Cluster cl, dist::ConnectAndPlan(*co, file, key));
  std::fprintf(stderr, "%s", planner::FormatPlan(cl.plan).c_str());
  if (assign) SHOAL_RETURN_IF_ERROR(dist::AssignLayers(cl, *co));
  return cl;
}

}  // namespace

int Serve(const ServeArgs& a) {
  server::ServerConfig sc;
  sc.http.host = a.host;
  sc.http.port = a.port;
  sc.http.max_body_bytes = a.max_body;
  sc.api_key = a.api_key;
  if (!a.api_key_file.empty()) {
    auto k = ReadFileToString(a.api_key_file);
    if (!k.ok()) return Fail(k.status().Annotate("--api-key-file"));
    std::string key = *k;
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' '))
      key.pop_back();
    if (key.empty()) return Fail(Errorf("--api-key-file {} is empty", a.api_key_file));
    sc.api_key = key;
  }
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
    dist::ClusterOptions co;
    auto cl = SetUpCluster(a, cfg, *b->file, false, &co);
    return cl.ok() ? 0 : Fail(cl.status());
  }
  RaiseFileLimit();
  server::Server srv(sc);
  if (Status s = srv.Listen(); !s.ok()) return Fail(s);
  std::fprintf(stderr, "shoal serve: listening on http://%s:%d (loading %s)\n", a.host.c_str(),
               srv.port(), a.model.c_str());
  // The model loads while /health already answers 503.
  Bundle bundle;
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
      dist::ClusterOptions co;
      auto cl = SetUpCluster(a, cfg, *bundle.file, true, &co);
      if (!cl.ok()) return srv.SetFailed(cl.status());
      const int32_t blocks = cl->n_blocks;
      nlohmann::json stages = nlohmann::json::array();
      for (size_t i = 0; i < cl->plan.stages.size(); ++i) {
        const planner::Stage& st = cl->plan.stages[i];
        stages.push_back({{"node", st.node_name},
                          {"address", cl->infos[static_cast<size_t>(st.node)].address},
                          {"layers", {st.first_layer, st.last_layer}},
                          {"mem_predicted_bytes", st.mem.total()},
                          {"mem_limit_bytes", st.mem_limit},
                          {"decode_ms_per_token", st.time.decode_s * 1e3}});
      }
      m.cluster = {{"mode", "pipeline"},
                   {"link_dtype", std::string(planner::LinkDTypeName(co.plan.link_dtype))},
                   {"stages", stages},
                   {"predicted_decode_tokens_per_s", cl->plan.decode_tokens_per_s},
                   {"predicted_throughput_tokens_per_s", cl->plan.throughput_tokens_per_s}};
      std::vector<std::string> names;
      for (const planner::Stage& st : cl->plan.stages) names.push_back(st.node_name);
      const int32_t n_stages = static_cast<int32_t>(cl->plan.stages.size());
      if (!recurrent) cfg.pipeline_groups = a.pipeline_groups > 0 ? a.pipeline_groups : n_stages;
      auto exec = std::make_unique<dist::RemoteExecutor>(std::move(*cl), hp.n_vocab, hp.n_embd);
      // Overlapped groups fill the pipeline themselves: one micro-batch per group step.
      exec->SetMicroBatches(cfg.pipeline_groups > 1 ? std::max(1, n_stages / cfg.pipeline_groups)
                                                    : n_stages);
      m.stage_metrics = [stats = exec->stage_stats(), names] {
        std::vector<server::StageMetrics> out;
        const std::vector<dist::StageLoad> loads = stats->Snapshot();
        for (size_t i = 0; i < loads.size(); ++i)
          out.push_back({static_cast<int32_t>(i), i < names.size() ? names[i] : "",
                         loads[i].busy_fraction, loads[i].tokens_per_s, loads[i].busy_s_total,
                         loads[i].tokens_total, dist::StageStats::kWindowS});
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
  cmd->add_option("--max-body-bytes", a->max_body, "Larger request bodies get 413")
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
  cmd->add_option("--pipeline-groups", a->pipeline_groups,
                  "With --nodes or --cluster: sequence groups whose steps overlap in the "
                  "pipeline (0: one per stage; 1: one step at a time)")
      ->capture_default_str();
  cmd->add_flag("--dry-run", a->dry_run, "With --nodes or --cluster: print the plan and exit");
  cmd->callback([a, runner, link] {
    a->link_dtype_set = link->count() > 0;
    *runner = [a] { return Serve(*a); };
  });
}

}  // namespace shoal::cli
