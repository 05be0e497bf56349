// GroupLinks: dial down, accept up, so every pair of members shares exactly one link.
#include "cluster/group_links.h"

#include <chrono>

#include "cluster/wire.h"
#include "planner/model_profile.h"
#include "planner/parallel.h"

namespace shoal::cluster {

namespace {
// Waits for the higher members' links wake every 100 ms to poll `cancelled`.
constexpr int64_t kPollMs = 100;
}  // namespace

Result<std::shared_ptr<net::Conn>> DialNode(
    const std::string& addr, const net::ClusterKey& key, net::LinkCipher cipher, int64_t timeout_ms,
    const std::function<Status(const std::shared_ptr<net::Conn>&)>& connected) {
  SHOAL_ASSIGN_OR_RETURN(auto hp, NodeAddress(addr));
  SHOAL_ASSIGN_OR_RETURN(auto c, net::Conn::Connect(hp.first, hp.second, timeout_ms));
  std::shared_ptr<net::Conn> conn(std::move(c));
  if (connected) SHOAL_RETURN_IF_ERROR(connected(conn));
  net::AuthOptions auth;
  auth.cipher = cipher;
  SHOAL_RETURN_IF_ERROR(net::AuthenticateDialer(*conn, key, auth).Annotate(addr));
  auto greet = conn->Recv(timeout_ms);
  if (!greet.ok() || !*greet) return Errorf("{} did not greet", addr);
  return conn;
}

Result<std::unique_ptr<collective::Group>> StartGroup(int rank,
                                                      std::vector<std::shared_ptr<net::Conn>> links,
                                                      const gguf::File& f,
                                                      const planner::PlanConfig& c) {
  const int m = static_cast<int>(links.size());
  auto g = std::make_unique<collective::Group>(rank, std::move(links));
  SHOAL_ASSIGN_OR_RETURN(planner::ModelProfile prof, planner::ProfileFromGguf(f));
  const int64_t most = planner::LargestGatherFloats(prof, c);
  std::vector<int64_t> counts;
  for (int k = 0; k < m; ++k) counts.push_back(SliceOf(most, m, k).count);
  std::vector<float> mine(static_cast<size_t>(counts[static_cast<size_t>(rank)])), all;
  SHOAL_RETURN_IF_ERROR(g->AllGather(mine, counts, &all).Annotate("group warm-up"));
  return g;
}

void GroupLinks::Offer(uint32_t epoch, int32_t rank, std::shared_ptr<net::Conn> conn) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& slot = offered_[{epoch, rank}];
  if (slot) slot->Shutdown();  // a repeated announcement replaces the older link
  slot = std::move(conn);
  if (offered_.size() > kMaxOffered) {  // keys sort by epoch: begin() is the oldest
    offered_.begin()->second->Shutdown();
    offered_.erase(offered_.begin());
  }
  cv_.notify_all();
}

size_t GroupLinks::offered() const {
  std::lock_guard<std::mutex> lk(mu_);
  return offered_.size();
}

void GroupLinks::CloseAll() {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [k, c] : offered_) c->Shutdown();
  offered_.clear();
}

Result<std::vector<std::shared_ptr<net::Conn>>> GroupLinks::Build(
    uint32_t epoch, int32_t rank, const std::vector<std::string>& peers, const net::ClusterKey& key,
    net::LinkCipher cipher, int64_t timeout_ms, const std::function<bool()>& cancelled) {
  const auto m = static_cast<int32_t>(peers.size());
  if (rank < 0 || rank >= m) return Errorf("member {} of a group of {}", rank, m);
  std::vector<std::shared_ptr<net::Conn>> links(peers.size());
  {
    std::lock_guard<std::mutex> lk(mu_);  // links of older plans will never be used
    for (auto it = offered_.begin(); it != offered_.end();) {
      if (it->first.first >= epoch) {
        ++it;
        continue;
      }
      it->second->Shutdown();
      it = offered_.erase(it);
    }
  }
  for (int32_t j = 0; j < rank; ++j) {
    auto c = DialNode(peers[static_cast<size_t>(j)], key, cipher, timeout_ms);
    if (!c.ok()) return c.status().Annotate("group member " + std::to_string(j));
    std::shared_ptr<net::Conn> conn = std::move(*c);
    net::Frame join;
    join.type = net::MsgType::kControl;
    join.payload = EncodeGroupJoin(epoch, rank);
    SHOAL_RETURN_IF_ERROR(conn->Send(join));
    links[static_cast<size_t>(j)] = std::move(conn);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lk(mu_);
  for (int32_t j = rank + 1; j < m; ++j) {
    const auto k = std::make_pair(epoch, j);
    while (!offered_.count(k)) {
      if (cancelled && cancelled()) return Errorf("group of epoch {} given up", epoch);
      if (std::chrono::steady_clock::now() >= deadline)
        return Errorf("group member {} ({}) did not link within {} ms", j,
                      peers[static_cast<size_t>(j)], timeout_ms);
      cv_.wait_for(lk, std::chrono::milliseconds(kPollMs));
    }
    links[static_cast<size_t>(j)] = std::move(offered_[k]);
    offered_.erase(k);
  }
  return links;
}

}  // namespace shoal::cluster
