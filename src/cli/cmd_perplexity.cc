// `shoal perplexity`: llama-perplexity's chunked perplexity of a text file.
#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "cluster/remote_executor.h"
#include "engine/perplexity.h"
#include "io/mapped_file.h"
#include "planner/expert_placement.h"
#include "planner/model_profile.h"
#include "threading/thread_pool.h"

namespace shoal::cli {
namespace {

// One sequence of n_ctx tokens over the nodes: plan, assign, and an executor for it.
Result<std::unique_ptr<Executor>> ConnectPipeline(const gguf::File& file, const std::string& path,
                                                  const std::string& nodes,
                                                  const std::string& key_file,
                                                  const std::string& link, DType kv, int ctx,
                                                  const std::string& parallel, bool fast) {
  if (key_file.empty()) return Errorf("--nodes needs --cluster-key-file");
  SHOAL_ASSIGN_OR_RETURN(net::ClusterKey key, net::ClusterKey::LoadFile(key_file));
  cluster::ClusterOptions co;
  co.nodes = SplitList(nodes);
  const size_t slash = path.find_last_of('/');
  co.model_file = slash == std::string::npos ? path : path.substr(slash + 1);
  co.plan.max_num_seqs = 1;
  co.plan.max_model_len = ctx;
  co.plan.max_batched_tokens = ctx;
  co.plan.kv_dtype = kv;
  SHOAL_ASSIGN_OR_RETURN(co.plan.link_dtype, planner::ParseLinkDType(link));
  SHOAL_ASSIGN_OR_RETURN(co.parallel, planner::ParseParallel(parallel));
  co.parallel.fast = fast;
  SHOAL_ASSIGN_OR_RETURN(cluster::Cluster cl, cluster::ConnectAndPlan(co, file, key));
  std::fprintf(stderr, "%s", planner::FormatPlan(cl.plan).c_str());
  SHOAL_RETURN_IF_ERROR(cluster::AssignLayers(cl, co));
  SHOAL_ASSIGN_OR_RETURN(planner::ModelProfile prof, planner::ProfileFromGguf(file));
  return std::unique_ptr<Executor>(
      std::make_unique<cluster::RemoteExecutor>(std::move(cl), prof.hp.n_vocab, prof.hp.n_embd));
}

// `--expert-load`: how evenly expert parallelism over 2, 4 and 8 members would spread the rows
// this text routed: the busiest member's load over the mean, averaged over the MoE layers (the
// worst layer in brackets), for the runtime's contiguous ranges, for a balanced placement, and
// for a balanced one with one redundant copy of a hot expert per member.
void PrintExpertLoad(const Model& m) {
  std::vector<const std::vector<int64_t>*> layers;
  for (const auto& l : m.ExpertLoad())
    if (!l.empty()) layers.push_back(&l);
  if (layers.empty()) {
    std::printf("expert load: the model counts no routed experts\n");
    return;
  }
  std::printf("expert load over %zu MoE layers: busiest member / mean (mean over layers, worst)\n",
              layers.size());
  std::printf("%-8s %-22s %-22s %-22s\n", "members", "contiguous (runtime)", "balanced",
              "balanced + 1 copy each");
  for (int members : {2, 4, 8}) {
    if (members > static_cast<int>(layers[0]->size())) break;
    std::string row = std::to_string(members);
    row.resize(8, ' ');
    for (int kind = 0; kind < 3; ++kind) {
      double sum = 0, worst = 0;
      for (const auto* l : layers) {
        auto p = kind == 0 ? planner::PlaceContiguous(*l, members)
                           : planner::PlaceBalanced(*l, members, kind == 1 ? 0 : members);
        const double r = p.ok() ? p->busiest_over_mean : 0;
        sum += r;
        worst = std::max(worst, r);
      }
      char cell[64];
      std::snprintf(cell, sizeof cell, " %.3f (%.3f)", sum / static_cast<double>(layers.size()),
                    worst);
      row += cell;
      row.resize(8 + 23 * static_cast<size_t>(kind + 1), ' ');
    }
    std::printf("%s\n", row.c_str());
  }
}

}  // namespace

void AddPerplexityCommand(CLI::App& app, Runner* runner) {
  auto* cmd = app.add_subcommand(
      "perplexity", "Perplexity of a text, computed like llama.cpp's llama-perplexity");
  struct Args {
    std::string model, file, kv_type = "f16", nodes, key_file, link = "f32", parallel,
                             tp_mode = "exact";
    bool expert_load = false;
    int ctx = 512, threads = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("-f,--file", a->file, "Text file")->required();
  cmd->add_option("-c,--ctx-size", a->ctx, "Tokens per chunk")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "Threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--kv-type", a->kv_type, "KV cache type: f16 or f32")->capture_default_str();
  cmd->add_option("--nodes", a->nodes,
                  "Compute through a pipeline of `shoal node` workers: HOST:PORT,HOST:PORT,...");
  cmd->add_option("--cluster-key-file", a->key_file, "Cluster key (with --nodes)");
  cmd->add_option("--link-dtype", a->link, "Activations between stages: f32, f16 or q8_0")
      ->capture_default_str();
  cmd->add_option("--parallel", a->parallel, "With --nodes: a forced layout, tp=T,pp=P");
  cmd->add_flag("--expert-load", a->expert_load,
                "Without --nodes: report how evenly expert parallelism would spread the experts "
                "this text routes to");
  cmd->add_option("--tp-mode", a->tp_mode, "With --parallel: exact or fast")
      ->check(CLI::IsMember({"exact", "fast"}))
      ->capture_default_str();
  cmd->callback([=] {
    *runner = [=]() -> int {
      auto text = ReadFileToString(a->file);
      if (!text.ok()) return Fail(text.status());
      auto b = LoadBundle(a->model, a->nodes.empty());
      if (!b.ok()) return Fail(b.status());
      auto kv = ParseKvType(a->kv_type);
      if (!kv.ok()) return Fail(kv.status());
      const auto ids = b->tokenizer->Encode(*text, true, false);
      std::fprintf(stderr, "tokenized %zu bytes into %zu tokens\n", text->size(), ids.size());
      const int32_t bos = b->tokenizer->add_bos() ? b->tokenizer->bos() : -1;
      auto progress = [](int32_t c, double ppl) {
        std::printf("[%d]%.4f,", c + 1, ppl);
        std::fflush(stdout);
      };
      Result<PerplexityResult> r = Errorf("unreachable");
      if (a->nodes.empty()) {
        ThreadPool pool(ResolveThreads(a->threads));
        r = ComputePerplexity(*b->model, ids, a->ctx, bos, *kv, &pool, progress);
      } else {
        auto exec = ConnectPipeline(*b->file, a->model, a->nodes, a->key_file, a->link, *kv, a->ctx,
                                    a->parallel, a->tp_mode == "fast");
        if (!exec.ok()) return Fail(exec.status());
        r = ComputePerplexity(**exec, ids, a->ctx, bos, 16, progress);
      }
      if (!r.ok()) return Fail(r.status());
      std::printf("\nFinal estimate: PPL = %.4f +/- %.5f (%d chunks of %d tokens, %lld scored)\n",
                  r->ppl, r->stderr_ppl, r->n_chunks, r->n_ctx,
                  static_cast<long long>(r->n_scored));
      if (a->expert_load && a->nodes.empty()) PrintExpertLoad(*b->model);
      return 0;
    };
  });
}

}  // namespace shoal::cli
