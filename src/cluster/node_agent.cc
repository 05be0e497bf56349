// NodeAgent: accept loop, one reader thread per link, one compute thread for the stage.
#include "cluster/node_agent.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/log.h"
#include "cluster/frame_queue.h"
#include "cluster/group_links.h"
#include "cluster/model_transfer.h"
#include "cluster/warmup.h"
#include "cluster/wire.h"
#include "collective/group.h"
#include "collective/tp_comm.h"
#include "engine/engine_builder.h"
#include "engine/stage.h"
#include "gguf/gguf.h"
#include "measure/node_measure.h"
#include "model/model.h"
#include "net/conn.h"
#include "planner/cost_model.h"
#include "planner/model_profile.h"
#include "planner/parallel.h"

namespace shoal::cluster {

namespace {

// Timeouts: accept polls stop_ every 200 ms; a link read wakes every 500 ms to see stop_;
// a stage waits up to 10 s for its downstream peer to accept (nodes start in any order).
constexpr int64_t kAcceptPollMs = 200;
constexpr int64_t kRecvPollMs = 500;
constexpr int64_t kConnectTimeoutMs = 10'000;
// After a failed accept (out of descriptors: the pending connection stays queued, so accepting
// again at once would spin): wait 100 ms, doubling to 1 s while it keeps failing, and log at
// most once a second (a descriptor shortage lasts as long as the links holding them).
constexpr int64_t kAcceptBackoffMinMs = 100;
constexpr int64_t kAcceptBackoffMaxMs = 1'000;
constexpr int64_t kAcceptLogEveryMs = 1'000;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct NodeAgent::Impl {
  explicit Impl(net::ClusterKey k) : key(std::move(k)) {}
  NodeOptions opts;
  net::ClusterKey key;
  std::unique_ptr<net::Listener> listener;
  measure::NodeInfo info;
  std::atomic<bool> stop{false};
  // Link threads with a flag each sets when it ends: the accept loop joins ended ones, since a
  // coordinator probing during failover opens a link every 0.5 s.
  struct LinkThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<LinkThread> links;

  // Stage state, set by an assignment (guarded by mu until the compute thread owns it).
  std::mutex mu;
  std::condition_variable cv;
  std::deque<net::Frame> work;
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Stage> stage;  // model's layers with their KV pool, swap space and threads
  std::shared_ptr<net::Conn> coordinator;
  std::vector<std::shared_ptr<net::Conn>> downstream;  // member 0: the next stage's members
  // Tensor parallel: the links peers of this node's group dialed (handed over by ServeLink),
  // and the group the compute thread gathers through (its links, to interrupt a gather).
  GroupLinks group_links;
  std::unique_ptr<collective::Group> group;
  std::unique_ptr<collective::GroupTpComm> comm;
  std::vector<std::shared_ptr<net::Conn>> group_conns;
  planner::LinkDType link = planner::LinkDType::kF32;
  uint32_t epoch = 0;       // of the assignment served; work of any other epoch is dropped
  Assignment assigned;      // the one served (compared with the next, to keep the layers)
  bool stage_stop = false;  // guarded by mu: the compute thread ends (a new assignment)
  std::thread compute;
  // The compute thread's micro-batch in and forward output, kept between steps: fresh ones
  // cost a prompt step ~1,500 page faults per stage (its rows in, out and on the wire: 1.2 MiB
  // each for 150 rows of a 2048-wide model), which made a 73-token prefill ~30 ms slower on 4
  // stages than on 1 (measured on the Zen 5 VM, whose page faults cost ~20 us).
  StepWork step_in;
  ForwardOutput step_out;
  NodeLoadCounters load;  // what the heartbeat answers report, counted by the compute thread

  // Assignments load on a thread of their own while the link thread answers heartbeats (a node
  // that loads is busy, not dead), one at a time (assign_mu). Each takes a ticket: a newer
  // assignment, or the close of the link that sent it, makes an older one give up at its next
  // step, and shuts down its dial of the downstream peer (`dialing`, guarded by mu), which a
  // stopped peer would hold for the handshake timeout.
  std::mutex assign_mu;
  std::atomic<uint64_t> assign_ticket{0};
  std::shared_ptr<net::Conn> dialing;

  void ServeLink(std::shared_ptr<net::Conn> conn);
  Status HandleAssign(const Assignment& a, const std::shared_ptr<net::Conn>& from,
                      FrameQueue* inbox, uint64_t ticket);
  // Error once a newer assignment has come (or the coordinator of this one left).
  Status CheckTicket(const Assignment& a, uint64_t ticket) const;
  void CancelDial();
  // Ends the stage's compute thread and downstream link; frees the layers unless keep_layers.
  void DropStage(bool keep_layers);
  // The link that delivered this plan's work failed: closes the coordinator's link (failover).
  void FailUpstream(std::optional<uint32_t> work_epoch);
  // With the layers loaded: dials the downstream stage and starts the compute thread.
  Status StartStage(const Assignment& a, const std::shared_ptr<net::Conn>& from, uint64_t ticket);
  // Dials and greets one downstream node (cancelled by CancelDial).
  Result<std::shared_ptr<net::Conn>> DialDownstream(const Assignment& a, const std::string& addr,
                                                    uint64_t ticket);
  // Links this member to its group's other members and gives the model their all-gather.
  Status JoinGroup(const Assignment& a, uint64_t ticket);
  void ComputeLoop();
  Status RunWork(const net::Frame& f);
};

Result<std::unique_ptr<NodeAgent>> NodeAgent::Start(const NodeOptions& opts, net::ClusterKey key) {
  auto a = std::unique_ptr<NodeAgent>(new NodeAgent);
  a->impl_ = std::make_unique<Impl>(std::move(key));
  Impl& m = *a->impl_;
  m.opts = opts;
  SHOAL_ASSIGN_OR_RETURN(m.listener, net::Listener::Listen(opts.host, opts.port));
  const std::string addr = opts.host + ":" + std::to_string(m.listener->port());
  const std::string name = opts.name.empty() ? addr : opts.name;
  if (opts.measure) {
    m.info = measure::MeasureNode(name, addr, opts.mem_limit, opts.n_threads);
  } else {
    m.info.name = name;
    m.info.address = addr;
    m.info.mem_limit = opts.mem_limit;
    m.info.n_threads = opts.n_threads;
    m.info.mem_bw = 10e9;  // unmeasured: a typical DDR4 channel pair, only for planning
    m.info.matmul_flops = {{DType::kQ4_0, 50e9}};
  }
  return a;
}

NodeAgent::~NodeAgent() {
  Stop();
  for (auto& t : impl_->links)
    if (t.thread.joinable()) t.thread.join();
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->cv.notify_all();
  }
  if (impl_->compute.joinable()) impl_->compute.join();
}

uint16_t NodeAgent::port() const { return impl_->listener->port(); }
const measure::NodeInfo& NodeAgent::info() const { return impl_->info; }

void NodeAgent::Stop() {
  impl_->stop = true;
  impl_->cv.notify_all();
}

Status NodeAgent::Run() {
  Impl& m = *impl_;
  int64_t backoff_ms = 0, last_log_ms = 0, failures = 0;
  while (!m.stop) {
    auto conn = m.listener->Accept(kAcceptPollMs);
    if (!conn.ok()) {
      ++failures;
      backoff_ms = std::min(std::max(backoff_ms * 2, kAcceptBackoffMinMs), kAcceptBackoffMaxMs);
      if (SteadyMs() - last_log_ms >= kAcceptLogEveryMs) {
        Log(LogLevel::kWarn, "accept failed {} time(s), retrying in {} ms: {}", failures,
            backoff_ms, conn.status().message());
        last_log_ms = SteadyMs();
        failures = 0;
      }
      for (int64_t w = 0; w < backoff_ms && !m.stop; w += kAcceptBackoffMinMs)
        std::this_thread::sleep_for(std::chrono::milliseconds(kAcceptBackoffMinMs));
      continue;
    }
    backoff_ms = 0;
    if (!*conn) continue;
    std::shared_ptr<net::Conn> c(std::move(*conn));
    std::erase_if(m.links, [](auto& t) {
      if (!t.done->load()) return false;
      t.thread.join();
      return true;
    });
    if (static_cast<int64_t>(m.links.size()) >= std::max(1, m.opts.max_links)) {
      // Over the cap: one small frame into an empty socket buffer never blocks.
      Log(LogLevel::kWarn, "refused a link from {}: {} links open (--max-links)", c->peer(),
          m.links.size());
      net::Frame bye;
      bye.type = net::MsgType::kGoodbye;
      bye.payload = net::EncodeGoodbye(
          fmt::format("too many links: this node serves at most {}", m.opts.max_links));
      (void)c->Send(bye);
      c->Shutdown();
      continue;
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    m.links.push_back({std::thread([&m, c, done] {
                         m.ServeLink(c);
                         *done = true;
                       }),
                       done});
  }
  return Status::Ok();
}

void NodeAgent::Impl::ServeLink(std::shared_ptr<net::Conn> conn) {
  // Authenticate on this link's thread, so a silent peer cannot stall the accept loop.
  net::AuthOptions auth;
  auth.cipher = opts.link_cipher;
  if (Status s = net::AuthenticateAcceptor(*conn, key, auth); !s.ok()) {
    Log(LogLevel::kWarn, "dropped an unauthenticated peer: {}", s.message());
    conn->Shutdown();
    return;
  }
  net::Frame join;
  join.type = net::MsgType::kControl;
  join.payload = EncodeJoin(measure::NodeInfoToJson(info));
  if (!conn->Send(join).ok()) return;
  FrameQueue inbox;  // the coordinator's answers to this link's fetches
  std::vector<std::thread> loaders;
  std::atomic<uint64_t> loading{0};    // ticket of this link's assignment still loading; 0: none
  std::optional<uint32_t> work_epoch;  // the plan epoch of the last work this link delivered
  bool handed_off = false;             // a group peer's link, now the group's
  while (!stop) {
    auto f = conn->Recv(kRecvPollMs);
    if (!f.ok()) {
      Log(LogLevel::kInfo, "link closed: {}", f.status().message());
      if (conn->corrupt()) FailUpstream(work_epoch);
      break;
    }
    if (!*f) continue;
    net::Frame& fr = **f;
    if (fr.type == net::MsgType::kControl) {
      auto type = ControlTypeOf(fr.payload);
      if (type.ok() && *type == ControlType::kAssign) {
        const uint64_t ticket = ++assign_ticket;
        CancelDial();  // an older assignment still dialing gives up: this one replaces it
        loading = ticket;
        auto a = DecodeAssign(fr.payload);
        if (a.ok())
          Log(LogLevel::kInfo, "assignment of epoch {}: layers [{}, {}) of {}", a->epoch,
              a->first_layer, a->last_layer, a->model_file);
        loaders.emplace_back([this, conn, &inbox, &loading, ticket, a = std::move(a)] {
          Status s = a.ok() ? HandleAssign(*a, conn, &inbox, ticket) : a.status();
          uint64_t mine = ticket;
          loading.compare_exchange_strong(mine, 0);
          if (!s.ok()) Log(LogLevel::kWarn, "assignment refused: {}", s.message());
          net::Frame r;
          r.type = net::MsgType::kControl;
          r.payload = EncodeAssignResult(s.ok(), s.ok() ? "" : s.message());
          (void)conn->Send(r);  // a closed link: the coordinator has moved on
        });
      } else if (type.ok() && *type == ControlType::kGroupJoin) {
        auto j = DecodeGroupJoin(fr.payload);
        if (!j.ok()) {
          Log(LogLevel::kWarn, "bad group join: {}", j.status().message());
          break;
        }
        group_links.Offer(j->first, j->second, conn);
        handed_off = true;
        break;
      } else if (type.ok() && (*type == ControlType::kData || *type == ControlType::kFetchDone)) {
        inbox.Push(std::move(fr));
      } else {
        Log(LogLevel::kWarn, "ignored control message: {}",
            type.ok() ? "unexpected type" : type.status().message());
      }
    } else if (fr.type == net::MsgType::kStepCommand || fr.type == net::MsgType::kActivations) {
      work_epoch = fr.tag.epoch;
      std::lock_guard<std::mutex> lk(mu);
      work.push_back(std::move(fr));
      cv.notify_one();
    } else if (fr.type == net::MsgType::kHeartbeat) {
      // Answered from the link thread, so a node busy with a long step or loading its
      // assignment still answers.
      // The answer carries this process's measured memory (/v1/cluster shows it beside the
      // plan's prediction): one read of /proc/self/status, ~10 us, ten times a second.
      net::Frame pong;
      pong.type = net::MsgType::kHeartbeat;
      if (auto mem = ReadProcessMemory(); mem.ok())
        pong.payload = EncodeHeartbeatReply(*mem, load.Get());
      if (!conn->Send(pong).ok()) break;
    } else if (fr.type == net::MsgType::kGoodbye) {
      break;
    }
  }
  inbox.Close("the coordinator's link closed during the fetch");
  // The coordinator of an assignment still loading has gone (it re-plans): give it up.
  uint64_t t = loading.load();
  if (t != 0 && assign_ticket.compare_exchange_strong(t, t + 1)) CancelDial();
  for (std::thread& l : loaders) l.join();
  if (!handed_off) conn->Shutdown();
}

void NodeAgent::Impl::FailUpstream(std::optional<uint32_t> work_epoch) {
  // A link failed its integrity check (or carried malformed frames) while this node serves a
  // plan: if it was the link feeding the stage (the first tampered frame may be its first), a
  // micro-batch is lost and no one else would notice (the coordinator's links to both stages
  // stay healthy). Closing the coordinator's link makes it fail over now: this node leaves
  // the plan and the KV is rebuilt by replay.
  std::lock_guard<std::mutex> lk(mu);
  if (!coordinator || work_epoch.value_or(epoch) != epoch) return;  // an older plan's link
  Log(LogLevel::kWarn, "the link feeding layers [{}, {}) failed at epoch {}: leaving the plan",
      assigned.first_layer, assigned.last_layer, epoch);
  coordinator->Shutdown();
}

Status NodeAgent::Impl::CheckTicket(const Assignment& a, uint64_t ticket) const {
  if (assign_ticket.load() == ticket) return Status::Ok();
  return Errorf("assignment of epoch {} given up: a newer one came, or its coordinator left",
                a.epoch);
}

void NodeAgent::Impl::CancelDial() {
  std::lock_guard<std::mutex> lk(mu);
  if (dialing) dialing->Shutdown();
}

void NodeAgent::Impl::DropStage(bool keep_layers) {
  // A new plan (epoch) replaces the stage: stop the compute thread, drop queued work, close
  // the old downstream link, and free the old layers before new ones load.
  std::vector<std::shared_ptr<net::Conn>> down, peers;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (!model) return;
    stage_stop = true;
    down = downstream;
    peers = group_conns;
  }
  cv.notify_all();
  // A send blocked on a stopped peer returns, and so does a gather waiting for one.
  for (auto& c : down) c->Shutdown();
  for (auto& c : peers)
    if (c) c->Shutdown();
  if (compute.joinable()) compute.join();
  std::lock_guard<std::mutex> lk(mu);
  work.clear();
  coordinator.reset();
  downstream.clear();
  model->SetTpComm(nullptr);
  comm.reset();
  group.reset();
  group_conns.clear();
  stage_stop = false;
  if (keep_layers) return;
  Log(LogLevel::kInfo, "dropping layers [{}, {}) of epoch {}", model->first_layer(),
      model->last_layer(), epoch);
  stage.reset();
  model.reset();
  file.reset();
}

namespace {

// Whether a node serving `a` can serve `b` with the same layers, KV pool and buffers (only the
// epoch and the downstream stage differ): failover then costs no reload. The KV rows left in
// the pool are stale, but the coordinator replays every sequence before reading any.
bool SameStage(const Assignment& a, const Assignment& b) {
  const planner::PlanConfig &x = a.config, &y = b.config;
  return a.model_file == b.model_file && a.first_layer == b.first_layer &&
         a.last_layer == b.last_layer && a.n_blocks == b.n_blocks &&
         a.swap_blocks == b.swap_blocks && x.max_num_seqs == y.max_num_seqs &&
         x.max_model_len == y.max_model_len && x.block_size == y.block_size &&
         x.kv_dtype == y.kv_dtype && x.max_batched_tokens == y.max_batched_tokens &&
         x.link_dtype == y.link_dtype && a.manifest.Id() == b.manifest.Id() &&
         a.tp_rank == b.tp_rank && a.tp_size() == b.tp_size() && a.tp_fast == b.tp_fast;
}

}  // namespace

Status NodeAgent::Impl::HandleAssign(const Assignment& a, const std::shared_ptr<net::Conn>& from,
                                     FrameQueue* inbox, uint64_t ticket) {
  std::lock_guard<std::mutex> serial(assign_mu);
  SHOAL_RETURN_IF_ERROR(CheckTicket(a, ticket));
  const bool keep = model && SameStage(assigned, a);
  DropStage(keep);
  if (keep) return StartStage(a, from, ticket);
  const FetchLink coordinator_link{from.get(),
                                   [inbox](int64_t timeout_ms) { return inbox->Pop(timeout_ms); }};
  const std::string& f = a.model_file;
  if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
      f == "." || f == "..")
    return Errorf("model file '{}' must be a plain file name inside --model-dir", f);
  // Our own copy of the file, checked tensor by tensor against the coordinator's hashes; or,
  // without one, a cached sparse copy holding just this stage's tensors, fetched from the
  // coordinator after the memory check below.
  std::string path = opts.model_dir + "/" + f;
  const bool have_file = std::filesystem::exists(path);
  if (!have_file) {
    const std::string cache =
        opts.cache_dir.empty() ? opts.model_dir + "/.shoal-cache" : opts.cache_dir;
    Log(LogLevel::kInfo, "no {} in {}: fetching this stage's tensors from the coordinator", f,
        opts.model_dir);
    SHOAL_ASSIGN_OR_RETURN(path, EnsureCachedFile(a.manifest, cache, coordinator_link));
  }
  SHOAL_ASSIGN_OR_RETURN(auto gf, gguf::File::Open(path));
  SHOAL_ASSIGN_OR_RETURN(planner::ModelProfile prof, planner::ProfileFromGguf(*gf));
  if (a.last_layer > prof.hp.n_layer)
    return Errorf("layer range beyond the model's {} layers", prof.hp.n_layer);
  // A group member holds its slice of the stage (planner/parallel.h).
  const planner::StageMemory need = planner::MemberMemory(
      prof, a.config,
      planner::EstimateStageMemory(prof, info, a.config, a.first_layer, a.last_layer),
      a.first_layer, a.tp_size(), a.tp_rank);
  if (opts.mem_limit > 0 && need.total() > opts.mem_limit)
    return Errorf(
        "layers [{}, {}) need {} MiB (weights {}, kv {}, buffers {}), over the {} MiB "
        "limit by {} MiB",
        a.first_layer, a.last_layer, need.total() >> 20, need.weights >> 20, need.kv >> 20,
        need.buffers >> 20, opts.mem_limit >> 20, (need.total() - opts.mem_limit) >> 20);
  if (have_file) {
    SHOAL_RETURN_IF_ERROR(VerifyStageTensors(*gf, a.manifest, a.first_layer, a.last_layer,
                                             prof.hp.n_layer,
                                             /*drop_pages=*/a.tp_size() > 1));
  } else {
    gf.reset();  // the fetch writes into the file; map it again afterwards
    SHOAL_RETURN_IF_ERROR(
        FetchStageTensors(a.manifest, path, a.first_layer, a.last_layer, coordinator_link));
    SHOAL_ASSIGN_OR_RETURN(gf, gguf::File::Open(path));
  }
  SHOAL_RETURN_IF_ERROR(CheckTicket(a, ticket));
  LoadOptions lo{a.first_layer, a.last_layer};
  lo.tp = TpShard{a.tp_rank, a.tp_size(), a.tp_fast};
  SHOAL_ASSIGN_OR_RETURN(auto mdl, Model::Load(*gf, lo));
  // The sizes the coordinator's engine uses (engine/engine_builder.h), so block, swap and
  // state slot ids mean the same on every stage.
  const StageSizes sizes{a.n_blocks, a.config.block_size, a.config.kv_dtype,
                         StageStateSlots(a.config.max_num_seqs), a.swap_blocks};
  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<Stage> st,
                         Stage::Create(mdl.get(), sizes, opts.n_threads));
  // Take the whole planned memory now (see WarmUpStage), so RSS matches the plan from the start
  // and a node that cannot have it fails here rather than in the middle of a request.
  SHOAL_RETURN_IF_ERROR(CheckTicket(a, ticket));
  WarmUpComm warm_comm(a.tp_rank);  // a member warms up alone: its gathers yield zeros
  mdl->SetTpComm(&warm_comm);
  const Status warmed = WarmUpStage(*st, a.config);
  mdl->SetTpComm(nullptr);
  SHOAL_RETURN_IF_ERROR(warmed);
  {
    std::lock_guard<std::mutex> lk(mu);
    file = std::move(gf);
    model = std::move(mdl);
    stage = std::move(st);
    assigned = a;
  }
  return StartStage(a, from, ticket);
}

Result<std::shared_ptr<net::Conn>> NodeAgent::Impl::DialDownstream(const Assignment& a,
                                                                   const std::string& addr,
                                                                   uint64_t ticket) {
  auto down = DialNode(addr, key, opts.link_cipher, kConnectTimeoutMs,
                       [&](const std::shared_ptr<net::Conn>& c) {
                         std::lock_guard<std::mutex> lk(mu);
                         dialing = c;  // CancelDial shuts it down from here on
                         // A newer assignment may have come before it could see `dialing`.
                         return CheckTicket(a, ticket);
                       });
  {
    std::lock_guard<std::mutex> lk(mu);
    dialing.reset();
  }
  if (!down.ok()) return down.status().Annotate("downstream");
  SHOAL_RETURN_IF_ERROR(CheckTicket(a, ticket));
  return down;
}

Status NodeAgent::Impl::JoinGroup(const Assignment& a, uint64_t ticket) {
  if (a.tp_size() <= 1) return Status::Ok();
  SHOAL_ASSIGN_OR_RETURN(
      auto links,
      group_links.Build(a.epoch, a.tp_rank, a.tp_peers, key, opts.link_cipher, kConnectTimeoutMs,
                        [this, ticket] { return assign_ticket.load() != ticket; }));
  const std::vector<std::shared_ptr<net::Conn>> links_copy = links;
  SHOAL_ASSIGN_OR_RETURN(auto g, StartGroup(a.tp_rank, std::move(links), *file, a.config));
  std::lock_guard<std::mutex> lk(mu);
  group_conns = links_copy;
  group = std::move(g);
  comm = std::make_unique<collective::GroupTpComm>(group.get());
  model->SetTpComm(comm.get());
  return Status::Ok();
}

Status NodeAgent::Impl::StartStage(const Assignment& a, const std::shared_ptr<net::Conn>& from,
                                   uint64_t ticket) {
  SHOAL_RETURN_IF_ERROR(CheckTicket(a, ticket));
  // Member 0 of a stage sends its output on: to every member of the next stage.
  std::vector<std::shared_ptr<net::Conn>> down;
  if (a.next_nodes.empty() && !model->is_last_stage())
    return Errorf("no downstream stage for layers [{}, {})", a.first_layer, a.last_layer);
  if (a.tp_rank == 0) {
    for (const std::string& addr : a.next_nodes) {
      SHOAL_ASSIGN_OR_RETURN(auto c, DialDownstream(a, addr, ticket));
      down.push_back(std::move(c));
    }
  }
  SHOAL_RETURN_IF_ERROR(JoinGroup(a, ticket));
  SHOAL_RETURN_IF_ERROR(CheckTicket(a, ticket));
  std::lock_guard<std::mutex> lk(mu);
  coordinator = from;
  downstream = std::move(down);
  link = a.config.link_dtype;
  epoch = a.epoch;
  assigned = a;
  work.clear();
  compute = std::thread([this] { ComputeLoop(); });
  Log(LogLevel::kInfo, "serving layers [{}, {}) of {}{} ({} KV blocks, epoch {})", a.first_layer,
      a.last_layer, a.model_file,
      a.tp_size() > 1 ? fmt::format(" as member {} of {}", a.tp_rank, a.tp_size()) : "", a.n_blocks,
      a.epoch);
  return Status::Ok();
}

void NodeAgent::Impl::ComputeLoop() {
  for (;;) {
    net::Frame f;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return stop.load() || stage_stop || !work.empty(); });
      if (stop || stage_stop) return;
      f = std::move(work.front());
      work.pop_front();
      // Work of another plan (a late frame from a node evicted at an older epoch, or queued
      // before this assignment) is never applied: its KV rows would not match this plan's.
      if (f.tag.epoch != epoch) {
        Log(LogLevel::kDebug, "dropped a frame of epoch {} (serving epoch {})", f.tag.epoch, epoch);
        continue;
      }
    }
    if (Status s = RunWork(f); !s.ok()) {
      // A bad micro-batch fails this link's work, never the process: the coordinator sees
      // the missing result and fails the step.
      Log(LogLevel::kError, "step {} failed: {}", f.tag.step, s.message());
      if (coordinator) coordinator->Shutdown();
    }
  }
}

Status NodeAgent::Impl::RunWork(const net::Frame& f) {
  // This stage's time: everything from decoding the micro-batch to encoding what it sends
  // (not the wait in the queue, not the send).
  const auto t0 = std::chrono::steady_clock::now();
  const HParams& hp = model->hparams();
  StepWork& w = step_in;
  std::vector<uint32_t> times;
  SHOAL_ASSIGN_OR_RETURN(std::span<const uint8_t> body, SplitStageTimes(f.payload, &times));
  SHOAL_RETURN_IF_ERROR(DecodeStepWork(body, hp.n_embd, &w));
  const bool first = model->is_first_stage();
  if (first && w.batch.tokens.empty()) return Errorf("stage 0 got no tokens");
  if (!first && w.hidden.size() != static_cast<size_t>(model->HiddenPlanes(model->first_layer())) *
                                       static_cast<size_t>(w.batch.n_rows()) *
                                       static_cast<size_t>(hp.n_embd))
    return Errorf("layer {} needs {} planes of hidden rows, got {} values", model->first_layer(),
                  model->HiddenPlanes(model->first_layer()), w.hidden.size());
  // Checks every id against this stage's pool, applies the copies, runs the layers: the code a
  // single process runs (engine/stage.h).
  ForwardOutput& out = step_out;
  const TpStats before = model->tp_stats();
  SHOAL_RETURN_IF_ERROR(stage->Run(w, first ? nullptr : w.hidden.data(), &out));
  const TpStats& after = model->tp_stats();
  load.Add(w.batch.n_rows(), std::chrono::steady_clock::now() - t0, after.ns - before.ns,
           after.calls - before.calls, after.bytes_in - before.bytes_in);
  net::Frame r;
  r.tag = f.tag;
  auto add_time = [&] {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - t0);
    times.push_back(static_cast<uint32_t>(std::min<int64_t>(us.count(), UINT32_MAX)));
    AppendStageTimes(times, &r.payload);
  };
  if (assigned.tp_rank != 0) return Status::Ok();  // member 0 speaks for the group
  if (model->is_last_stage()) {
    r.type = net::MsgType::kStepResult;
    r.payload = EncodeLogits(out.logits);
    add_time();
    return coordinator->Send(r);
  }
  r.type = net::MsgType::kActivations;
  // Block copies travel with the work: every stage applies them to its own layers' KV.
  w.batch.tokens.clear();
  w.hidden.swap(out.hidden);  // the rows out; both buffers keep their room for the next steps
  SHOAL_RETURN_IF_ERROR(EncodeStepWork(w, link, hp.n_embd, &r.payload));
  add_time();
  for (const auto& d : downstream) SHOAL_RETURN_IF_ERROR(d->Send(r));
  return Status::Ok();
}

}  // namespace shoal::cluster
