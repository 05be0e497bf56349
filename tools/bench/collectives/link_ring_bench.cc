// The same microbenchmark as gloo_bench.cc over Shoal's own links: ring all-gather and ring
// all-reduce (reduce-scatter, then all-gather) between MEMBERS processes on loopback, each hop
// an authenticated net::Conn sealed with AES-256-GCM (or --cipher none), one frame per chunk.
// This is what a collectives layer on the cluster's links costs before any tuning (issue #37).
//
//   link_ring_bench MEMBERS [ITERS] [aes|none]
//
// Same cases, counts and output lines as gloo_bench.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/auth.h"
#include "net/conn.h"

namespace {

using shoal::net::Conn;
using shoal::net::Frame;

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

// Sends frames to the next member on a thread of its own, so a member can receive from the
// previous one while its own chunk is still on the way (no deadlock past the socket buffers).
class Sender {
 public:
  explicit Sender(Conn* c) : c_(c), t_([this] { Loop(); }) {}
  ~Sender() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    t_.join();
  }
  void Send(Frame f) {
    std::lock_guard<std::mutex> lk(mu_);
    q_.push_back(std::move(f));
    cv_.notify_all();
  }

 private:
  void Loop() {
    for (;;) {
      Frame f;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !q_.empty(); });
        if (q_.empty()) return;
        f = std::move(q_.front());
        q_.erase(q_.begin());
      }
      if (!c_->Send(f).ok()) std::abort();
    }
  }
  Conn* c_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Frame> q_;
  bool stop_ = false;
  std::thread t_;
};

Frame Chunk(const float* p, size_t n, uint64_t step) {
  Frame f;
  f.type = shoal::net::MsgType::kActivations;
  f.tag = shoal::net::DataTag{0, 1, step};
  f.payload.resize(n * sizeof(float));
  std::memcpy(f.payload.data(), p, f.payload.size());
  return f;
}

void RecvInto(Conn* c, float* p, size_t n, bool add) {
  auto f = c->Recv(30'000);
  if (!f.ok() || !*f || (*f)->payload.size() != n * sizeof(float)) std::abort();
  const float* src = reinterpret_cast<const float*>((*f)->payload.data());
  if (add) {
    for (size_t i = 0; i < n; ++i) p[i] += src[i];
  } else {
    std::memcpy(p, src, n * sizeof(float));
  }
}

int RunMember(int r, int m, const std::string& dir, int iters, shoal::net::LinkCipher cipher) {
  auto key = shoal::net::ClusterKey::FromBytes(std::vector<uint8_t>(32, 7));
  auto lis = shoal::net::Listener::Listen("127.0.0.1", 0);
  if (!key.ok() || !lis.ok()) return 1;
  std::ofstream(dir + "/" + std::to_string(r) + ".tmp") << (*lis)->port();
  std::rename((dir + "/" + std::to_string(r) + ".tmp").c_str(),
              (dir + "/" + std::to_string(r)).c_str());
  shoal::net::AuthOptions auth;
  auth.cipher = cipher;
  std::unique_ptr<Conn> next, prev;
  std::thread acceptor([&] {
    if (m == 1) return;
    for (;;) {
      auto c = (*lis)->Accept(1000);
      if (c.ok() && *c && shoal::net::AuthenticateAcceptor(**c, *key, auth).ok()) {
        prev = std::move(*c);
        return;
      }
    }
  });
  if (m > 1) {
    const std::string peer = dir + "/" + std::to_string((r + 1) % m);
    int port = 0;
    for (int i = 0; i < 1000 && !(std::ifstream(peer) >> port); ++i) usleep(10'000);
    auto c = Conn::Connect("127.0.0.1", static_cast<uint16_t>(port), 10'000);
    if (!c.ok() || !shoal::net::AuthenticateDialer(**c, *key, auth).ok()) return 1;
    next = std::move(*c);
  }
  acceptor.join();
  std::unique_ptr<Sender> tx = m > 1 ? std::make_unique<Sender>(next.get()) : nullptr;
  uint64_t step = 0;
  for (size_t bytes : {size_t{4} << 10, size_t{16} << 10, size_t{64} << 10, size_t{256} << 10,
                       size_t{1} << 20, size_t{4} << 20}) {
    const size_t n = bytes / sizeof(float);
    const size_t share = n / static_cast<size_t>(m);
    std::vector<float> in(n, 1.0f + static_cast<float>(r)), out(n);
    const int timed = bytes >= (size_t{1} << 20) ? std::min(iters, 20) : iters;
    for (const char* op : {"allgather", "allreduce"}) {
      const bool gather_only = op[3] == 'g';
      std::vector<double> us;
      for (int it = 0; it < 10 + timed; ++it) {
        const auto t0 = std::chrono::steady_clock::now();
        // Chunk k of the output holds member k's share; a ring moves chunk (r - s) to the next
        // member at step s. All-reduce first sums chunk (r - s - 1) as it passes (N-1 steps).
        if (gather_only) {
          std::copy(in.begin(), in.begin() + static_cast<long>(share),
                    out.begin() + static_cast<long>(share) * r);
        } else {
          out = in;
          for (int s = 0; s + 1 < m; ++s) {
            const int send = ((r - s) % m + m) % m, recv = ((r - s - 1) % m + m) % m;
            tx->Send(Chunk(out.data() + share * static_cast<size_t>(send), share, ++step));
            RecvInto(prev.get(), out.data() + share * static_cast<size_t>(recv), share, true);
          }
        }
        // All-gather: after the reduce-scatter member r holds the sum of chunk (r + 1).
        const int own = gather_only ? r : (r + 1) % m;
        for (int s = 0; s + 1 < m; ++s) {
          const int send = ((own - s) % m + m) % m, recv = ((own - s - 1) % m + m) % m;
          tx->Send(Chunk(out.data() + share * static_cast<size_t>(send), share, ++step));
          RecvInto(prev.get(), out.data() + share * static_cast<size_t>(recv), share, false);
        }
        const double dt =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count();
        if (it >= 10) us.push_back(dt);
      }
      // Check: all-gather holds every member's value; all-reduce the sum 1 + 2 + ... + m.
      const float want_sum = static_cast<float>(m) * static_cast<float>(m + 1) / 2;
      for (int k = 0; k < m; ++k) {
        const float want = gather_only ? 1.0f + static_cast<float>(k) : want_sum;
        if (out[share * static_cast<size_t>(k)] != want) {
          std::fprintf(stderr, "%s: member %d chunk %d: %g, want %g\n", op, r, k,
                       out[share * static_cast<size_t>(k)], want);
          return 1;
        }
      }
      if (r == 0)
        std::printf("%-9s members %d  %5zu KiB  median %9.1f us  p10 %9.1f  p90 %9.1f\n", op, m,
                    bytes >> 10, Percentile(us, 0.5), Percentile(us, 0.1), Percentile(us, 0.9));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: link_ring_bench MEMBERS [ITERS] [aes|none]\n");
    return 2;
  }
  const int members = std::atoi(argv[1]);
  const int iters = argc > 2 ? std::atoi(argv[2]) : 200;
  const auto cipher = argc > 3 && std::string(argv[3]) == "none"
                          ? shoal::net::LinkCipher::kNone
                          : shoal::net::LinkCipher::kAes256Gcm;
  if (members < 1 || members > 64 || iters < 1) return 2;
  char dir[] = "/tmp/link_ring_bench_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  std::vector<pid_t> kids;
  for (int r = 1; r < members; ++r) {
    const pid_t p = fork();
    if (p == 0) _exit(RunMember(r, members, dir, iters, cipher));
    kids.push_back(p);
  }
  const int rc = RunMember(0, members, dir, iters, cipher);
  int bad = 0;
  for (pid_t p : kids) {
    int st = 0;
    waitpid(p, &st, 0);
    bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  const std::string rm = std::string("rm -rf ") + dir;
  if (std::system(rm.c_str()) != 0) return 1;
  return rc != 0 || bad != 0 ? 1 : 0;
}
