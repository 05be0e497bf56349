// Replica choice: rendezvous hashing of the prompt's prefix over the replicas that are up and
// not full, with a load bound; least loaded and round robin for comparison.
#include "router/replica_set.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace shoal::router {

ReplicaSet::ReplicaSet(std::vector<std::string> urls, Policy policy, int64_t max_in_flight,
                       int64_t slack)
    : policy_(policy), max_in_flight_(max_in_flight), slack_(slack) {
  for (std::string& u : urls) r_.push_back(ReplicaState{std::move(u)});
}

uint64_t AffinityScore(std::string_view key, size_t replica) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64 offset basis
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  h ^= (replica + 1) * 0x9e3779b97f4a7c15ull;
  // SplitMix64's finalizer: every replica's score depends on every bit of the key's hash.
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

int ReplicaSet::Pick(std::string_view key, const std::vector<int>& tried) {
  std::vector<int> open;
  for (int i = 0; i < static_cast<int>(r_.size()); ++i) {
    const ReplicaState& s = r_[static_cast<size_t>(i)];
    if (!s.up || std::find(tried.begin(), tried.end(), i) != tried.end()) continue;
    if (max_in_flight_ > 0 && s.in_flight >= max_in_flight_) continue;
    open.push_back(i);
  }
  if (open.empty()) return -1;
  auto load = [&](int i) { return r_[static_cast<size_t>(i)].in_flight; };
  const int least =
      *std::min_element(open.begin(), open.end(), [&](int a, int b) { return load(a) < load(b); });
  if (policy_ == Policy::kLeastLoaded || (policy_ == Policy::kAffinity && key.empty()))
    return least;
  if (policy_ == Policy::kRoundRobin) {
    for (size_t k = 0; k < r_.size(); ++k) {
      const int i = static_cast<int>((next_ + k) % r_.size());
      if (std::find(open.begin(), open.end(), i) != open.end()) {
        next_ = static_cast<size_t>(i) + 1;
        return i;
      }
    }
    return least;
  }
  int best = open[0];
  for (int i : open)
    if (AffinityScore(key, static_cast<size_t>(i)) > AffinityScore(key, static_cast<size_t>(best)))
      best = i;
  return load(best) > load(least) + slack_ ? least : best;
}

void ReplicaSet::Start(int i) {
  ReplicaState& s = r_[static_cast<size_t>(i)];
  ++s.in_flight;
  ++s.requests;
}

void ReplicaSet::Finish(int i, bool failed) {
  ReplicaState& s = r_[static_cast<size_t>(i)];
  --s.in_flight;
  if (failed) ++s.failures;
}

void ReplicaSet::SetUp(int i, bool up) { r_[static_cast<size_t>(i)].up = up; }

std::string AffinityKey(std::string_view body, size_t bytes) {
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return "";
  std::string key;
  auto add = [&](const nlohmann::json& v) {
    if (v.is_string()) {
      key += v.get_ref<const std::string&>();
    } else if (v.is_number_integer()) {
      key += std::to_string(v.get<int64_t>()) + " ";
    }
  };
  auto prompt = j.find("prompt");
  if (prompt != j.end()) {
    const nlohmann::json* p = &*prompt;
    // A list of prompts: the first; a list of token ids: the ids.
    if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array()))
      p = &p->front();
    if (p->is_array()) {
      for (const auto& v : *p) {
        add(v);
        if (key.size() >= bytes) break;
      }
    } else {
      add(*p);
    }
  }
  auto messages = j.find("messages");
  if (messages != j.end() && messages->is_array()) {
    for (const auto& m : *messages) {
      if (!m.is_object()) continue;
      auto c = m.find("content");
      if (c == m.end()) continue;
      if (c->is_array()) {  // content parts: their text
        for (const auto& part : *c)
          if (part.is_object() && part.contains("text")) add(part["text"]);
      } else {
        add(*c);
      }
      if (key.size() >= bytes) break;
    }
  }
  if (key.size() > bytes) key.resize(bytes);
  return key;
}

}  // namespace shoal::router
