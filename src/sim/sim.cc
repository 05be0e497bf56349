// The SimGrid driver: one actor per replica (one step in flight, its lanes' batches as
// micro-batches; or overlapped steps, one per lane, as the engine starts them), each lane running
// the real Scheduler on simulated time; stage compute as Execs, hops as host-to-host Comms; a
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

// The coordinator's work after each step (sampling, bookkeeping): on the shared machine of
// --host-cores it is computed there beside the stages, else it only takes time.
void StepOverhead(State* s) {
  if (s->opt.step_overhead_s <= 0) return;
  if (s->cores.empty()) {
    sg4::this_actor::sleep_for(s->opt.step_overhead_s);
    return;
  }
  const size_t core = s->PickCore(s->stages.size());
  sg4::ExecPtr ex = sg4::this_actor::exec_init(s->opt.step_overhead_s * kHostSpeed);
  ex->set_host(s->cores[core]);
  ex->start();
  ++s->core_execs[core];
  ++s->report.activities;
  WaitOk(ex, s->opt.step_overhead_s);
  --s->core_execs[core];
}

// Members 1.. of split stage i computing `work` seconds each beside member 0, each on the core
// PickCore gives its slot; false when one failed.
bool RunMembers(State* s, size_t i, const planner::StepCost& c, double work) {
  std::vector<std::pair<sg4::ExecPtr, size_t>> execs;
  for (int64_t k = 1; k < c.members; ++k) {
    const size_t core = s->PickCore(s->MemberSlot(i, k));
    sg4::ExecPtr ex = sg4::this_actor::exec_init(work * kHostSpeed);
    ex->set_host(s->cores[core]);
    ex->start();
    ++s->core_execs[core];
    ++s->report.activities;
    execs.emplace_back(ex, core);
  }
  bool ok = true;
  for (auto& [ex, core] : execs) {
    ok = WaitOk(ex, work) && ok;
    --s->core_execs[core];
  }
  return ok;
}

// What one lane's step plan holds.
struct Counts {
  int32_t decode = 0, prefill = 0, sampled = 0;
  double ctx = 0;  // mean positions a row attends to (its own included)
};
Counts CountPlan(const StepPlan& plan) {
  Counts n;
  double ctx_sum = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    (c.n == 1 && c.samples ? n.decode : n.prefill) += c.n;
    n.sampled += c.samples ? 1 : 0;
    ctx_sum += c.n * (c.start + (c.n + 1) / 2.0);
  }
  n.ctx = n.decode + n.prefill > 0 ? ctx_sum / (n.decode + n.prefill) : 0;
  return n;
}

// Runs one micro-batch of `n.decode` + `n.prefill` rows (`n.sampled` of them produce logits)
// through the replica's stages. Each stage computes in arrival order behind its mutex in `fifo`
// (a node has one compute thread). False when an activity failed (host off) or the epoch moved.
bool RunMicroBatch(State* s, Replica* rep, int64_t epoch, const Counts& n,
                   const std::vector<sg4::MutexPtr>& fifo) {
  const int32_t decode = n.decode, prefill = n.prefill, sampled = n.sampled;
  for (size_t i = 0; i < s->stages.size(); ++i) {
    const planner::StepCost c = s->Cost(i, decode, prefill, sampled, n.ctx);
    sg4::Host* host = s->hosts[static_cast<size_t>(rep->primary[i])];
    if (!host->is_on() || rep->epoch != epoch) return false;
    fifo[i]->lock();  // the host may have gone off while this waited for its turn
    if (!host->is_on() || rep->epoch != epoch) {
      fifo[i]->unlock();
      return false;
    }
    // Hidden rows to the next stage; the last stage's logits to the coordinator. The network
    // stacks' CPU for them (part of the stage's busy time, as planner::StageDecodeCost prices
    // it) overlaps their time on the wire: the stage computes, then sends, holding its FIFO for
    // its own share of that CPU (link_cpu_send_share); the rest, the kernel's and the
    // receiver's, runs at the same time on the core the receiver wakes on, and the bytes are
    // there when both are done. Measured through the 1 Gbit/s shaper, 128-256 KiB of logits:
    // the sender's write 8-16% of the CPU, the receiver's read ~50%, softirq the rest. All of
    // it on the stage priced the shaped 2 x 4 calibration row -4.7 +- 3.5% over 18 stored runs,
    // the measured shares (0.18 shaped, 0.42 loopback) +1.6 +- 3.7%. (All of it released after
    // the compute, on the stage's core and before the bytes left, read +10.8% on one run.)
    const bool last = i + 1 == s->stages.size();
    const uint64_t bytes = std::max<uint64_t>(
        1, last ? s->ReturnBytes(sampled) : s->row_bytes * static_cast<uint64_t>(decode + prefill));
    const double hop = s->HopSeconds(bytes);
    const double send_cpu =
        std::min(c.busy_s, static_cast<double>(bytes) * s->device.node.link_cpu_s_per_byte);
    const double beside = (1 - s->opt.link_cpu_send_share) * send_cpu;
    const size_t core = s->cores.empty() ? 0 : s->PickCore(i);
    sg4::Host* on = s->cores.empty() ? host : s->cores[core];
    // A split stage on shared cores: every member computes its share, collectives included (it
    // polls while it waits: planner::StepCost::core_s), on a core of its own at the same time.
    const bool members = !s->cores.empty() && c.members > 1;
    const double work = c.busy_s - send_cpu;
    sg4::ExecPtr ex = sg4::this_actor::exec_init(work * kHostSpeed);
    ex->set_host(on);
    ex->start();
    if (!s->cores.empty()) ++s->core_execs[core];
    ++s->report.activities;
    bool ok = members ? RunMembers(s, i, c, work) : true;
    ok = WaitOk(ex, c.busy_s) && ok;
    sg4::Host* next = last ? s->coordinator : s->hosts[static_cast<size_t>(rep->primary[i + 1])];
    sg4::CommPtr cm;
    sg4::ExecPtr rx;  // the CPU beside the send
    size_t rx_core = 0;
    if (ok && host->is_on() && next->is_on()) {
      cm = sg4::Comm::sendto_async(host, next, bytes);
      ++s->report.activities;
      if (beside > 0) {
        // Receiver: the next stage, or the coordinator (PickCore's last slot).
        rx_core = s->cores.empty() ? 0 : s->PickCore(i + 1);
        rx = sg4::this_actor::exec_init(beside * kHostSpeed);
        rx->set_host(s->cores.empty() ? next : s->cores[rx_core]);
        rx->start();
        if (!s->cores.empty()) ++s->core_execs[rx_core];
        ++s->report.activities;
      }
      if (send_cpu - beside > 0) {
        sg4::ExecPtr tx = sg4::this_actor::exec_init((send_cpu - beside) * kHostSpeed);
        tx->set_host(on);
        tx->start();
        ++s->report.activities;
        ok = WaitOk(tx, send_cpu - beside);
      }
    } else {
      ok = false;
    }
    if (!s->cores.empty()) --s->core_execs[core];  // its compute and send both done
    fifo[i]->unlock();
    if (rx) {
      ok = WaitOk(rx, beside) && ok;
      if (!s->cores.empty()) --s->core_execs[rx_core];
    }
    if (!ok || rep->epoch != epoch) {
      if (cm) {
        try {
          cm->cancel();
        } catch (const simgrid::Exception&) {  // already failed with its host
        }
      }
      return false;
    }
    if (rep->index == 0) s->report.stage_util[i] += c.busy_s;
    if (!WaitOk(cm, hop)) return false;
    // The cost's latency beyond the compute and the overlapped send is waited out here.
    const double rest = c.latency_s - (c.busy_s - send_cpu) - std::max(send_cpu, hop);
    if (rest > 0) sg4::this_actor::sleep_for(rest);
  }
  return rep->epoch == epoch;
}

bool Finished(const State* s, double now) {
  return now >= s->opt.duration_s || (s->report.closed && s->opt.workload.requests > 0 &&
                                      s->report.requests_done >= s->opt.workload.requests);
}

// Overlapped steps, as engine::Engine::Step runs them: one engine per replica starts every lane
// (group) that has work and nothing in flight, round robin from the one after the last
// collected, then waits for the oldest step in flight, samples it (the per-step overhead) and
// starts again. A lane that gets work while the engine waits on another lane's step starts
// only when that step is back: measured, 2 stages x 4 in flight had a median TTFT of 620-680
// ms where lanes that each stepped on their own gave 299. The lanes share the replica's stages'
// FIFOs (a node has one compute thread): steps that start together queue at stage 0 and then
// follow each other down the pipeline.
void ReplicaStepLoop(State* s, Replica* rep, std::vector<Lane*> lanes,
                     const std::vector<sg4::MutexPtr>& fifo) {
  struct Flight {
    size_t lane;
    int64_t epoch;
    StepPlan plan;
    sg4::ActorPtr actor;
    std::shared_ptr<bool> ok;
  };
  std::deque<Flight> flight;
  std::vector<bool> busy(lanes.size(), false);
  size_t next = 0;
  auto drain = [&] {
    for (Flight& f : flight) f.actor->join();
    flight.clear();
  };
  while (true) {
    const double now = sg4::Engine::get_clock();
    if (Finished(s, now)) break;
    if (!rep->alive) {
      drain();
      for (Lane* L : lanes) L->Orphan(s);
      break;
    }
    if (flight.empty() && now < rep->ready_at) {
      sg4::this_actor::sleep_until(std::min(rep->ready_at, s->opt.duration_s));
      continue;
    }
    double arrival = s->opt.duration_s;
    bool work = false;  // some lane holds requests it cannot start now (blocks full)
    for (size_t k = 0; k < lanes.size() && now >= rep->ready_at; ++k) {
      const size_t i = (next + k) % lanes.size();
      Lane* L = lanes[i];
      if (busy[i]) continue;
      L->clock.Set(static_cast<int64_t>(now * 1e6));
      L->Admit(s, now);
      if (L->sched->idle()) {
        arrival = std::min(arrival, L->NextArrival(s));
        continue;
      }
      StepPlan plan = L->sched->Schedule();
      if (plan.chunks.empty()) {
        work = true;
        continue;
      }
      const Counts n = CountPlan(plan);
      auto ok = std::make_shared<bool>(true);
      const int64_t epoch = rep->epoch;
      sg4::ActorPtr a = sg4::Actor::create("mb", s->coordinator, [=, &fifo] {
        if (!RunMicroBatch(s, rep, epoch, n, fifo)) *ok = false;
      });
      busy[i] = true;
      flight.push_back({i, epoch, std::move(plan), std::move(a), std::move(ok)});
    }
    if (flight.empty()) {
      // Nothing to wait for: the next arrival, or (blocks full) a millisecond.
      const double until =
          work ? now + 1e-3 : std::max(std::min(arrival, s->opt.duration_s), now + 1e-6);
      sg4::this_actor::sleep_until(until);
      continue;
    }
    Flight f = std::move(flight.front());
    flight.pop_front();
    f.actor->join();
    busy[f.lane] = false;
    next = (f.lane + 1) % lanes.size();
    Lane* L = lanes[f.lane];
    if (!*f.ok || rep->epoch != f.epoch) {
      L->LoseKv(s);  // the kept tokens recompute their KV once the replica is back
      continue;
    }
    StepOverhead(s);
    L->Complete(s, f.plan, sg4::Engine::get_clock());
  }
}

// One step in flight per replica (cluster::RemoteExecutor): every lane's batch is one micro-batch
// of the step, all enter stage 0 together, each stage computes them in arrival order, and the
// step ends when the last one's logits are back; then the coordinator's per-step overhead.
void ReplicaLoop(State* s, Replica* rep, std::vector<Lane*> lanes,
                 const std::vector<sg4::MutexPtr>& fifo) {
  std::vector<StepPlan> plans(lanes.size());
  while (true) {
    const double now = sg4::Engine::get_clock();
    if (Finished(s, now)) break;
    if (!rep->alive) {
      for (Lane* L : lanes) L->Orphan(s);
      break;
    }
    if (now < rep->ready_at) {
      sg4::this_actor::sleep_until(std::min(rep->ready_at, s->opt.duration_s));
      continue;
    }
    bool idle = true;
    double next = s->opt.duration_s;
    for (Lane* L : lanes) {
      L->clock.Set(static_cast<int64_t>(now * 1e6));
      L->Admit(s, now);
      idle = idle && L->sched->idle();
      next = std::min(next, L->NextArrival(s));
    }
    if (idle) {
      sg4::this_actor::sleep_until(std::max(std::min(next, s->opt.duration_s), now + 1e-6));
      continue;
    }
    const int64_t epoch = rep->epoch;
    std::vector<sg4::ActorPtr> mbs;
    auto ok = std::make_shared<bool>(true);
    for (size_t k = 0; k < lanes.size(); ++k) {
      plans[k] = lanes[k]->sched->idle() ? StepPlan{} : lanes[k]->sched->Schedule();
      if (plans[k].chunks.empty()) continue;
      const Counts n = CountPlan(plans[k]);
      mbs.push_back(sg4::Actor::create("mb", s->coordinator, [=, &fifo] {
        if (!RunMicroBatch(s, rep, epoch, n, fifo)) *ok = false;
      }));
    }
    if (mbs.empty()) {
      sg4::this_actor::sleep_for(1e-3);  // blocks full: wait for the running ones
      continue;
    }
    for (sg4::ActorPtr& a : mbs) a->join();
    if (rep->index == 0) rep->in_step_s += sg4::Engine::get_clock() - now;
    if (!*ok || rep->epoch != epoch) {
      for (Lane* L : lanes) L->LoseKv(s);
      continue;
    }
    StepOverhead(s);
    const double done = sg4::Engine::get_clock();
    for (size_t k = 0; k < lanes.size(); ++k)
      if (!plans[k].chunks.empty()) lanes[k]->Complete(s, plans[k], done);
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

}  // namespace

Result<SimReport> RunSim(const planner::ModelProfile& model, const planner::DevicePreset& device,
                         const SimOptions& opt) {
  if (opt.topology != "star" && opt.topology != "fat-tree")
    return Errorf("sim: unknown topology '{}' (star, fat-tree)", opt.topology);
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
    SHOAL_RETURN_IF_ERROR(BuildPlatform(&s));
    s.AssignHosts();
    // Per replica, one FIFO mutex per stage, shared by every actor that runs micro-batches on
    // it (outlives the actors).
    std::map<const Replica*, std::vector<sg4::MutexPtr>> fifos;
    for (Replica& r : s.replicas)
      for (size_t i = 0; i < s.stages.size(); ++i) fifos[&r].push_back(sg4::Mutex::create());
    for (Replica& r : s.replicas) {
      std::vector<Lane*> mine;
      for (Lane& L : s.lanes)
        if (L.rep == &r) mine.push_back(&L);
      const std::vector<sg4::MutexPtr>* f = &fifos[&r];
      if (s.plan.groups > 1) {
        sg4::Actor::create("engine", s.coordinator,
                           [&s, &r, mine, f] { ReplicaStepLoop(&s, &r, mine, *f); });
      } else {
        sg4::Actor::create("replica", s.coordinator,
                           [&s, &r, mine, f] { ReplicaLoop(&s, &r, mine, *f); });
      }
    }
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
