// The SimGrid driver: a star platform of hosts, one actor per replica lane running the real
// Scheduler on simulated time, stage compute as Execs and hops as host-to-host Comms, a
// failure actor turning hosts off, spares brought in by re-planning.
#include "sim/sim.h"

#include <xbt/log.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <simgrid/Exception.hpp>
#include <simgrid/s4u.hpp>

#include "base/clock.h"
#include "kvcache/block_allocator.h"
#include "sched/scheduler.h"
#include "sim/sim_state.h"

namespace sg4 = simgrid::s4u;

namespace shoal::sim {
namespace {

// Host speed in the platform: Execs are sized in seconds x this (any unit works; 1e9 keeps
// SimGrid's doubles well inside their precision for microsecond steps).
constexpr double kHostSpeed = 1e9;
// A blocked wait gives up after this many times the activity's expected duration (plus 1 s):
// a peer on a dead host must not hang its waiter (SimGrid notes in issue #8).
constexpr double kTimeoutFactor = 20;

bool WaitOk(const sg4::ActivityPtr& a, double expected_s) {
  try {
    a->wait_for(kTimeoutFactor * expected_s + 1.0);
    return true;
  } catch (const simgrid::Exception&) {
    return false;
  }
}

// Runs one step of `decode` + `prefill` tokens through the replica's stages. False when an
// activity failed (host off) or the replica's epoch moved.
bool RunStep(State* s, Replica* rep, int64_t epoch, int32_t decode, int32_t prefill) {
  for (size_t i = 0; i < s->stages.size(); ++i) {
    const planner::StepCost c = s->Cost(i, decode, prefill);
    sg4::Host* host = s->hosts[static_cast<size_t>(rep->primary[i])];
    if (!host->is_on() || rep->epoch != epoch) return false;
    sg4::ExecPtr ex = sg4::this_actor::exec_init(c.busy_s * kHostSpeed);
    ex->set_host(host);
    ex->start();
    ++s->report.activities;
    if (!WaitOk(ex, c.busy_s) || rep->epoch != epoch) return false;
    if (rep->index == 0) s->report.stage_util[i] += c.busy_s;
    const double rest = c.latency_s - c.busy_s - s->HopSeconds(decode + prefill);
    if (rest > 0) sg4::this_actor::sleep_for(rest);
    const bool last = i + 1 == s->stages.size();
    sg4::Host* next = s->hosts[static_cast<size_t>(last ? rep->primary[0] : rep->primary[i + 1])];
    if (!next->is_on()) return false;
    const uint64_t bytes = last ? 4u * static_cast<uint64_t>(decode + prefill)
                                : s->row_bytes * static_cast<uint64_t>(decode + prefill);
    sg4::CommPtr cm = sg4::Comm::sendto_async(host, next, std::max<uint64_t>(bytes, 1));
    ++s->report.activities;
    if (!WaitOk(cm, s->HopSeconds(decode + prefill))) return false;
  }
  return rep->epoch == epoch;
}

void LaneLoop(State* s, Lane* L) {
  Replica* rep = L->rep;
  while (true) {
    const double now = sg4::Engine::get_clock();
    if (now >= s->opt.duration_s) break;
    if (!rep->alive) {
      L->Orphan(s);
      break;
    }
    if (now < rep->ready_at) {
      sg4::this_actor::sleep_until(std::min(rep->ready_at, s->opt.duration_s));
      continue;
    }
    L->clock.Set(static_cast<int64_t>(now * 1e6));
    L->Admit(s, now);
    if (L->sched->idle()) {
      const double next = std::min(L->NextArrival(s), s->opt.duration_s);
      sg4::this_actor::sleep_until(std::max(next, now + 1e-6));
      continue;
    }
    const int64_t epoch = rep->epoch;
    StepPlan plan = L->sched->Schedule();
    if (plan.chunks.empty()) {
      sg4::this_actor::sleep_for(1e-3);  // blocks full: wait for the running ones
      continue;
    }
    int32_t decode = 0, prefill = 0;
    for (const ScheduledChunk& c : plan.chunks) (c.n == 1 && c.samples ? decode : prefill) += c.n;
    if (!RunStep(s, rep, epoch, decode, prefill)) {
      L->LoseKv(s);  // the kept tokens recompute their KV once the replica is back
      continue;
    }
    L->Complete(s, plan, sg4::Engine::get_clock());
  }
}

void FailureLoop(State* s) {
  if (s->opt.mtbf_hours <= 0) return;
  std::exponential_distribution<double> gap(static_cast<double>(s->report.hosts) /
                                            (s->opt.mtbf_hours * 3600.0));
  while (true) {
    const double dt = gap(s->rng);
    if (sg4::Engine::get_clock() + dt >= s->opt.duration_s) break;
    sg4::this_actor::sleep_for(dt);
    s->FailRandomHost(sg4::Engine::get_clock());
  }
}

sg4::NetZone* BuildStar(State* s, const planner::NodeInfo& n) {
  sg4::NetZone* zone = sg4::create_star_zone("cluster");
  const double bw = n.link_bw > 0 ? n.link_bw : 125e6;
  // A hop crosses two host links through the switch: half the one-way latency on each.
  const double lat = (n.link_latency_s > 0 ? n.link_latency_s : 100e-6) / 2;
  auto add = [&](const std::string& name) {
    sg4::Host* h = zone->create_host(name, kHostSpeed);
    sg4::Link* l = zone->create_link(name + "_l", bw)->set_latency(lat)->seal();
    zone->add_route(h->get_netpoint(), nullptr, nullptr, nullptr, {sg4::LinkInRoute(l)}, true);
    return h;
  };
  s->coordinator = zone->create_host("coordinator", kHostSpeed);
  s->hosts.reserve(static_cast<size_t>(s->report.hosts));
  for (int64_t i = 0; i < s->report.hosts; ++i) s->hosts.push_back(add("n" + std::to_string(i)));
  {
    sg4::Link* l = zone->create_link("coordinator_l", bw * 100)->set_latency(lat)->seal();
    zone->add_route(s->coordinator->get_netpoint(), nullptr, nullptr, nullptr,
                    {sg4::LinkInRoute(l)}, true);
  }
  zone->seal();
  return zone;
}

}  // namespace

Result<SimReport> RunSim(const planner::ModelProfile& model, const planner::DevicePreset& device,
                         const SimOptions& opt) {
  if (opt.topology != "star")
    return Errorf(
        "sim: topology '{}' is not implemented (star: every node on one non-blocking "
        "switch)",
        opt.topology);
  State s;
  SHOAL_RETURN_IF_ERROR(s.Init(model, device, opt));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    // 100k actors need small stacks and no guard pages; here a few hundred lanes suffice, but
    // keep stacks small anyway (KiB). CM02: plain max-min flow sharing (LV08's latency and
    // bandwidth factors are fitted to WAN TCP and would need calibrating for a LAN).
    char a0[] = "shoal-sim", a1[] = "--log=root.thresh:critical",
         a2[] = "--cfg=contexts/stack-size:128", a3[] = "--cfg=contexts/guard-size:0",
         a4[] = "--cfg=network/model:CM02";
    char* argv[] = {a0, a1, a2, a3, a4, nullptr};
    int argc = 5;
    sg4::Engine e(&argc, argv);
    BuildStar(&s, device.node);
    s.AssignHosts();
    for (Lane& L : s.lanes)
      sg4::Actor::create("lane", s.coordinator, [&s, &L] { LaneLoop(&s, &L); });
    sg4::Actor::create("failures", s.coordinator, [&s] { FailureLoop(&s); });
    e.run_until(opt.duration_s + 1.0);
  } catch (const std::exception& ex) {
    return Errorf("sim: SimGrid failed: {}", ex.what());
  }
  s.report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.Finalize();
  return s.report;
}

}  // namespace shoal::sim
