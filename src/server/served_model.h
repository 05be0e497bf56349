// What `shoal serve` serves: the engine (local, or over a failover pipeline) with its tokenizer,
// chat template and model facts, built in one place from the serve options.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_control.h"
#include "cluster/failover_executor.h"
#include "engine/bundle.h"
#include "engine/engine.h"
#include "net/auth.h"
#include "planner/plan.h"
#include "server/openai_request.h"

namespace shoal::server {

struct ServedModel {
  Bundle bundle;  // first: destroyed after the engine that reads its model
  std::unique_ptr<Engine> engine;
  const Tokenizer* tokenizer = nullptr;  // bundle's
  ModelInfo info;
  std::vector<int32_t> eog;
  nlohmann::json meta;  // extra fields for /v1/models (n_vocab, n_ctx_train, ...)
  // The pipeline behind the engine (its executor, owned by `engine`); null when local. It
  // answers GET /v1/cluster, the cluster's /metrics lines, 503 while it cannot serve, and the
  // admin's POST /v1/cluster/drain, /join and /rebalance.
  cluster::ClusterControl* cluster = nullptr;
};

// A pipeline to serve over: the nodes, spares, failure detection and key (the plan's sizes
// come from the engine config), and the sequence groups in flight (0: one per stage).
struct PipelineOptions {
  cluster::FailoverOptions failover;
  net::ClusterKey key;
  int32_t pipeline_groups = 0;
};

struct ServeModelOptions {
  std::string model_path;
  std::string served_name;    // "" = the file name
  std::string chat_template;  // "" = detected from the GGUF's template
  EngineConfig engine;        // n_ctx: set from max_model_len, or the model's training context
  int32_t max_model_len = 0;  // 0 = the model's training context (4096 when unknown)
  uint64_t swap_bytes = 0;    // preemption by swap: this much swap space (0 = recompute)
  std::optional<PipelineOptions> pipeline;  // none: the whole model in this process
};

// Loads the model (or only its file and tokenizer, for a pipeline) and builds the engine.
Result<ServedModel> BuildServedModel(ServeModelOptions opts);
// `serve --dry-run`: the plan the pipeline would start with (an error without one).
Result<planner::Plan> PlanPipeline(const ServeModelOptions& opts);
// The name clients ask for: --served-model-name, else the model's file name.
std::string ServedModelName(const std::string& served_name, const std::string& model_path);

}  // namespace shoal::server
