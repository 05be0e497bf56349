// The engine thread: owns the Engine, takes submissions and cancellations from any thread,
// steps while there is work, and hands each step's events to one callback.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"

namespace shoal::server {

// What the loop reports about a submission (ticket = the caller's handle).
struct LoopEvent {
  uint64_t ticket = 0;
  Status error;               // !ok: the engine refused the request (no further events)
  TokenEvent token;           // valid when error is ok
  int32_t cached_tokens = 0;  // prompt tokens served from the prefix cache (first event)
};

class EngineLoop {
 public:
  // Called on the engine thread once per step with every event of that step.
  using EventsFn = std::function<void(std::vector<LoopEvent>)>;

  EngineLoop(std::unique_ptr<Engine> engine, EventsFn on_events);
  ~EngineLoop();  // stops the thread (pending work is dropped)
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Thread-safe. Returns the ticket that events and Cancel use.
  uint64_t Submit(Request req);
  void Cancel(uint64_t ticket);
  // Thread-safe: stops one choice of the request (the others go on).
  void CancelChoice(uint64_t ticket, int32_t index);
  // Thread-safe: holds the request's sequences out of the next steps, or releases them
  // (Engine::Hold). The loop sleeps while every live sequence is held.
  void Hold(uint64_t ticket, bool held);

  // A copy of the engine's counters after the last step.
  EngineStats stats() const;
  // Submitted but not yet admitted by the engine thread.
  int64_t n_pending() const;
  // Steps run so far (for tests and logs).
  int64_t n_steps() const;

 private:
  void Run();
  Result<std::vector<TokenEvent>> SafeStep();  // Engine::Step with exceptions as errors
  void Forget(uint64_t ticket);                // engine thread: drops a request's ticket maps

  std::unique_ptr<Engine> engine_;
  EventsFn on_events_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  uint64_t next_ticket_ = 1;
  std::deque<std::pair<uint64_t, Request>> submits_;
  std::vector<std::pair<uint64_t, int32_t>> cancels_;  // (ticket, choice or -1 for all)
  std::vector<std::pair<uint64_t, bool>> holds_;       // (ticket, held) in call order
  EngineStats stats_;
  int64_t steps_ = 0;
  // Engine thread only.
  std::unordered_map<uint64_t, int64_t> ticket_to_id_;
  std::unordered_map<int64_t, uint64_t> id_to_ticket_;
  std::unordered_map<int64_t, int32_t> first_sent_;  // engine id -> events delivered
  std::thread thread_;
};

}  // namespace shoal::server
