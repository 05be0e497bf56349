// HeartbeatMonitor implementation.
#include "net/heartbeat.h"

namespace shoal::net {

const char* PeerHealthName(PeerHealth h) {
  switch (h) {
    case PeerHealth::kAlive:
      return "alive";
    case PeerHealth::kSuspect:
      return "suspect";
    case PeerHealth::kDead:
      return "dead";
  }
  return "unknown";
}

Result<HeartbeatMonitor> HeartbeatMonitor::Create(const Clock* clock,
                                                  const HeartbeatConfig& config) {
  if (clock == nullptr) return Errorf("heartbeat monitor needs a clock");
  if (config.interval_us <= 0 || config.suspect_after <= 0 ||
      config.dead_after <= config.suspect_after) {
    return Errorf(
        "bad heartbeat config: interval {} us, suspect after {}, dead after {} (need interval > 0 "
        "and 0 < suspect_after < dead_after)",
        config.interval_us, config.suspect_after, config.dead_after);
  }
  return HeartbeatMonitor(clock, config);
}

HeartbeatMonitor::HeartbeatMonitor(HeartbeatMonitor&& other) noexcept
    : clock_(other.clock_), config_(other.config_) {
  std::lock_guard lock(other.mu_);
  peers_ = std::move(other.peers_);
}

void HeartbeatMonitor::Add(const std::string& peer) {
  std::lock_guard lock(mu_);
  peers_[peer] = Entry{clock_->NowMicros(), false};
}

void HeartbeatMonitor::Remove(const std::string& peer) {
  std::lock_guard lock(mu_);
  peers_.erase(peer);
}

void HeartbeatMonitor::Heard(const std::string& peer) {
  std::lock_guard lock(mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return;
  // A dead peer is not revived by a late frame: failover has already begun.
  if (StateLocked(peer, it->second.last_heard_us, it->second.dead).health == PeerHealth::kDead) {
    it->second.dead = true;
    return;
  }
  it->second.last_heard_us = clock_->NowMicros();
}

HeartbeatMonitor::PeerState HeartbeatMonitor::StateLocked(const std::string& peer,
                                                          int64_t last_heard_us, bool dead) const {
  PeerState s;
  s.peer = peer;
  s.last_heard_us = last_heard_us;
  const int64_t silent = clock_->NowMicros() - last_heard_us;
  s.missed_intervals = silent > 0 ? silent / config_.interval_us : 0;
  if (dead || s.missed_intervals >= config_.dead_after) {
    s.health = PeerHealth::kDead;
  } else if (s.missed_intervals >= config_.suspect_after) {
    s.health = PeerHealth::kSuspect;
  }
  return s;
}

Result<PeerHealth> HeartbeatMonitor::Health(const std::string& peer) const {
  std::lock_guard lock(mu_);
  auto it = peers_.find(peer);
  if (it == peers_.end()) return Errorf("heartbeat: unknown peer {}", peer);
  const PeerState s = StateLocked(peer, it->second.last_heard_us, it->second.dead);
  if (s.health == PeerHealth::kDead) it->second.dead = true;
  return s.health;
}

std::vector<HeartbeatMonitor::PeerState> HeartbeatMonitor::Check() const {
  std::lock_guard lock(mu_);
  std::vector<PeerState> out;
  out.reserve(peers_.size());
  for (const auto& [peer, e] : peers_) {
    out.push_back(StateLocked(peer, e.last_heard_us, e.dead));
    if (out.back().health == PeerHealth::kDead) e.dead = true;
  }
  return out;
}

bool HeartbeatMonitor::SendDue(int64_t last_sent_us) const {
  return clock_->NowMicros() - last_sent_us >= config_.interval_us;
}

}  // namespace shoal::net
