// FormatPlan: the placement as a table (`shoal serve --dry-run`).
#include <fmt/format.h>

#include "planner/parallel.h"
#include "planner/plan.h"

namespace shoal::planner {

std::string FormatMiB(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

std::string FormatPlan(const Plan& plan) {
  const PlanConfig& c = plan.config;
  std::string out = fmt::format(
      "plan: {} ({} layers) over {} stage{}; KV {} for {} seqs x {} tokens ({} tokens/layer), "
      "{} batched tokens, links {}\n",
      plan.model, plan.n_layer, plan.stages.size(), plan.stages.size() == 1 ? "" : "s",
      DTypeName(c.kv_dtype), c.max_num_seqs, c.max_model_len, plan.kv_tokens_per_layer,
      c.max_batched_tokens, LinkDTypeName(c.link_dtype));
  out += fmt::format(
      "{:>5}  {:<10} {:<10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} "
      "{:>9} {:>8}\n",
      "stage", "node", "layers", "weights", "kv", "buffers", "overhead", "total", "limit", "decode",
      "prefill", "link");
  auto mib = [](uint64_t b) { return fmt::format("{:.1f}", static_cast<double>(b) / 1048576.0); };
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage& s = plan.stages[i];
    out += fmt::format(
        "{:>5}  {:<10} {:<10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9.3f} {:>9.4f} "
        "{:>8.3f}\n",
        i, s.node_name, fmt::format("[{}, {})", s.first_layer, s.last_layer), mib(s.mem.weights),
        mib(s.mem.kv), mib(s.mem.buffers), mib(s.mem.overhead), mib(s.mem.total()),
        mib(s.mem_limit), s.time.decode_s * 1e3, s.time.prefill_s * 1e3, s.link.total() * 1e3);
  }
  out += "(memory in MiB; decode, prefill and link in ms per token)\n";
  out += fmt::format(
      "decode, one sequence: {:.2f} ms/token = {:.1f} tokens/s (stages and hops in turn)\n",
      plan.decode_s_per_token * 1e3, plan.decode_tokens_per_s);
  out += fmt::format("decode, pipeline full: <= {:.1f} tokens/s (bound: stage {}, node {})\n",
                     plan.throughput_tokens_per_s, plan.bottleneck_stage,
                     plan.stages.empty() ? "" : plan.stages[plan.bottleneck_stage].node_name);
  if (!plan.choice.empty()) out += plan.choice + "\n";
  return out + FormatGroups(plan);
}

}  // namespace shoal::planner
