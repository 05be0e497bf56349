// BuildServedModel: bundle, context length, swap space, engine, chat template, model facts.
#include "server/served_model.h"

#include <algorithm>

#include "base/log.h"
#include "cluster/cluster_engine.h"
#include "planner/model_profile.h"

namespace shoal::server {

namespace {

// Swap space in blocks of the config's block size over every layer of the model.
Result<int32_t> SwapBlocks(const HParams& hp, const EngineConfig& cfg, uint64_t swap_bytes) {
  if (swap_bytes == 0) return 0;
  SHOAL_ASSIGN_OR_RETURN(uint64_t per_token, planner::KvBytesPerTokenPerLayer(hp, cfg.kv_dtype));
  const uint64_t per_block =
      per_token * static_cast<uint64_t>(hp.n_layer) * static_cast<uint64_t>(cfg.block_size);
  return static_cast<int32_t>(swap_bytes / std::max<uint64_t>(1, per_block));
}

// Tokens per sequence: --max-model-len, else the model's training context (4096 when unknown).
int32_t ContextLength(const HParams& hp, int32_t max_model_len) {
  if (max_model_len > 0) return max_model_len;
  return static_cast<int32_t>(hp.n_ctx_train > 0 ? hp.n_ctx_train : 4096);
}

}  // namespace

std::string ServedModelName(const std::string& served_name, const std::string& model_path) {
  if (!served_name.empty()) return served_name;
  const size_t slash = model_path.find_last_of('/');
  return slash == std::string::npos ? model_path : model_path.substr(slash + 1);
}

Result<planner::Plan> PlanPipeline(const ServeModelOptions& o) {
  if (!o.pipeline) return Errorf("--dry-run plans a cluster: give --nodes or --cluster");
  SHOAL_ASSIGN_OR_RETURN(Bundle b, LoadBundle(o.model_path, false));
  SHOAL_ASSIGN_OR_RETURN(planner::ModelProfile prof, planner::ProfileFromGguf(*b.file));
  EngineConfig cfg = o.engine;
  cfg.n_ctx = ContextLength(prof.hp, o.max_model_len);
  cluster::ClusterOptions co = o.pipeline->failover.cluster;
  cluster::SetPlanSizes(cfg, &co.plan);
  SHOAL_ASSIGN_OR_RETURN(cluster::Cluster cl,
                         cluster::ConnectAndPlan(co, *b.file, o.pipeline->key));
  return cl.plan;
}

Result<ServedModel> BuildServedModel(ServeModelOptions o) {
  ServedModel m;
  SHOAL_ASSIGN_OR_RETURN(m.bundle, LoadBundle(o.model_path, !o.pipeline));
  const gguf::File& file = *m.bundle.file;
  SHOAL_ASSIGN_OR_RETURN(planner::ModelProfile prof, planner::ProfileFromGguf(file));
  const HParams& hp = prof.hp;
  EngineConfig& cfg = o.engine;
  cfg.n_ctx = ContextLength(hp, o.max_model_len);
  SHOAL_ASSIGN_OR_RETURN(cfg.swap_blocks, SwapBlocks(hp, cfg, o.swap_bytes));
  m.tokenizer = m.bundle.tokenizer.get();
  m.eog = m.tokenizer->EogTokens();
  if (!o.pipeline) {
    SHOAL_ASSIGN_OR_RETURN(m.engine, Engine::Create(m.bundle.model.get(), cfg, m.eog));
  } else {
    PipelineOptions& p = *o.pipeline;
    SHOAL_ASSIGN_OR_RETURN(cluster::ClusterEngine ce,
                           cluster::BuildClusterEngine(file, hp, cfg, std::move(p.failover),
                                                       std::move(p.key), p.pipeline_groups, m.eog));
    m.engine = std::move(ce.engine);
    m.cluster = ce.control;
  }
  m.info.name = ServedModelName(o.served_name, o.model_path);
  m.info.max_model_len = m.engine->config().n_ctx;
  m.info.tokenizer = m.tokenizer;
  Result<ChatTemplateKind> kind =
      o.chat_template.empty() ? DetectChatTemplate(file.GetStringOr("tokenizer.chat_template", ""))
                              : ChatTemplateFromName(o.chat_template);
  if (kind.ok()) {
    m.info.chat_template = *kind;
  } else if (!o.chat_template.empty()) {
    return kind.status().Annotate("--chat-template");
  } else {
    Log(LogLevel::kWarn, "no usable chat template ({}); chat requests get 400",
        kind.status().message());
  }
  m.meta = {{"n_vocab", hp.n_vocab},
            {"n_ctx_train", hp.n_ctx_train},
            {"n_embd", hp.n_embd},
            {"n_layer", hp.n_layer},
            {"kv_blocks", m.engine->kv_blocks()},
            {"block_size", cfg.block_size}};
  return m;
}

}  // namespace shoal::server
