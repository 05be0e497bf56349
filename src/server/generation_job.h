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
  // Holds (true) or releases a request's sequences in the engine (thread-safe).
  std::function<void(uint64_t ticket, bool held)> hold;
  // A stream with more than this many bytes not yet taken by its client is paused: its
  // sequences are held until the client reads again (0: never paused).
  size_t stream_buffer_bytes = 0;
};

class GenerationJob {
 public:
  GenerationJob(GenerationRequest req, std::shared_ptr<HttpExchange> ex, const JobContext& ctx);
  ~GenerationJob();

  // The engine tickets of this job, one per prompt (set after submission).
  void SetTickets(std::vector<uint64_t> tickets);
  // Non-empty when the request's "resume" does not match its tokens (their text is not the
  // resume_text_bytes the client has): the request is refused.
  const std::string& resume_error() const { return resume_error_; }
  const std::vector<uint64_t>& tickets() const { return tickets_; }
  // Io thread: an event for one of this job's tickets. Returns true when the job is complete.
  bool OnEvent(const LoopEvent& e);
  // Io thread: the client went away or the server drains; cancels the engine work. Returns
  // true (the job is complete).
  bool Abort();
  // Io thread: the client took everything queued; a paused stream resumes.
  void OnDrained();
  // Io thread: a client paused for too long: cancels the engine work and drops the connection
  // (its queued bytes are freed). Returns true (the job is complete).
  bool DropStalled();
  // NowSeconds() when the stream was paused; 0 while it runs.
  double paused_since() const { return paused_since_; }
  // Engine sequences this job makes: prompts x n.
  int64_t n_sequences() const { return static_cast<int64_t>(choices_.size()); }
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
  // Pauses the stream when its client lags by more than ctx_.stream_buffer_bytes.
  void CheckBackpressure();
  void Hold(bool held);
  // Cancels every engine request of the job and counts it as aborted.
  void CancelAll();
  // token: the id behind this chunk (return_token_ids), -1 for none.
  void EmitChunk(size_t choice, const std::string& text, const std::vector<LogprobEntry>& lps,
                 const std::string& finish, int32_t token = -1);
  void FinishChoice(size_t c, const std::string& reason);
  void Complete();
  std::string LogprobsJson(const std::vector<LogprobEntry>& lps, size_t text_offset) const;
  std::string TokenText(int32_t token) const;

  GenerationRequest req_;
  std::shared_ptr<HttpExchange> ex_;
  JobContext ctx_;
  std::string id_;
  std::string resume_error_;
  int64_t created_ = 0;
  double t_start_ = 0;
  std::vector<uint64_t> tickets_;
  std::vector<std::unique_ptr<Choice>> choices_;  // [prompt * n + choice]
  int64_t cached_tokens_ = 0;
  bool started_stream_ = false, any_token_ = false, done_ = false;
  double paused_since_ = 0;
};

}  // namespace shoal::server
