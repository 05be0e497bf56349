// Group: full-mesh exchanges on a sender thread per peer; receives in member order.
#include "collective/group.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "net/frame.h"

namespace shoal::collective {

namespace {
// A frame this small goes out on the calling thread when nothing is queued before it: it fits
// the socket's send buffer (Linux's default on loopback, ~200 KiB) beside the one or two of a
// peer that has not read yet, so the send cannot block on that peer. It saves the wake-up of the
// sender thread per call, which a decode step of a split layer pays 4 times per layer.
constexpr size_t kInlineSendBytes = 32 << 10;
// How long a receive polls before it blocks (Group::Receive).
constexpr int64_t kSpinUs = 200;
}  // namespace

// One thread per peer writes that peer's larger frames in order, so a member receives while its
// own parts are still on the way (no deadlock once messages outgrow the socket buffers).
struct Group::Senders {
  struct Peer {
    std::shared_ptr<net::Conn> conn;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<net::Frame> queue;
    bool busy = false;  // a frame is being written (by the thread or inline)
    bool stop = false;
    std::thread thread;
  };
  std::vector<std::unique_ptr<Peer>> peers;  // [member]; null at rank
  std::atomic<bool> send_failed{false};

  void Loop(Peer* p) {
    for (;;) {
      net::Frame f;
      {
        std::unique_lock<std::mutex> lk(p->mu);
        p->cv.wait(lk, [&] { return p->stop || !p->queue.empty(); });
        if (p->queue.empty()) return;
        f = std::move(p->queue.front());
        p->queue.pop_front();
        p->busy = true;
      }
      if (!p->conn->Send(f).ok()) send_failed = true;
      std::lock_guard<std::mutex> lk(p->mu);
      p->busy = false;
    }
  }
  void Push(size_t k, net::Frame f) {
    Peer& p = *peers[k];
    {
      std::lock_guard<std::mutex> lk(p.mu);
      if (f.payload.size() > kInlineSendBytes || p.busy || !p.queue.empty()) {
        p.queue.push_back(std::move(f));
        p.cv.notify_one();
        return;
      }
      p.busy = true;  // the thread waits for the queue; only this thread pushes
    }
    if (!p.conn->Send(f).ok()) send_failed = true;
    std::lock_guard<std::mutex> lk(p.mu);
    p.busy = false;
  }
  void StopAll() {
    for (auto& p : peers) {
      if (!p) continue;
      {
        std::lock_guard<std::mutex> lk(p->mu);
        p->stop = true;
      }
      p->cv.notify_one();
    }
    for (auto& p : peers)
      if (p && p->thread.joinable()) p->thread.join();
  }
};

Group::Group(int rank, std::vector<std::shared_ptr<net::Conn>> links, int64_t timeout_ms)
    : rank_(rank), links_(std::move(links)), timeout_ms_(timeout_ms) {
  senders_ = std::make_unique<Senders>();
  senders_->peers.resize(links_.size());
  for (size_t k = 0; k < links_.size(); ++k) {
    if (static_cast<int>(k) == rank_ || !links_[k]) continue;
    auto p = std::make_unique<Senders::Peer>();
    p->conn = links_[k];
    Senders::Peer* raw = p.get();
    p->thread = std::thread([this, raw] { senders_->Loop(raw); });
    senders_->peers[k] = std::move(p);
  }
}

Group::~Group() { senders_->StopAll(); }

Status Group::Fail(Status s) {
  if (!failed_) {
    failed_ = true;
    for (auto& l : links_)
      if (l) l->Shutdown();  // peers waiting on this member fail at once, not at their timeout
  }
  return s;
}

Result<std::optional<net::Frame>> Group::Receive(net::Conn& link) {
  // Polls first: a peer's part usually lands within tens of microseconds of ours, and waking a
  // process blocked in poll() costs about as much again on a loaded host. Past the spin, block.
  const auto spin_end = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinUs);
  while (std::chrono::steady_clock::now() < spin_end) {
    auto r = link.Recv(0);
    if (!r.ok() || *r) return r;
    // Where members outnumber the cores (several on one machine), the peer this waits for may
    // be the one the scheduler put aside: give it the core. Alone on a core this returns at
    // once.
    std::this_thread::yield();
  }
  return link.Recv(timeout_ms_);
}

Status Group::Exchange(const std::vector<std::span<const float>>& to,
                       const std::vector<std::span<float>>& from) {
  if (failed_) return Errorf("collective group failed earlier");
  const int m = size();
  ++call_;
  for (int k = 0; k < m; ++k) {
    if (k == rank_) continue;
    if (!links_[static_cast<size_t>(k)]) return Fail(Errorf("no link to member {}", k));
    net::Frame f;
    f.type = net::MsgType::kActivations;
    // micro_batch: the sender's index, step: the call; a peer out of step is caught below.
    f.tag = net::DataTag{static_cast<uint64_t>(rank_), 0, call_};
    const std::span<const float> s = to[static_cast<size_t>(k)];
    f.payload.resize(s.size_bytes());
    if (!s.empty()) std::memcpy(f.payload.data(), s.data(), s.size_bytes());
    senders_->Push(static_cast<size_t>(k), std::move(f));
  }
  for (int k = 0; k < m; ++k) {
    if (k == rank_) continue;
    auto r = Receive(*links_[static_cast<size_t>(k)]);
    if (!r.ok()) return Fail(r.status().Annotate("collective: member " + std::to_string(k)));
    if (!*r) return Fail(Errorf("collective: member {} sent nothing within {} ms", k, timeout_ms_));
    const net::Frame& f = **r;
    const std::span<float> dst = from[static_cast<size_t>(k)];
    if (f.type != net::MsgType::kActivations || f.tag.micro_batch != static_cast<uint64_t>(k) ||
        f.tag.step != call_ || f.payload.size() != dst.size_bytes())
      return Fail(
          Errorf("collective: member {} sent call {} with {} bytes, expected call {} with {}", k,
                 f.tag.step, f.payload.size(), call_, dst.size_bytes()));
    if (!dst.empty()) std::memcpy(dst.data(), f.payload.data(), dst.size_bytes());
  }
  if (senders_->send_failed) return Fail(Errorf("collective: a send to a member failed"));
  return Status::Ok();
}

Status Group::AllGather(std::span<const float> mine, std::span<const int64_t> counts,
                        std::vector<float>* out) {
  const int m = size();
  if (static_cast<int>(counts.size()) != m)
    return Errorf("all-gather: {} counts for {} members", counts.size(), m);
  if (counts[static_cast<size_t>(rank_)] != static_cast<int64_t>(mine.size()))
    return Errorf("all-gather: member {} holds {} values, its count says {}", rank_, mine.size(),
                  counts[static_cast<size_t>(rank_)]);
  int64_t total = 0;
  for (int64_t c : counts) {
    if (c < 0) return Errorf("all-gather: negative count");
    total += c;
  }
  out->resize(static_cast<size_t>(total));
  std::vector<std::span<const float>> to(static_cast<size_t>(m), mine);
  std::vector<std::span<float>> from(static_cast<size_t>(m));
  for (int k = 0, at = 0; k < m; at += static_cast<int>(counts[static_cast<size_t>(k)]), ++k)
    from[static_cast<size_t>(k)] = {out->data() + at,
                                    static_cast<size_t>(counts[static_cast<size_t>(k)])};
  std::copy(mine.begin(), mine.end(), from[static_cast<size_t>(rank_)].begin());
  return Exchange(to, from);
}

Status Group::AllReduceOrdered(std::span<float> x) {
  const int m = size();
  const int64_t n = static_cast<int64_t>(x.size());
  if (m == 1) return failed_ ? Errorf("collective group failed earlier") : Status::Ok();
  const Slice own = SliceOf(n, m, rank_);
  // Reduce-scatter: every member's values of slice rank_, in member order (in a buffer kept
  // between calls: a fresh one costs a 4 MiB call ~1,000 page faults).
  std::vector<float>& parts = scratch_;
  parts.resize(static_cast<size_t>(own.count * m));
  std::vector<std::span<const float>> to(static_cast<size_t>(m));
  std::vector<std::span<float>> from(static_cast<size_t>(m));
  for (int k = 0; k < m; ++k) {
    const Slice s = SliceOf(n, m, k);
    to[static_cast<size_t>(k)] = {x.data() + s.first, static_cast<size_t>(s.count)};
    from[static_cast<size_t>(k)] = {parts.data() + k * own.count, static_cast<size_t>(own.count)};
  }
  std::copy(x.begin() + own.first, x.begin() + own.first + own.count,
            from[static_cast<size_t>(rank_)].begin());
  SHOAL_RETURN_IF_ERROR(Exchange(to, from));
  for (int64_t i = 0; i < own.count; ++i) {
    float sum = parts[static_cast<size_t>(i)];
    for (int k = 1; k < m; ++k) sum += parts[static_cast<size_t>(k * own.count + i)];
    x[static_cast<size_t>(own.first + i)] = sum;
  }
  // All-gather of the summed slices, in place.
  for (int k = 0; k < m; ++k) {
    const Slice s = SliceOf(n, m, k);
    to[static_cast<size_t>(k)] = {x.data() + own.first, static_cast<size_t>(own.count)};
    from[static_cast<size_t>(k)] = {x.data() + s.first, static_cast<size_t>(s.count)};
  }
  return Exchange(to, from);
}

}  // namespace shoal::collective
