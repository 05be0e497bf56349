// Links a node dials to other nodes: its downstream stage's members (DialNode) and its
// tensor-parallel group (GroupLinks): member r dials every lower member and announces itself
// (kGroupJoin: epoch, rank); the links the higher members dial arrive through the node's accept
// loop and are handed here. Build returns one link per member once all are up.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "collective/group.h"
#include "gguf/gguf.h"
#include "net/auth.h"
#include "net/conn.h"
#include "planner/cost_model.h"

namespace shoal::cluster {

// Connects to a node, authenticates and reads the greeting every node sends (its node info).
// `connected` runs after the connect (a cancellable dial registers the link there, to shut it
// down); its error ends the dial.
Result<std::shared_ptr<net::Conn>> DialNode(
    const std::string& addr, const net::ClusterKey& key, net::LinkCipher cipher, int64_t timeout_ms,
    const std::function<Status(const std::shared_ptr<net::Conn>&)>& connected = {});

// The group of member `rank` over `links` (GroupLinks::Build), after one exchange of the largest
// gather a step of `c` makes over the model in `f` (planner::LargestGatherFloats), so that the
// frames' and gathers' buffers reach their size at start, like WarmUpStage's. Every member of
// the group makes it as its first call.
Result<std::unique_ptr<collective::Group>> StartGroup(int rank,
                                                      std::vector<std::shared_ptr<net::Conn>> links,
                                                      const gguf::File& f,
                                                      const planner::PlanConfig& c);

class GroupLinks {
 public:
  // A link a peer dialed, announced for `epoch` as member `rank` (from the accept loop). At most
  // kMaxOffered wait at once: past that the one of the oldest epoch is closed (a handed-over link
  // no longer counts against --max-links, so a peer announcing endless epochs must not pile
  // them up).
  void Offer(uint32_t epoch, int32_t rank, std::shared_ptr<net::Conn> conn);
  // Two groups' worth of the largest group (kMaxGroupNodes): this plan's and the next's.
  static constexpr size_t kMaxOffered = 128;
  size_t offered() const;

  // links[k]: the authenticated link to member k of `peers` (null at `rank`), dialed to the
  // lower members and awaited from the higher ones within timeout_ms. `cancelled` is polled while
  // waiting (a newer assignment gives up this one). Links offered for older epochs are closed.
  Result<std::vector<std::shared_ptr<net::Conn>>> Build(uint32_t epoch, int32_t rank,
                                                        const std::vector<std::string>& peers,
                                                        const net::ClusterKey& key,
                                                        net::LinkCipher cipher, int64_t timeout_ms,
                                                        const std::function<bool()>& cancelled);

  // Closes every link offered and not yet taken (the node stops, or a new plan).
  void CloseAll();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<uint32_t, int32_t>, std::shared_ptr<net::Conn>> offered_;
};

}  // namespace shoal::cluster
