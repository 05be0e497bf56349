// Simulator state: placement from the planner, requests and lanes around the real Scheduler,
// failures and re-planning with spares, statistics.
#include "sim/sim_state.h"

#include <algorithm>
#include <cmath>
#include <simgrid/s4u/Host.hpp>

namespace shoal::sim {
namespace {
// Between two closed-loop requests leaving the load generator: a loopback HTTP request of a
// 64-word prompt is written in ~0.1 ms (`shoal bench serve`, one thread); any gap shorter than
// a step gives the same schedule.
constexpr double kClientGapS = 1e-4;

// KV block size of every lane's pool: the engine's default (SchedConfig).
constexpr int32_t kBlockSize = 16;

Dist Summarize(std::vector<double> v) {
  Dist d;
  d.n = static_cast<int64_t>(v.size());
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  auto q = [&](double p) { return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))]; };
  d.p50 = q(0.5);
  d.p90 = q(0.9);
  d.p99 = q(0.99);
  d.max = v.back();
  return d;
}

Status CheckOptions(const SimOptions& o) {
  if (o.nodes < 1) return Errorf("sim: --nodes must be >= 1");
  if (o.lanes < 0) return Errorf("sim: --lanes must be >= 0");
  if (o.workload.in < 1 || o.workload.out < 1 || !(o.workload.rate > 0))
    return Errorf("sim: workload needs rate > 0, in >= 1, out >= 1");
  if (o.workload.closed < 0 || o.workload.requests < 0 || o.stages < 0 || o.step_overhead_s < 0 ||
      o.host_cores < 0)
    return Errorf("sim: closed, requests, stages, step overhead and host cores must be >= 0");
  if (!(o.link_cpu_send_share >= 0 && o.link_cpu_send_share <= 1))
    return Errorf("sim: the link CPU's send share must be in [0, 1], got {}",
                  o.link_cpu_send_share);
  if (o.context < o.workload.in + o.workload.out)
    return Errorf("sim: --context {} < in + out = {}", o.context, o.workload.in + o.workload.out);
  return Status::Ok();
}

// One replica's plan and how many replicas the nodes hold.
struct ReplicaPlan {
  planner::CapacityReport plan;
  int64_t replicas = 0;
  int32_t concurrency = 0;  // sequences per replica
};

// One replica sized for 64 sequences (or its share of --concurrency; 64 keeps a pipeline of
// up to 64 stages full), then as many replicas as the nodes hold; the rest are spares.
Result<ReplicaPlan> PlanReplicas(const planner::ModelProfile& m, const planner::DevicePreset& d,
                                 const SimOptions& o) {
  constexpr int32_t kDefaultSeqsPerReplica = 64;
  planner::CapacityOptions co;
  co.context = o.context;
  co.concurrency = o.concurrency > 0       ? o.concurrency
                   : o.workload.closed > 0 ? o.workload.closed
                                           : kDefaultSeqsPerReplica;
  co.prompt = o.workload.in;
  co.output = o.workload.out;
  co.stages = o.stages;
  co.step_overhead_s = o.step_overhead_s;
  co.pipeline_groups = o.pipeline_groups;
  co.host_cores = o.host_cores;
  co.tp = o.tp;
  co.tp_fast = o.tp_fast;
  co.collective_s = o.collective_s;
  co.link_dtype = o.link_dtype;
  ReplicaPlan rp;
  SHOAL_ASSIGN_OR_RETURN(rp.plan, planner::PlanCapacity(m, d, co));
  rp.replicas = o.nodes / rp.plan.nodes_per_replica;
  if (rp.replicas < 1)
    return Errorf("sim: {} needs {} x {} per replica, only {} given", m.hp.name,
                  rp.plan.nodes_per_replica, d.name, o.nodes);
  // --concurrency is the total: each replica is planned for its share (a closed loop's B and
  // the default are per replica already).
  if (o.concurrency > 0) {
    co.concurrency = std::max<int32_t>(1, static_cast<int32_t>(o.concurrency / rp.replicas));
    SHOAL_ASSIGN_OR_RETURN(rp.plan, planner::PlanCapacity(m, d, co));
  }
  rp.concurrency = co.concurrency;
  return rp;
}

// s->opt.lanes lanes per replica, each with its share of `concurrency` sequences, its KV pool
// and the real Scheduler.
void AddLanes(State* s, int64_t reps, int32_t concurrency) {
  const int32_t per_lane = std::max(1, (concurrency + s->opt.lanes - 1) / s->opt.lanes);
  const int32_t blocks = per_lane * ((s->opt.context + kBlockSize - 1) / kBlockSize);
  s->replicas.resize(static_cast<size_t>(reps));
  for (int32_t r = 0; r < reps; ++r) {
    s->replicas[static_cast<size_t>(r)].index = r;
    for (int32_t k = 0; k < s->opt.lanes; ++k) {
      Lane& L = s->lanes.emplace_back();
      L.rep = &s->replicas[static_cast<size_t>(r)];
      L.max_seqs = per_lane;
      L.alloc = std::make_unique<BlockAllocator>(blocks);
      SchedConfig sc;
      sc.block_size = kBlockSize;
      sc.max_num_seqs = per_lane;
      sc.max_num_batched_tokens = s->plan.config.max_batched_tokens;
      sc.max_model_len = s->opt.context;
      sc.tiled_prompt_min = 0;
      L.sched = std::make_unique<Scheduler>(sc, L.alloc.get(), &L.clock);
    }
  }
}

// The workload's requests, queued round-robin on the lanes.
void AddRequests(State* s, int64_t reps) {
  const Workload& w = s->opt.workload;
  auto add = [&](double t, bool queue) {
    SimRequest q;
    q.id = static_cast<int64_t>(s->requests.size());
    q.arrival = t;
    q.tokens.assign(static_cast<size_t>(w.in), 1);
    if (queue) s->lanes[static_cast<size_t>(q.id) % s->lanes.size()].queue.push_back(q.id);
    s->requests.push_back(std::move(q));
  };
  if (s->report.closed) {
    // Closed loop (as `shoal bench serve --max-concurrency B`): B requests at the start, dealt
    // round-robin; each completion sends the next one on the same lane. They reach the server
    // one after another (one client thread), and an idle engine steps as soon as the first is
    // there: that step holds the first prompt alone and the next step the others, as on a real
    // server, where pricing them as one step at t = 0 gave a TTFT of the whole batch to all.
    const int64_t b = static_cast<int64_t>(w.closed) * reps;
    const int64_t n = w.requests > 0 ? std::min(b, w.requests) : b;
    for (int64_t i = 0; i < n; ++i) add(static_cast<double>(i) * kClientGapS, true);
  } else {
    // Poisson arrivals over the run, dealt round-robin to the lanes.
    std::exponential_distribution<double> gap(w.rate);
    double t = gap(s->rng);
    while (t < s->opt.duration_s) {
      add(t, true);
      t += gap(s->rng);
    }
  }
}

}  // namespace

Status State::Init(const planner::ModelProfile& m, const planner::DevicePreset& d,
                   const SimOptions& o) {
  opt = o;
  model = m;
  device = d;
  rng.seed(o.seed);
  SHOAL_RETURN_IF_ERROR(CheckOptions(o));
  SHOAL_ASSIGN_OR_RETURN(const ReplicaPlan rp, PlanReplicas(m, d, o));
  const int64_t reps = rp.replicas;
  plan = rp.plan;
  stages = plan.stages;
  // As the planner prices it: stages sharing one machine whose groups overlap, or the members
  // of a tensor-parallel group, compute beside each other, on the node as it runs then
  // (measure::CoRunning).
  if (o.host_cores > 0 && ((plan.groups > 1 && stages.size() > 1) || o.tp > 1))
    device.node = measure::CoRunning(d.node);
  row_bytes = planner::LinkRowBytes(plan.config.link_dtype, m.hp.n_embd);
  report.model = plan.model;
  report.device = d.name;
  report.topology = o.topology;
  report.nodes = o.nodes;
  report.hosts = o.nodes;
  report.replicas = reps;
  report.nodes_per_replica = plan.nodes_per_replica;
  report.stages = static_cast<int64_t>(stages.size());
  report.duration_s = o.duration_s;
  report.stage_util.assign(stages.size(), 0);
  report.plan_decode_tps = plan.decode_tps_aggregate * static_cast<double>(reps);
  report.plan_served_tps = plan.served_tps * static_cast<double>(reps);
  report.closed = o.workload.closed > 0;

  // Lanes = micro-batches in flight per replica (the planner's count: min(stages, sequences)).
  opt.lanes = o.lanes > 0 ? o.lanes : std::max(1, plan.micro_batches);
  AddLanes(this, reps, rp.concurrency);
  report.lanes = static_cast<int64_t>(lanes.size());
  AddRequests(this, reps);
  report.requests_arrived = static_cast<int64_t>(requests.size());
  // Each stage's decode cost for every batch the lanes can step, priced once.
  const size_t max_tokens = static_cast<size_t>(plan.config.max_batched_tokens) + 1;
  decode_cost.assign(stages.size(), std::vector<planner::StepCost>(max_tokens));
  for (size_t i = 0; i < stages.size(); ++i)
    for (size_t t = 1; t < max_tokens; ++t)
      decode_cost[i][t] =
          planner::StageDecodeCost(m, device.node, plan.config, stages[i], static_cast<double>(t));
  return Status::Ok();
}

void State::AssignHosts() {
  dead.assign(hosts.size(), 0);
  int64_t next = 0;
  for (Replica& r : replicas) {
    for (const planner::StageSpec& st : stages) {
      r.primary.push_back(next);
      for (int64_t k = 0; k < st.nodes(); ++k) {
        owner[next] = r.index;
        r.members.push_back(next++);
      }
    }
  }
  for (int64_t h = next; h < static_cast<int64_t>(hosts.size()); ++h) spares.push_back(h);
}

planner::StepCost State::Cost(size_t stage, int32_t decode, int32_t prefill, int32_t sampled,
                              double ctx) {
  const size_t cap = decode_cost[stage].size() - 1;
  if (prefill == 0)
    return decode_cost[stage][std::min(static_cast<size_t>(std::max(decode, 1)), cap)];
  // Prompt chunks and decodes in one step run as one batch of rows (the engine's forward pass):
  // the weights are read once and the decodes add their rows' compute, not a decode step of
  // their own (planner::StageMixedCost). A few per request: priced as met.
  return planner::StageMixedCost(model, device.node, plan.config, stages[stage], prefill + decode,
                                 sampled, ctx);
}

double State::HopSeconds(uint64_t bytes) const {
  const double bw = device.node.link_bw > 0 ? device.node.link_bw : 125e6;
  const double lat = device.node.link_latency_s > 0 ? device.node.link_latency_s : 100e-6;
  return static_cast<double>(bytes) / bw + lat;
}

void State::FailRandomHost(double now) {
  std::uniform_int_distribution<int64_t> pick(0, static_cast<int64_t>(hosts.size()) - 1);
  int64_t h = pick(rng);
  for (int tries = 0; dead[static_cast<size_t>(h)] && tries < 64; ++tries) h = pick(rng);
  if (dead[static_cast<size_t>(h)]) return;
  dead[static_cast<size_t>(h)] = 1;
  ++report.failures;
  hosts[static_cast<size_t>(h)]->turn_off();
  auto sp = std::find(spares.begin(), spares.end(), h);
  if (sp != spares.end()) {
    spares.erase(sp);
    return;
  }
  auto it = owner.find(h);
  if (it == owner.end()) return;
  Replica& r = replicas[static_cast<size_t>(it->second)];
  owner.erase(it);
  if (!r.alive) return;
  ++report.failovers;
  // Every request in the replica's lanes loses its KV now: its recovery ends at its next token.
  for (Lane& L : lanes)
    if (L.rep == &r)
      for (int64_t id : L.live) {
        SimRequest& q = requests[static_cast<size_t>(id)];
        if (q.affected_at < 0) q.affected_at = now;
      }
  ++r.epoch;  // every in-flight step of the replica is void
  if (r.failed_at < 0) r.failed_at = now;
  if (spares.empty()) {
    // Re-plan over the survivors: without a spare this replica cannot be whole again; its
    // sequences move to the other replicas' lanes.
    r.alive = false;
    ++report.replicas_lost;
    return;
  }
  const int64_t s = spares.front();
  spares.erase(spares.begin());
  ++report.spares_used;
  std::replace(r.members.begin(), r.members.end(), h, s);
  std::replace(r.primary.begin(), r.primary.end(), h, s);
  owner[s] = r.index;
  // The spare loads the dead node's share of the weights over its link.
  const double bw = device.node.link_bw > 0 ? device.node.link_bw : 125e6;
  r.ready_at =
      std::max(r.ready_at, now) + opt.respawn_s + static_cast<double>(plan.node_usable) / bw;
}

void Lane::Admit(State* s, double now) {
  auto add = [&](int64_t id) {
    SimRequest& q = s->requests[static_cast<size_t>(id)];
    if (!sched->Add(id, q.tokens).ok()) return;
    live.push_back(id);
  };
  while (!s->orphans.empty() && static_cast<int32_t>(live.size()) < max_seqs) {
    add(s->orphans.front());
    s->orphans.pop_front();
  }
  while (!queue.empty() && s->requests[static_cast<size_t>(queue.front())].arrival <= now &&
         static_cast<int32_t>(live.size()) < max_seqs) {
    add(queue.front());
    queue.pop_front();
  }
}

double Lane::NextArrival(const State* s) const {
  if (!s->orphans.empty()) return 0;
  if (queue.empty()) return s->opt.duration_s;
  return s->requests[static_cast<size_t>(queue.front())].arrival;
}

void Lane::LoseKv(State* s) {
  // The KV of every live sequence is gone; the coordinator still has each one's tokens. Remove
  // and re-add them: the scheduler recomputes prompt + generated tokens as a prefill and the
  // next sampled token continues the sequence (DESIGN.md, failover).
  for (int64_t id : live) {
    SimRequest& q = s->requests[static_cast<size_t>(id)];
    if (sched->Has(id)) {
      if (sched->Tokens(id).size() != q.tokens.size()) ++s->report.tokens_lost;
      sched->Finish(id);
    }
    if (!sched->Add(id, q.tokens).ok()) ++s->report.tokens_lost;
  }
}

void Lane::Orphan(State* s) {
  for (int64_t id : live) {
    if (sched->Has(id)) sched->Finish(id);
    s->orphans.push_back(id);
  }
  live.clear();
  for (int64_t id : queue) s->orphans.push_back(id);
  queue.clear();
}

void Lane::Complete(State* s, const StepPlan& plan, double now) {
  rep->failed_at = -1;
  for (const ScheduledChunk& c : plan.chunks) {
    if (c.n > 1 || !c.samples) s->report.prompt_tokens += c.n;  // prompt (or recomputed) rows
    if (!c.samples) continue;
    SimRequest& q = s->requests[static_cast<size_t>(c.seq_id)];
    if (q.generated >= s->opt.workload.out) {
      ++s->report.tokens_duplicated;
      continue;
    }
    if (q.first_token < 0) q.first_token = now;
    if (q.affected_at >= 0) {
      s->recoveries.push_back(now - q.affected_at);
      q.affected_at = -1;
    }
    ++q.generated;
    ++s->report.tokens_generated;
    constexpr int32_t kToken = 2;  // token ids do not matter to the schedule
    q.tokens.push_back(kToken);
    if (q.generated == s->opt.workload.out) {
      q.done = now;
      sched->Finish(c.seq_id);
      live.erase(std::find(live.begin(), live.end(), c.seq_id));
      ++s->report.requests_done;
      s->last_done = now;
      Release(s, now);
    } else {
      sched->AppendToken(c.seq_id, kToken);
    }
  }
}

void Lane::Release(State* s, double now) {
  const int64_t cap = s->opt.workload.requests;
  if (!s->report.closed || (cap > 0 && static_cast<int64_t>(s->requests.size()) >= cap)) return;
  SimRequest q;
  q.id = static_cast<int64_t>(s->requests.size());
  // The client hears of the last token and sends its next request: that request reaches the
  // engine after it has started its next steps, as on `shoal serve`.
  q.arrival = now + kClientGapS;
  q.tokens.assign(static_cast<size_t>(s->opt.workload.in), 1);
  queue.push_back(q.id);
  s->requests.push_back(std::move(q));
}

// Linux wakes a thread on its previous core, or on an idle one if that is busy, and a running
// thread stays put; one 2-core host sharing every exec evenly (a thread wherever a core frees)
// packed the 4 x 4 calibration row's stages to 89-90% of the cores where measured they took
// 84-85% (12-13% idle), and read +5.5% tokens/s over 12 stored runs (mean); this, 86-88% and
// +1.0%.
size_t State::PickCore(size_t who) {
  size_t c = last_core[who];
  if (core_execs[c] > 0)
    for (size_t k = 0; k < cores.size(); ++k)
      if (core_execs[k] < core_execs[c]) c = k;
  last_core[who] = c;
  return c;
}

size_t State::MemberSlot(size_t stage, int64_t k) const {
  size_t slot = stages.size() + 1;
  for (size_t i = 0; i < stage; ++i) slot += static_cast<size_t>(stages[i].dense_nodes - 1);
  return slot + static_cast<size_t>(k - 1);
}

uint64_t State::ReturnBytes(int32_t sampled) const {
  // the cluster runtime sends each sampled row's f32 logits back to the coordinator, which samples.
  return 4u * static_cast<uint64_t>(model.hp.n_vocab) * static_cast<uint64_t>(sampled);
}

void State::Finalize() {
  report.requests_arrived = static_cast<int64_t>(requests.size());
  std::vector<double> ttft, tpot, e2e;
  for (const SimRequest& q : requests) {
    if (q.first_token >= 0) ttft.push_back(q.first_token - q.arrival);
    if (q.done >= 0) {
      e2e.push_back(q.done - q.arrival);
      if (q.generated > 1) tpot.push_back((q.done - q.first_token) / (q.generated - 1));
      if (q.generated != opt.workload.out) ++report.tokens_lost;
    }
    if (static_cast<int64_t>(q.tokens.size()) != opt.workload.in + q.generated)
      ++report.tokens_lost;
  }
  report.ttft_s = Summarize(ttft);
  report.tpot_s = Summarize(tpot);
  report.e2e_s = Summarize(e2e);
  report.recovery_s = Summarize(recoveries);
  // Closed loop: the run ends with its last request (as the benchmark's duration does).
  const bool all_done =
      report.closed && opt.workload.requests > 0 && report.requests_done >= opt.workload.requests;
  report.end_s = all_done ? last_done : opt.duration_s;
  report.throughput_tps = static_cast<double>(report.tokens_generated) / report.end_s;
  const double in_step = replicas.empty() ? 0 : replicas[0].in_step_s;
  double u = 0, b = 0;
  report.stage_bubble.assign(report.stage_util.size(), 0);
  for (size_t i = 0; i < report.stage_util.size(); ++i) {
    // Bubble: time replica 0 had a step in flight but stage i computed nothing (one step in
    // flight only; overlapped lanes have no replica-wide step).
    if (in_step > 0) report.stage_bubble[i] = std::max(0.0, 1.0 - report.stage_util[i] / in_step);
    report.stage_util[i] /= report.end_s;
    u += report.stage_util[i];
    b += report.stage_bubble[i];
  }
  const double ns = static_cast<double>(std::max<size_t>(1, report.stage_util.size()));
  report.mean_util = u / ns;
  report.mean_bubble = b / ns;
}

}  // namespace shoal::sim
