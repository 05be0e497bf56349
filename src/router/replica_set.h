// The replicas behind a router and the choice of one for each request: prefix affinity (requests
// whose prompts begin alike go where that prefix is likely cached), bounded by load, with a
// per-replica limit of requests in flight (all full: the router answers 429).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shoal::router {

enum class Policy {
  kAffinity,     // the replica a prompt's prefix hashes to, unless it is much busier than another
  kLeastLoaded,  // the replica with the fewest requests in flight
  kRoundRobin,   // each in turn
};

struct ReplicaState {
  std::string url;
  bool up = true;         // answered its last health check
  int64_t in_flight = 0;  // requests forwarded and not finished
  int64_t requests = 0;   // forwarded since start
  int64_t failures = 0;   // connection failures and 5xx answers since start
};

class ReplicaSet {
 public:
  // max_in_flight: per replica (0: no limit); slack: how many more requests in flight than the
  // least busy up replica the affinity choice may carry before the request goes there instead.
  ReplicaSet(std::vector<std::string> urls, Policy policy, int64_t max_in_flight, int64_t slack);

  // The replica for a request whose affinity key is `key` (its prompt's first bytes), skipping
  // replicas in `tried`, or -1 when every other replica is down or full.
  int Pick(std::string_view key, const std::vector<int>& tried);
  void Start(int i);                // a request was forwarded to replica i
  void Finish(int i, bool failed);  // it ended (failed: no answer, or a 5xx)
  void SetUp(int i, bool up);       // a health check's result

  const std::vector<ReplicaState>& replicas() const { return r_; }
  int64_t max_in_flight() const { return max_in_flight_; }

 private:
  std::vector<ReplicaState> r_;
  Policy policy_;
  int64_t max_in_flight_, slack_;
  size_t next_ = 0;  // round robin
};

// FNV-1a 64 of `s`, mixed with the replica's index for rendezvous hashing.
uint64_t AffinityScore(std::string_view key, size_t replica);

// The affinity key of an OpenAI completions or chat body: the first `bytes` bytes of its prompt
// (the first prompt of a list; token ids as text) or of its messages' contents in order; "" when
// the body has none (then the load decides).
std::string AffinityKey(std::string_view body, size_t bytes);

}  // namespace shoal::router
