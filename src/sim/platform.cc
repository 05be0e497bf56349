// The simulated network: a star (every node on one non-blocking switch) or a two-level fat tree
// of leaf switches under spine switches, hosts n0..n{N-1} plus the coordinator.
#include <fmt/format.h>

#include <simgrid/s4u.hpp>

#include "sim/sim_state.h"

namespace sg4 = simgrid::s4u;

namespace shoal::sim {
namespace {

double LinkBw(const measure::NodeInfo& n) { return n.link_bw > 0 ? n.link_bw : 125e6; }
double HopLatency(const measure::NodeInfo& n) {
  return n.link_latency_s > 0 ? n.link_latency_s : 100e-6;
}

// The coordinator's link is 100x a node's: it only sends token ids and receives logits, and a
// real coordinator sits on a faster port; it must not be what binds.
constexpr double kCoordinatorBwFactor = 100;

void BuildStar(State* s, double bw, double lat) {
  sg4::NetZone* zone = sg4::create_star_zone("cluster");
  // A hop crosses two host links through the switch: half the one-way latency on each.
  auto add = [&](const std::string& name, double link_bw) {
    sg4::Host* h = zone->create_host(name, kHostSpeed);
    sg4::Link* l = zone->create_link(name + "_l", link_bw)->set_latency(lat / 2)->seal();
    zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, {sg4::LinkInRoute(l)}, true);
    return h;
  };
  s->coordinator = add("coordinator", bw * kCoordinatorBwFactor);
  s->hosts.reserve(static_cast<size_t>(s->report.hosts));
  for (int64_t i = 0; i < s->report.hosts; ++i) s->hosts.push_back(add(fmt::format("n{}", i), bw));
  // Shared cores: one single-core host per core of the machine the stages' execs run on
  // (State::PickCore); they send nothing, so they have no route. Stage i starts on core i mod
  // cores, the coordinator after the last stage, member k of a split stage i on core i + k.
  const auto cores = static_cast<size_t>(s->opt.host_cores);
  for (size_t c = 0; c < cores; ++c)
    s->cores.push_back(zone->create_host(fmt::format("core{}", c), kHostSpeed));
  s->core_execs.assign(cores, 0);
  for (size_t i = 0; cores > 0 && i <= s->stages.size(); ++i) s->last_core.push_back(i % cores);
  // Then members 1.. of each split stage (State::MemberSlot), on the cores after it.
  for (size_t i = 0; cores > 0 && i < s->stages.size(); ++i)
    for (int64_t k = 1; k < s->stages[i].dense_nodes; ++k)
      s->last_core.push_back((i + static_cast<size_t>(k)) % cores);
  zone->seal();
}

// Leaves per leaf switch: a 64-port switch split 32 down / 32 up, so the tree is non-blocking
// (full bisection: one uplink from every leaf switch to each of 32 spines).
constexpr unsigned kFatTreeRadix = 32;

void BuildFatTree(State* s, double bw, double lat) {
  const int64_t leaves = s->report.hosts + 1;  // + the coordinator
  const auto leaf_switches =
      static_cast<unsigned>((leaves + kFatTreeRadix - 1) / static_cast<int64_t>(kFatTreeRadix));
  const sg4::FatTreeParams params(2, {kFatTreeRadix, leaf_switches}, {1, kFatTreeRadix}, {1, 1});
  s->hosts.assign(static_cast<size_t>(s->report.hosts), nullptr);
  auto netpoint = [s](sg4::NetZone* zone, const std::vector<unsigned long>&, unsigned long id) {
    const auto i = static_cast<int64_t>(id);
    std::string name = i < s->report.hosts    ? fmt::format("n{}", i)
                       : i == s->report.hosts ? std::string("coordinator")
                                              : fmt::format("pad{}", i);
    sg4::Host* h = zone->create_host(name, kHostSpeed);
    if (i < s->report.hosts) s->hosts[static_cast<size_t>(i)] = h;
    if (i == s->report.hosts) s->coordinator = h;
    return std::make_pair(h->get_netpoint(),
                          static_cast<simgrid::kernel::routing::NetPoint*>(nullptr));
  };
  // Every link has half the one-way latency: a hop under one leaf switch (2 links) costs the
  // device's latency, one through a spine (4 links) twice that.
  sg4::NetZone* zone =
      sg4::create_fatTree_zone("cluster", nullptr, params, sg4::ClusterCallbacks(netpoint), bw,
                               lat / 2, sg4::Link::SharingPolicy::SPLITDUPLEX);
  zone->seal();
}

}  // namespace

Status BuildPlatform(State* s) {
  const double bw = LinkBw(s->device.node), lat = HopLatency(s->device.node);
  if (s->opt.topology == "star") {
    BuildStar(s, bw, lat);
  } else if (s->opt.topology == "fat-tree") {
    if (s->opt.host_cores > 0) return Errorf("sim: --host-cores needs the star topology");
    BuildFatTree(s, bw, lat);
  } else {
    return Errorf("sim: unknown topology '{}' (star, fat-tree)", s->opt.topology);
  }
  return Status::Ok();
}

}  // namespace shoal::sim
