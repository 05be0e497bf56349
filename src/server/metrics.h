// Prometheus metrics under vLLM's names, so dashboards built for vLLM read Shoal unchanged.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace shoal::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);
  // Appends the _bucket/_sum/_count lines of `name` with `labels` (e.g. model_name="x").
  void Render(const std::string& name, const std::string& labels, std::string* out) const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative)
  double sum_ = 0;
  int64_t count_ = 0;
};

// One pipeline stage's measured load (the cluster runtime measures it; the CLI hands it over).
struct StageMetrics {
  int32_t stage = 0;
  std::string node;
  double busy_fraction = 0;  // over the window below
  double tokens_per_s = 0;
  double busy_seconds_total = 0;
  int64_t tokens_total = 0;
  int32_t window_s = 0;
};

// Server-side counters (requests, tokens, latencies) plus the engine's gauges at render time.
// Thread-safe.
class Metrics {
 public:
  explicit Metrics(std::string model_name);

  void AddPromptTokens(int64_t n);
  void AddGenerationTokens(int64_t n);
  // finished_reason: "stop", "length" or "abort".
  void RequestFinished(const std::string& finished_reason);
  void ObserveTtft(double seconds);
  void ObserveItl(double seconds);
  void ObserveE2e(double seconds);

  // The Prometheus text exposition (format 0.0.4); `stages` adds the shoal_stage_* families.
  std::string Render(const EngineStats& engine, int64_t waiting_extra,
                     std::span<const StageMetrics> stages = {}) const;

 private:
  std::string model_;
  mutable std::mutex mu_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::map<std::string, int64_t> success_;
  Histogram ttft_, itl_, e2e_;
};

}  // namespace shoal::server
