// GenerationJob: events -> text -> OpenAI JSON (streamed or whole).
#include "server/generation_job.h"

#include <chrono>
#include <random>

#include "base/clock.h"
#include "engine/text_stream.h"

namespace shoal::server {

namespace {

std::string RandomId(const char* prefix) {
  static const char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += kAlnum[rng() % (sizeof kAlnum - 1)];
  return s;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Json BytesOf(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

struct GenerationJob::Choice {
  Choice(const Tokenizer& tok, const SamplingParams& sp, std::vector<int32_t> eog)
      : stream(tok, sp, std::move(eog), /*replace_invalid=*/true) {}  // JSON needs valid UTF-8
  TextStream stream;
  std::string text;    // emitted so far (non-stream: the whole answer)
  std::string finish;  // "" while generating
  int64_t n_tokens = 0;
  double t_last = 0;
  std::vector<LogprobEntry> lps;  // non-stream: every token's entry
  size_t text_offset = 0;         // completions logprobs: offset of the next token's text
};

GenerationJob::GenerationJob(GenerationRequest req, std::shared_ptr<HttpExchange> ex,
                             const JobContext& ctx)
    : req_(std::move(req)), ex_(std::move(ex)), ctx_(ctx) {
  id_ = RandomId(req_.chat ? "chatcmpl-" : "cmpl-");
  created_ = UnixSeconds();
  t_start_ = NowSeconds();
  // A resumed choice's text stream counts its resumed tokens against max_tokens too.
  SamplingParams whole = req_.sampling;
  whole.max_tokens += static_cast<int>(req_.resume_ids.size());
  for (size_t p = 0; p < req_.prompts.size(); ++p)
    for (int32_t c = 0; c < req_.n; ++c)
      choices_.push_back(std::make_unique<Choice>(*ctx_.tokenizer, whole, ctx_.eog));
  if (!req_.resume_ids.empty()) {
    // A resumed request: its first tokens were generated (and their text sent) elsewhere. The
    // text stream takes them as generated, so it goes on exactly where the other one stopped
    // (partial characters and stop-string prefixes held back alike).
    Choice& ch = *choices_[0];
    for (int32_t id : req_.resume_ids) {
      TextUpdate u = ch.stream.Push(id, FinishReason::kNone);
      ch.text += u.text;
      ++ch.n_tokens;
    }
    ch.text_offset = ch.text.size();
    if (static_cast<int64_t>(ch.text.size()) != req_.resume_text_bytes || ch.stream.stopped())
      resume_error_ = "'resume': its tokens' text is " + std::to_string(ch.text.size()) + " bytes" +
                      (ch.stream.stopped() ? " and ends the answer" : "") + ", not the " +
                      std::to_string(req_.resume_text_bytes) + " sent";
  }
  int64_t n_prompt = 0;
  for (const auto& p : req_.prompts) n_prompt += static_cast<int64_t>(p.size());
  ctx_.metrics->AddPromptTokens(n_prompt);
}

GenerationJob::~GenerationJob() = default;

void GenerationJob::SetTickets(std::vector<uint64_t> tickets) { tickets_ = std::move(tickets); }

std::string GenerationJob::TokenText(int32_t token) const {
  return ctx_.tokenizer->TokenToPiece(token, true);
}

void GenerationJob::StartStreamIfNeeded() {
  if (!req_.stream || started_stream_) return;
  started_stream_ = true;
  ex_->StartStream(200, "text/event-stream");
  if (req_.chat) {
    // vLLM and OpenAI open every choice with the assistant role.
    for (size_t c = 0; c < choices_.size(); ++c) {
      Json chunk = {
          {"id", id_},
          {"object", "chat.completion.chunk"},
          {"created", created_},
          {"model", req_.model},
          {"choices", Json::array({Json{{"index", c},
                                        {"delta", {{"role", "assistant"}, {"content", ""}}},
                                        {"logprobs", nullptr},
                                        {"finish_reason", nullptr}}})}};
      ex_->Write("data: " + DumpJson(chunk) + "\n\n");
    }
  } else if (req_.echo) {
    for (size_t c = 0; c < choices_.size(); ++c)
      EmitChunk(c, req_.prompt_texts[c / static_cast<size_t>(req_.n)], {}, "");
  }
}

std::string GenerationJob::LogprobsJson(const std::vector<LogprobEntry>& lps,
                                        size_t text_offset) const {
  if (req_.logprobs < 0) return "null";
  if (req_.chat) {
    Json content = Json::array();
    for (const LogprobEntry& e : lps) {
      const std::string t = TokenText(e.token);
      Json top = Json::array();
      for (const auto& [id, lp] : e.top) {
        const std::string s = TokenText(id);
        top.push_back({{"token", s}, {"logprob", lp}, {"bytes", BytesOf(s)}});
      }
      content.push_back(
          {{"token", t}, {"logprob", e.logprob}, {"bytes", BytesOf(t)}, {"top_logprobs", top}});
    }
    return DumpJson(Json{{"content", content}});
  }
  Json tokens = Json::array(), token_lps = Json::array(), tops = Json::array(),
       offsets = Json::array();
  size_t off = text_offset;
  for (const LogprobEntry& e : lps) {
    const std::string t = TokenText(e.token);
    tokens.push_back(t);
    token_lps.push_back(e.logprob);
    Json top = Json::object();
    for (const auto& [id, lp] : e.top) top[TokenText(id)] = lp;
    tops.push_back(top);
    offsets.push_back(off);
    off += t.size();
  }
  return DumpJson(Json{{"tokens", tokens},
                       {"token_logprobs", token_lps},
                       {"top_logprobs", tops},
                       {"text_offset", offsets}});
}

void GenerationJob::EmitChunk(size_t c, const std::string& text,
                              const std::vector<LogprobEntry>& lps, const std::string& finish,
                              int32_t token) {
  Choice& ch = *choices_[c];
  Json choice = {{"index", c}};
  if (req_.chat) {
    choice["delta"] = text.empty() ? Json::object() : Json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = Json::parse(LogprobsJson(lps, ch.text_offset), nullptr, false);
  for (const LogprobEntry& e : lps) ch.text_offset += TokenText(e.token).size();
  choice["finish_reason"] = finish.empty() ? Json(nullptr) : Json(finish);
  if (req_.return_token_ids)
    choice["token_ids"] = token >= 0 ? Json::array({token}) : Json::array();
  Json chunk = {{"id", id_},
                {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created_},
                {"model", req_.model},
                {"choices", Json::array({choice})}};
  if (req_.include_usage) chunk["usage"] = nullptr;
  ex_->Write("data: " + DumpJson(chunk) + "\n\n");
}

bool GenerationJob::OnEvent(const LoopEvent& e) {
  if (done_) return true;
  if (!e.error.ok()) {
    // The engine refused or failed the request: an error if nothing was sent yet.
    if (!started_stream_ && !any_token_) {
      ApiError err = ApiError::BadRequest(e.error.message());
      for (uint64_t t : tickets_)
        if (t != e.ticket) ctx_.cancel(t);
      done_ = true;
      ctx_.metrics->RequestFinished("abort");
      ex_->Respond(err.status, "application/json", err.ToJson());
      return true;
    }
    for (size_t c = 0; c < choices_.size(); ++c)
      if (choices_[c]->finish.empty()) FinishChoice(c, "abort");
    Complete();
    return true;
  }
  size_t p = 0;
  while (p < tickets_.size() && tickets_[p] != e.ticket) ++p;
  if (p == tickets_.size()) return false;
  const size_t c = p * static_cast<size_t>(req_.n) + static_cast<size_t>(e.token.index);
  if (c >= choices_.size()) return false;
  Choice& ch = *choices_[c];
  cached_tokens_ += e.cached_tokens;
  if (!ch.finish.empty()) return false;  // stopped by a stop string; the engine runs on briefly

  const double now = NowSeconds();
  if (!any_token_) ctx_.metrics->ObserveTtft(now - t_start_);
  if (ch.t_last > 0) ctx_.metrics->ObserveItl(now - ch.t_last);
  ch.t_last = now;
  any_token_ = true;
  ++ch.n_tokens;
  ctx_.metrics->AddGenerationTokens(1);

  std::vector<LogprobEntry> lps;
  if (req_.logprobs >= 0)
    lps.push_back(LogprobEntry{e.token.token, e.token.logprob, e.token.top_logprobs});
  TextUpdate u = ch.stream.Push(e.token.token, e.token.finish);
  const std::string& finish = u.finish;
  StartStreamIfNeeded();
  if (req_.stream) {
    // With return_token_ids every token gets its chunk (its text may be held back), so a
    // router knows each id the client's text stands on.
    if (!u.text.empty() || !lps.empty() || !finish.empty() || req_.return_token_ids)
      EmitChunk(c, u.text, lps, finish, e.token.token);
  } else {
    for (auto& l : lps) ch.lps.push_back(std::move(l));
  }
  ch.text += u.text;
  if (!finish.empty()) {
    FinishChoice(c, finish);
    // A stop string ends this choice before the engine knows: free its sequence at once (the
    // whole engine request once every choice of the prompt is over).
    if (e.token.finish == FinishReason::kNone) {
      bool all = true;
      for (int32_t j = 0; j < req_.n; ++j)
        all = all &&
              !choices_[p * static_cast<size_t>(req_.n) + static_cast<size_t>(j)]->finish.empty();
      if (all) {
        ctx_.cancel(e.ticket);
      } else {
        ctx_.cancel_choice(e.ticket, e.token.index);
      }
    }
  }
  for (const auto& chp : choices_)
    if (chp->finish.empty()) {
      CheckBackpressure();
      return false;
    }
  Complete();
  return true;
}

void GenerationJob::Hold(bool held) {
  if (!ctx_.hold) return;
  for (uint64_t t : tickets_) ctx_.hold(t, held);
}

void GenerationJob::CheckBackpressure() {
  if (done_ || !req_.stream || paused_since_ > 0 || ctx_.stream_buffer_bytes == 0) return;
  if (ex_->buffered_bytes() <= ctx_.stream_buffer_bytes) return;
  paused_since_ = NowSeconds();
  Hold(true);
}

void GenerationJob::OnDrained() {
  if (done_ || paused_since_ == 0) return;
  paused_since_ = 0;
  Hold(false);
}

void GenerationJob::CancelAll() {
  for (uint64_t t : tickets_) ctx_.cancel(t);
  done_ = true;
  ctx_.metrics->RequestFinished("abort");
  ctx_.metrics->ObserveE2e(NowSeconds() - t_start_);
}

bool GenerationJob::DropStalled() {
  if (done_) return true;
  CancelAll();
  ex_->Close();
  return true;
}

void GenerationJob::FinishChoice(size_t c, const std::string& reason) {
  choices_[c]->finish = reason;
}

bool GenerationJob::Abort() {
  if (done_) return true;
  CancelAll();
  if (ex_->closed()) return true;
  if (req_.stream) {
    // The stream ends well-formed: each open choice gets finish_reason "abort", then [DONE].
    StartStreamIfNeeded();
    for (size_t c = 0; c < choices_.size(); ++c)
      if (choices_[c]->finish.empty()) EmitChunk(c, "", {}, "abort");
    ex_->Write("data: [DONE]\n\n");
    ex_->EndStream();
  } else {
    ApiError err = ApiError::Unavailable("the server is shutting down; the request was cancelled");
    ex_->Respond(err.status, "application/json", err.ToJson());
  }
  return true;
}

void GenerationJob::Complete() {
  done_ = true;
  int64_t n_prompt = 0, n_gen = 0;
  for (const auto& p : req_.prompts) n_prompt += static_cast<int64_t>(p.size());
  for (const auto& ch : choices_) n_gen += ch->n_tokens;
  Json usage = {{"prompt_tokens", n_prompt},
                {"completion_tokens", n_gen},
                {"total_tokens", n_prompt + n_gen},
                {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
  // One request, one success label: the first choice's reason ("abort" counts separately).
  ctx_.metrics->RequestFinished(choices_.empty() ? "stop" : choices_[0]->finish);
  ctx_.metrics->ObserveE2e(NowSeconds() - t_start_);
  if (req_.stream) {
    StartStreamIfNeeded();
    if (req_.include_usage) {
      Json chunk = {{"id", id_},
                    {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
                    {"created", created_},
                    {"model", req_.model},
                    {"choices", Json::array()},
                    {"usage", usage}};
      ex_->Write("data: " + DumpJson(chunk) + "\n\n");
    }
    ex_->Write("data: [DONE]\n\n");
    ex_->EndStream();
    return;
  }
  Json choices = Json::array();
  for (size_t c = 0; c < choices_.size(); ++c) {
    Choice& ch = *choices_[c];
    Json j = {{"index", c}};
    const std::string prefix =
        (!req_.chat && req_.echo) ? req_.prompt_texts[c / static_cast<size_t>(req_.n)] : "";
    if (req_.chat) {
      j["message"] = {{"role", "assistant"}, {"content", ch.text}};
    } else {
      j["text"] = prefix + ch.text;
    }
    j["logprobs"] = Json::parse(LogprobsJson(ch.lps, prefix.size()), nullptr, false);
    j["finish_reason"] = ch.finish;
    choices.push_back(std::move(j));
  }
  Json body = {{"id", id_},           {"object", req_.chat ? "chat.completion" : "text_completion"},
               {"created", created_}, {"model", req_.model},
               {"choices", choices},  {"usage", usage}};
  ex_->Respond(200, "application/json", DumpJson(body));
}

}  // namespace shoal::server
