// EngineLoop: the step thread between the HTTP io thread and the Engine.
#include "server/engine_loop.h"

#include <algorithm>
#include <exception>
#include <new>

#include "base/log.h"

namespace shoal::server {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine, EventsFn on_events)
    : engine_(std::move(engine)), on_events_(std::move(on_events)) {
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t EngineLoop::Submit(Request req) {
  uint64_t t = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    t = next_ticket_++;
    submits_.emplace_back(t, std::move(req));
  }
  cv_.notify_one();
  return t;
}

void EngineLoop::Cancel(uint64_t ticket) { CancelChoice(ticket, -1); }

void EngineLoop::CancelChoice(uint64_t ticket, int32_t index) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    cancels_.emplace_back(ticket, index);
  }
  cv_.notify_one();
}

void EngineLoop::Hold(uint64_t ticket, bool held) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    holds_.emplace_back(ticket, held);
  }
  cv_.notify_one();
}

EngineStats EngineLoop::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

int64_t EngineLoop::n_pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int64_t>(submits_.size());
}

int64_t EngineLoop::n_steps() const {
  std::lock_guard<std::mutex> lk(mu_);
  return steps_;
}

void EngineLoop::Forget(uint64_t ticket) {
  auto it = ticket_to_id_.find(ticket);
  if (it == ticket_to_id_.end()) return;
  id_to_ticket_.erase(it->second);
  first_sent_.erase(it->second);
  ticket_to_id_.erase(it);
}

Result<std::vector<TokenEvent>> EngineLoop::SafeStep() {
  // An allocation failure (or a bug that throws) inside a step fails the live requests below
  // instead of terminating the process with every connection.
  try {
    return engine_->Step();
  } catch (const std::exception& e) {
    return Errorf("engine step threw: {}", e.what());
  }
}

void EngineLoop::Run() {
  std::vector<LoopEvent> out;
  for (;;) {
    std::deque<std::pair<uint64_t, Request>> submits;
    std::vector<std::pair<uint64_t, int32_t>> cancels;
    std::vector<std::pair<uint64_t, bool>> holds;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        return stop_ || !submits_.empty() || !cancels_.empty() || !holds_.empty() ||
               engine_->has_work();
      });
      if (stop_) return;
      submits.swap(submits_);
      cancels.swap(cancels_);
      holds.swap(holds_);
    }
    out.clear();
    for (auto& [ticket, req] : submits) {
      Result<int64_t> id = Errorf("out of memory admitting the request");
      try {
        id = engine_->Add(std::move(req));
      } catch (const std::bad_alloc&) {
      }
      if (!id.ok()) {
        LoopEvent e;
        e.ticket = ticket;
        e.error = id.status();
        out.push_back(std::move(e));
        continue;
      }
      ticket_to_id_[ticket] = *id;
      id_to_ticket_[*id] = ticket;
    }
    for (const auto& [t, index] : cancels) {
      auto it = ticket_to_id_.find(t);
      if (it == ticket_to_id_.end()) continue;
      if (index < 0) {
        engine_->Cancel(it->second);
      } else {
        engine_->CancelChoice(it->second, index);
      }
      if (!engine_->Has(it->second)) Forget(t);
    }
    for (const auto& [t, held] : holds) {
      auto it = ticket_to_id_.find(t);
      if (it != ticket_to_id_.end()) engine_->Hold(it->second, held);
    }
    if (engine_->has_work()) {
      Result<std::vector<TokenEvent>> events = SafeStep();
      if (!events.ok()) {
        // A failed step is a bug or an exhausted resource; fail every live request rather than
        // spin on the same error.
        Log(LogLevel::kError, "engine step failed: {}", events.status().message());
        for (auto& [ticket, id] : ticket_to_id_) {
          engine_->Cancel(id);
          LoopEvent e;
          e.ticket = ticket;
          e.error = events.status();
          out.push_back(std::move(e));
        }
        ticket_to_id_.clear();
        id_to_ticket_.clear();
        first_sent_.clear();
      } else {
        std::vector<uint64_t> done;
        for (TokenEvent& ev : *events) {
          auto it = id_to_ticket_.find(ev.id);
          if (it == id_to_ticket_.end()) continue;
          LoopEvent e;
          e.ticket = it->second;
          if (first_sent_[ev.id]++ == 0) e.cached_tokens = engine_->CachedTokens(ev.id);
          // A request whose every choice finished leaves the maps (the engine freed it).
          if (ev.finish != FinishReason::kNone && !engine_->Has(ev.id)) done.push_back(it->second);
          e.token = std::move(ev);
          out.push_back(std::move(e));
        }
        for (uint64_t t : done) Forget(t);
      }
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      stats_ = engine_->stats();
      ++steps_;
    }
    if (!out.empty()) on_events_(std::move(out));
    out = {};
  }
}

}  // namespace shoal::server
