// The same microbenchmark as gloo_bench.cc over Shoal's collectives layer: collective::Group's
// AllGather and AllReduceOrdered between MEMBERS processes on loopback, each pair of members
// joined by an authenticated net::Conn sealed with AES-256-GCM (or unsealed with `none`).
//
//   group_bench MEMBERS [ITERS] [aes|none]
//
// Same cases, counts and output lines as gloo_bench.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_members.h"
#include "collective/group.h"
#include "net/auth.h"
#include "net/conn.h"

namespace {

// Member r listens (its port in DIR/r) and dials every member above it: a full mesh.
std::vector<std::shared_ptr<shoal::net::Conn>> Mesh(int r, int m, const std::string& dir,
                                                    shoal::net::LinkCipher cipher) {
  std::vector<std::shared_ptr<shoal::net::Conn>> links(static_cast<size_t>(m));
  auto key = shoal::net::ClusterKey::FromBytes(std::vector<uint8_t>(32, 7));
  auto lis = shoal::net::Listener::Listen("127.0.0.1", 0);
  if (!key.ok() || !lis.ok()) std::abort();
  const std::string me = dir + "/" + std::to_string(r);
  std::ofstream(me + ".tmp") << (*lis)->port();
  std::rename((me + ".tmp").c_str(), me.c_str());
  shoal::net::AuthOptions auth;
  auth.cipher = cipher;
  std::thread acceptor([&] {  // members below r dial r; each says who it is first
    for (int left = r; left > 0;) {
      auto c = (*lis)->Accept(1000);
      if (!c.ok() || !*c || !shoal::net::AuthenticateAcceptor(**c, *key, auth).ok()) continue;
      auto hello = (*c)->Recv(10'000);
      if (!hello.ok() || !*hello) std::abort();
      links[(**hello).tag.micro_batch] = std::move(*c);
      --left;
    }
  });
  for (int k = r + 1; k < m; ++k) {
    int port = 0;
    for (int i = 0; i < 1000 && !(std::ifstream(dir + "/" + std::to_string(k)) >> port); ++i)
      usleep(10'000);
    auto c = shoal::net::Conn::Connect("127.0.0.1", static_cast<uint16_t>(port), 10'000);
    if (!c.ok() || !shoal::net::AuthenticateDialer(**c, *key, auth).ok()) std::abort();
    shoal::net::Frame hello;
    hello.type = shoal::net::MsgType::kActivations;
    hello.tag.micro_batch = static_cast<uint64_t>(r);
    if (!(*c)->Send(hello).ok()) std::abort();
    links[static_cast<size_t>(k)] = std::move(*c);
  }
  acceptor.join();
  return links;
}

int RunMember(int r, int m, const std::string& dir, int iters, shoal::net::LinkCipher cipher) {
  shoal::collective::Group g(r, Mesh(r, m, dir, cipher), 30'000);
  for (size_t bytes : bench::Sizes()) {
    const int64_t n = static_cast<int64_t>(bytes / sizeof(float));
    std::vector<int64_t> counts;
    for (int k = 0; k < m; ++k) counts.push_back(shoal::collective::SliceOf(n, m, k).count);
    const shoal::collective::Slice own = shoal::collective::SliceOf(n, m, r);
    std::vector<float> in(static_cast<size_t>(n), 1.0f + static_cast<float>(r)), out;
    const int timed = bytes >= (size_t{1} << 20) ? std::min(iters, 20) : iters;
    for (const char* op : {"allgather", "allreduce"}) {
      const bool gather = op[3] == 'g';
      std::vector<double> us;
      for (int it = 0; it < 10 + timed; ++it) {
        std::vector<float> x = in;  // all-reduce works in place
        const auto t0 = std::chrono::steady_clock::now();
        const shoal::Status s =
            gather
                ? g.AllGather({in.data() + own.first, static_cast<size_t>(own.count)}, counts, &out)
                : g.AllReduceOrdered(x);
        if (!s.ok()) {
          std::fprintf(stderr, "member %d: %s\n", r, s.message().c_str());
          return 1;
        }
        const double dt =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count();
        if (it >= 10) us.push_back(dt);
        if (!gather) out.swap(x);
      }
      // Check: all-gather holds every member's value; all-reduce the sum 1 + 2 + ... + m.
      const float want_sum = static_cast<float>(m) * static_cast<float>(m + 1) / 2;
      for (int k = 0; k < m; ++k) {
        const float want = gather ? 1.0f + static_cast<float>(k) : want_sum;
        const float got = out[static_cast<size_t>(shoal::collective::SliceOf(n, m, k).first)];
        if (got != want) {
          std::fprintf(stderr, "%s: member %d slice %d: %g, want %g\n", op, r, k, got, want);
          return 1;
        }
      }
      if (r == 0) bench::Print(op, m, bytes, us);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: group_bench MEMBERS [ITERS] [aes|none]\n");
    return 2;
  }
  const int members = std::atoi(argv[1]);
  const int iters = argc > 2 ? std::atoi(argv[2]) : 200;
  const auto cipher = argc > 3 && std::string(argv[3]) == "none"
                          ? shoal::net::LinkCipher::kNone
                          : shoal::net::LinkCipher::kAes256Gcm;
  if (members < 1 || members > 64 || iters < 1) return 2;
  return bench::ForkMembers(members, [&](int r, const std::string& dir) {
    return RunMember(r, members, dir, iters, cipher);
  });
}
