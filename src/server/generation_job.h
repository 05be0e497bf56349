// One /v1/completions or /v1/chat/completions request in flight: turns engine token events into
// text (streaming detokenizer + stop strings per choice), SSE chunks or one final JSON body,
// usage and latency metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/engine_loop.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace shoal::server {

struct JobContext {
  const Tokenizer* tokenizer = nullptr;
  std::vector<int32_t> eog;
  Metrics* metrics = nullptr;
  // Cancels an engine request (thread-safe).
  std::function<void(uint64_t ticket)> cancel;
  // Cancels one choice of an engine request (thread-safe).
  std::function<void(uint64_t ticket, int32_t index)> cancel_choice;
};

class GenerationJob {
 public:
  GenerationJob(GenerationRequest req, std::shared_ptr<HttpExchange> ex, const JobContext& ctx);
  ~GenerationJob();

  // The engine tickets of this job, one per prompt (set after submission).
  void SetTickets(std::vector<uint64_t> tickets);
  const std::vector<uint64_t>& tickets() const { return tickets_; }
  // Io thread: an event for one of this job's tickets. Returns true when the job is complete.
  bool OnEvent(const LoopEvent& e);
  // Io thread: the client went away or the server drains; cancels the engine work. Returns
  // true (the job is complete).
  bool Abort();
  bool done() const { return done_; }
  // No token yet (counts as waiting for the queue limit).
  bool waiting() const { return !any_token_; }

 private:
  struct Choice;
  struct LogprobEntry {
    int32_t token = 0;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;
  };

  void StartStreamIfNeeded();
  void EmitChunk(size_t choice, const std::string& text, const std::vector<LogprobEntry>& lps,
                 const std::string& finish);
  void FinishChoice(size_t c, const std::string& reason);
  void Complete();
  std::string LogprobsJson(const std::vector<LogprobEntry>& lps, size_t text_offset) const;
  std::string TokenText(int32_t token) const;

  GenerationRequest req_;
  std::shared_ptr<HttpExchange> ex_;
  JobContext ctx_;
  std::string id_;
  int64_t created_ = 0;
  double t_start_ = 0;
  std::vector<uint64_t> tickets_;
  std::vector<std::unique_ptr<Choice>> choices_;  // [prompt * n + choice]
  int64_t cached_tokens_ = 0;
  bool started_stream_ = false, any_token_ = false, done_ = false;
};

}  // namespace shoal::server
