// Coordinator side of the pipeline.
#include "cluster/remote_executor.h"

#include <thread>

#include "cluster/wire.h"
#include "planner/model_profile.h"

namespace shoal::cluster {

namespace {

// A step's result must come back within this long; 10 min covers a 2,048-token prefill of a
// large model on a slow node, and a dead pipeline fails the step instead of hanging forever.
constexpr int64_t kStepTimeoutMs = 600'000;
// A node loading its assignment answers pings (a silent one is dead within dead_ms) and must
// answer within this long: 10 min covers hashing and warming up a large model's stage on a slow
// disk, and bounds a node that answers pings but never finishes.
constexpr int64_t kAssignTimeoutMs = 600'000;

Result<net::Frame> RecvControl(net::Conn& c, int64_t timeout_ms, const std::string& who) {
  auto f = c.Recv(timeout_ms);
  if (!f.ok()) return f.status().Annotate(who);
  if (!*f) return Errorf("{}: no answer within {} ms", who, timeout_ms);
  if ((*f)->type != net::MsgType::kControl)
    return Errorf("{}: expected a control message, got {}", who, net::MsgTypeName((*f)->type));
  return std::move(**f);
}

}  // namespace

Result<NodeLink> ConnectNode(const std::string& addr, const NodeOverride& o,
                             const net::ClusterKey& key, int64_t timeout_ms,
                             net::LinkCipher cipher) {
  SHOAL_ASSIGN_OR_RETURN(auto hp, NodeAddress(addr));
  net::AuthOptions auth;
  auth.timeout_ms = std::min(auth.timeout_ms, timeout_ms);  // a stopped node fails a probe fast
  auth.cipher = cipher;
  SHOAL_ASSIGN_OR_RETURN(auto c,
                         net::ConnectAuthenticated(hp.first, hp.second, key, timeout_ms, {}, auth));
  NodeLink l;
  l.conn = std::shared_ptr<net::Conn>(std::move(c));
  SHOAL_ASSIGN_OR_RETURN(net::Frame j, RecvControl(*l.conn, timeout_ms, addr));
  SHOAL_ASSIGN_OR_RETURN(std::string json, DecodeJoin(j.payload));
  SHOAL_ASSIGN_OR_RETURN(l.info, measure::NodeInfoFromJson(json));
  l.info.address = addr;  // the address we reached it by
  if (!o.name.empty()) l.info.name = o.name;
  if (o.mem_limit > 0 && (l.info.mem_limit == 0 || o.mem_limit < l.info.mem_limit))
    l.info.mem_limit = o.mem_limit;
  if (o.link_bw > 0) l.info.link_bw = o.link_bw;
  if (o.link_latency_s > 0) l.info.link_latency_s = o.link_latency_s;
  return l;
}

Result<Cluster> PlanCluster(std::vector<NodeLink> links, const ClusterOptions& opts,
                            const gguf::File& file) {
  if (links.empty()) return Errorf("no nodes given");
  Cluster cl;
  for (NodeLink& l : links) {
    cl.infos.push_back(std::move(l.info));
    cl.conns.push_back(std::move(l.conn));
  }
  SHOAL_ASSIGN_OR_RETURN(planner::ModelProfile prof, planner::ProfileFromGguf(file));
  SHOAL_ASSIGN_OR_RETURN(cl.plan,
                         planner::MakeParallelPlan(prof, cl.infos, opts.plan, opts.parallel));
  cl.n_blocks = static_cast<int32_t>(planner::KvTokensPerLayer(opts.plan) / opts.plan.block_size);
  cl.file = &file;
  return cl;
}

Result<Cluster> ConnectAndPlan(const ClusterOptions& opts, const gguf::File& file,
                               const net::ClusterKey& key) {
  if (opts.nodes.empty()) return Errorf("no nodes given");
  std::vector<NodeLink> links;
  for (size_t i = 0; i < opts.nodes.size(); ++i) {
    const NodeOverride o = i < opts.overrides.size() ? opts.overrides[i] : NodeOverride{};
    SHOAL_ASSIGN_OR_RETURN(
        NodeLink l, ConnectNode(opts.nodes[i], o, key, opts.connect_timeout_ms, opts.link_cipher));
    links.push_back(std::move(l));
  }
  return PlanCluster(std::move(links), opts, file);
}

std::vector<int32_t> StageNodes(const planner::Stage& st) {
  if (st.members.empty()) return {st.node};
  return st.members;
}

namespace {

// Fetches served while the assignment runs, one thread each (a stage asks for one fetch at a
// time), so that the watching thread goes on reading answers and pinging while data flows.
class Fetches {
 public:
  // The threads must end before the file and connections they use; an early return has an
  // error of its own to report, so theirs is dropped here.
  ~Fetches() { static_cast<void>(Join()); }
  void Start(const gguf::File& file, net::Frame request, std::shared_ptr<net::Conn> conn,
             const std::string& name) {
    threads_.emplace_back([this, &file, request = std::move(request), conn, name] {
      Status s = ServeFetch(file, file.path(), request.payload, *conn);
      if (s.ok()) return;
      std::lock_guard<std::mutex> lk(mu_);
      if (error_.ok()) error_ = s.Annotate("sending tensors to node " + name);
      conn->Shutdown();  // the node's fetch fails now instead of at its data timeout
    });
  }
  Status Join() {
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    std::lock_guard<std::mutex> lk(mu_);
    return error_;
  }

 private:
  std::vector<std::thread> threads_;
  std::mutex mu_;
  Status error_;
};

}  // namespace

Status AssignLayers(Cluster& cl, const ClusterOptions& opts, std::vector<std::string>* lost) {
  if (lost) lost->clear();
  // Every tensor's hash, which nodes check their copies against (reads the model once).
  if (cl.manifest.tensors.empty() && cl.file) {
    SHOAL_ASSIGN_OR_RETURN(cl.manifest, BuildManifest(*cl.file));
  }
  if (!cl.watch) {
    std::vector<std::string> names;
    for (const measure::NodeInfo& n : cl.infos) names.push_back(n.name);
    cl.watch = std::make_shared<LinkWatch>(cl.conns, std::move(names), opts.watch);
  }
  // Every stage loads at once (a failover's recovery time is one load, not one per stage); a
  // stage dials its downstream peer after loading, and every node greets a link whether it is
  // assigned yet or not.
  std::vector<int32_t> stage_of(cl.conns.size(), -1);  // [node] -> stage
  size_t assigned = 0;
  auto address = [&cl](int32_t node) { return cl.infos[static_cast<size_t>(node)].address; };
  for (size_t i = cl.plan.stages.size(); i-- > 0;) {
    const planner::Stage& st = cl.plan.stages[i];
    Assignment a;
    a.epoch = cl.epoch;
    a.model_file = opts.model_file;
    a.first_layer = st.first_layer;
    a.last_layer = st.last_layer;
    a.n_blocks = cl.n_blocks;
    a.swap_blocks = opts.swap_blocks;
    a.config = opts.plan;
    if (i + 1 < cl.plan.stages.size()) {
      for (int32_t m : StageNodes(cl.plan.stages[i + 1])) a.next_nodes.push_back(address(m));
    }
    a.manifest = cl.manifest;
    const std::vector<int32_t> members = StageNodes(st);
    if (members.size() > 1)
      for (int32_t m : members) a.tp_peers.push_back(address(m));
    a.tp_fast = st.tp_fast;
    for (size_t k = 0; k < members.size(); ++k) {
      const auto node = static_cast<size_t>(members[k]);
      stage_of[node] = static_cast<int32_t>(i);
      a.tp_rank = static_cast<int32_t>(k);
      net::Frame f;
      f.type = net::MsgType::kControl;
      f.payload = EncodeAssign(a);
      SHOAL_RETURN_IF_ERROR(cl.conns[node]->Send(f));
      ++assigned;
    }
  }
  // Answers in any order, serving fetches on the way; any link that dies or stays silent past
  // dead_ms (LinkWatch) ends the wait.
  Fetches fetches;
  Status err;
  for (size_t left = assigned; left > 0 && err.ok();) {
    auto c = cl.watch->NextControl(kAssignTimeoutMs);
    if (!c.ok()) {
      err = c.status().Annotate("epoch " + std::to_string(cl.epoch) + " assignment");
      const auto states = cl.watch->States();
      for (size_t i = 0; i < states.size() && lost; ++i)
        if (states[i].health == net::PeerHealth::kDead) lost->push_back(cl.infos[i].address);
      break;
    }
    const int32_t stage = c->link < stage_of.size() ? stage_of[c->link] : -1;
    const std::string& name = cl.infos[c->link].name;
    auto t = ControlTypeOf(c->frame.payload);
    if (stage < 0 || !t.ok()) {
      err = Errorf("node {}: unexpected control message during the assignment", name);
    } else if (*t == ControlType::kFetch) {
      if (!cl.file) {
        err = Errorf("node {} asked for model data: no model here", name);
      } else {
        fetches.Start(*cl.file, std::move(c->frame), cl.conns[c->link], name);
      }
    } else if (Status s = DecodeAssignResult(c->frame.payload); !s.ok()) {
      err = s.Annotate("node " + name);
    } else {
      --left;
    }
  }
  if (!err.ok()) cl.watch->Stop();  // a fetch blocked on a link returns
  const Status fetched = fetches.Join();
  if (!fetched.ok()) return fetched;  // the reason the node gave up, rather than its lost link
  return err;
}

RemoteExecutor::RemoteExecutor(Cluster cluster, int64_t n_vocab, int64_t n_embd,
                               const WatchConfig& watch)
    : cluster_(std::move(cluster)),
      n_vocab_(n_vocab),
      n_embd_(n_embd),
      micro_batches_(static_cast<int32_t>(std::max<size_t>(1, cluster_.plan.stages.size()))) {
  static const SteadyClock clock;  // outlives every StageStats, which may outlive this
  stats_ = std::make_shared<StageStats>(cluster_.plan.stages.size(), &clock);
  watch_ = cluster_.watch;
  if (!watch_) {
    std::vector<std::string> names;
    for (const measure::NodeInfo& n : cluster_.infos) names.push_back(n.name);
    watch_ = std::make_shared<LinkWatch>(cluster_.conns, std::move(names), watch);
    cluster_.watch = watch_;
  }
}

RemoteExecutor::~RemoteExecutor() { watch_->Stop(); }

Status RemoteExecutor::Submit(const StepInput& in) {
  const Batch& batch = in.batch;
  if (batch.chunks.empty()) return Errorf("a step without chunks");
  ++step_;
  // Micro-batches: by default one per stage, so stage s works on micro-batch i while stage s+1
  // works on i-1. More would shorten the fill/drain bubble but read every stage's weights once
  // more per micro-batch: 2 stages x 1 thread, 16 decoding streams (1.1B Q4_0): 73.5 tok/s with
  // 2 micro-batches, 65.0 with 4. Never more than there are chunks.
  const size_t n_chunks = batch.chunks.size();
  const size_t n_mb = std::max<size_t>(1, std::min(n_chunks, static_cast<size_t>(micro_batches_)));
  Pending p;
  p.step = step_;
  size_t chunk = 0;
  for (size_t m = 0; m < n_mb; ++m) {
    const size_t c1 = n_chunks * (m + 1) / n_mb;
    StepWork& w = work_;
    w.Clear();
    if (m == 0) w.AppendCopies(in);
    const int32_t row_base = batch.chunks[chunk].row0;
    const int32_t row_end = batch.chunks[c1 - 1].row0 + batch.chunks[c1 - 1].n_tokens;
    for (size_t c = chunk; c < c1; ++c) {
      SeqChunk sc = batch.chunks[c];
      sc.row0 -= row_base;
      w.batch.chunks.push_back(sc);
    }
    w.batch.tokens.assign(batch.tokens.begin() + row_base, batch.tokens.begin() + row_end);
    for (int32_t r : batch.out_rows)
      if (r >= row_base && r < row_end) w.batch.out_rows.push_back(r - row_base);
    p.out_counts.push_back(w.batch.out_rows.size());
    p.rows.push_back(row_end - row_base);
    net::Frame f;
    f.type = net::MsgType::kStepCommand;
    f.tag = net::DataTag{m, cluster_.epoch, step_};
    SHOAL_RETURN_IF_ERROR(EncodeStepWork(w, cluster_.plan.config.link_dtype, n_embd_, &f.payload));
    AppendStageTimes({}, &f.payload);
    for (int32_t node : StageNodes(cluster_.plan.stages[0]))
      SHOAL_RETURN_IF_ERROR(cluster_.conns[static_cast<size_t>(node)]->Send(f));
    chunk = c1;
  }
  pending_.push_back(std::move(p));
  return Status::Ok();
}

Status RemoteExecutor::Collect(StepOutput* out) {
  if (pending_.empty()) return Errorf("collect without a submitted step");
  const Pending p = std::move(pending_.front());
  pending_.pop_front();
  out->kv_lost.reset();
  std::vector<float>* logits = &out->logits;
  logits->clear();
  const size_t last = static_cast<size_t>(cluster_.plan.stages.back().node);
  for (size_t m = 0; m < p.out_counts.size(); ++m) {
    for (;;) {
      auto f = watch_->NextResult(last, kStepTimeoutMs);
      if (!f.ok()) return f.status().Annotate("step " + std::to_string(p.step));
      if (f->tag.epoch != cluster_.epoch) continue;  // a late result of an older plan
      if (f->tag.step != p.step || f->tag.micro_batch != m)
        return Errorf("step {}: result out of order (step {}, micro-batch {})", p.step, f->tag.step,
                      f->tag.micro_batch);
      SHOAL_ASSIGN_OR_RETURN(std::span<const uint8_t> body,
                             SplitStageTimes(f->payload, &stage_us_));
      SHOAL_RETURN_IF_ERROR(
          DecodeLogits(body, p.out_counts[m] * static_cast<size_t>(n_vocab_), &part_));
      stats_->Record(stage_us_, p.rows[m]);
      logits->insert(logits->end(), part_.begin(), part_.end());
      break;
    }
  }
  return Status::Ok();
}

}  // namespace shoal::cluster
