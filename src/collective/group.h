// A group of nodes that share a layer (tensor or expert parallel): each member is linked to
// every other by an authenticated net::Conn, and the collectives below run over those links.
// Results never depend on the order in which bytes arrive: all-gather places each member's rows
// by member index, and all-reduce adds the members' values in member-index order, so every
// member gets the same bits, run after run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/even_split.h"
#include "base/status.h"
#include "net/conn.h"

namespace shoal::collective {

class Group {
 public:
  // links[k]: the link to member k (nullptr at k == rank). Every call waits at most
  // timeout_ms for a peer's part: a member that died or hangs fails the call (and the group)
  // within that bound, never blocks it forever. 5 s: a stalled peer is the heartbeat's to
  // judge (1 s dead by default); this only bounds the wait.
  Group(int rank, std::vector<std::shared_ptr<net::Conn>> links, int64_t timeout_ms = 5'000);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(links_.size()); }
  // After any failed call the group is unusable (its links are shut down): the cluster
  // re-plans over the survivors, as it does for a lost pipeline stage.
  bool failed() const { return failed_; }

  // out = the members' `mine` concatenated in member order; counts[k] is member k's length
  // (uneven splits: any group size, any length), counts[rank] == mine.size().
  Status AllGather(std::span<const float> mine, std::span<const int64_t> counts,
                   std::vector<float>* out);
  // x = the sum over members of their x (the same length everywhere), each element added in
  // member order 0, 1, ..., size-1: member j owns slice j, receives it from everyone, sums it
  // in that order and sends the sum back (reduce-scatter, then all-gather).
  Status AllReduceOrdered(std::span<float> x);

 private:
  Status Exchange(const std::vector<std::span<const float>>& to,
                  const std::vector<std::span<float>>& from);
  Status Fail(Status s);
  Result<std::optional<net::Frame>> Receive(net::Conn& link);

  int rank_;
  std::vector<std::shared_ptr<net::Conn>> links_;
  int64_t timeout_ms_;
  uint64_t call_ = 0;
  bool failed_ = false;
  std::vector<float> scratch_;  // AllReduceOrdered's received slices
  struct Senders;
  std::unique_ptr<Senders> senders_;
};

// The slices of AllReduceOrdered (base/even_split.h).
using shoal::Slice;
using shoal::SliceOf;

}  // namespace shoal::collective
