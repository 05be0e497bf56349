// Latency per call of Gloo's all-gather and all-reduce (Debian's libgloo, TCP transport) for
// 1..8 member processes on loopback and messages of 4 KiB..4 MiB: the library baseline that a
// collectives layer for tensor and expert parallelism is measured against (issue #37).
//
//   gloo_bench MEMBERS [ITERS]    (forks MEMBERS processes; rank 0 prints one line per case)
//
// Message size = the bytes every member holds after the call (all-gather: its 1/MEMBERS share
// in, the whole out; all-reduce: the whole vector in and out). Each case runs 10 untimed calls,
// then ITERS timed ones (default 200; 20 for 1 MiB and more); rank 0 prints the mean, median
// and p90 microseconds per call.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_members.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace {

int RunMember(int rank, int members, const std::string& store_dir, int iters) {
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, members);
  ctx->connectFullMesh(store, dev);
  for (size_t bytes : bench::Sizes()) {
    const size_t n = bytes / sizeof(float);
    const size_t share = n / static_cast<size_t>(members);
    std::vector<float> in(n, 1.0f + static_cast<float>(rank)), out(n);
    const int timed = bytes >= (size_t{1} << 20) ? std::min(iters, 20) : iters;
    for (const char* op : {"allgather", "allreduce"}) {
      std::vector<double> us;
      for (int i = 0; i < 10 + timed; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        if (op[3] == 'g') {
          gloo::AllgatherOptions o(ctx);
          o.setInput(in.data(), share);
          o.setOutput(out.data(), share * static_cast<size_t>(members));
          gloo::allgather(o);
        } else {
          gloo::AllreduceOptions o(ctx);
          o.setInput(in.data(), n);
          o.setOutput(out.data(), n);
          o.setReduceFunction(
              static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          gloo::allreduce(o);
        }
        const double dt =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count();
        if (i >= 10) us.push_back(dt);
      }
      if (rank == 0) bench::Print(op, members, bytes, us);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gloo_bench MEMBERS [ITERS]\n");
    return 2;
  }
  const int members = std::atoi(argv[1]);
  const int iters = argc > 2 ? std::atoi(argv[2]) : 200;
  if (members < 1 || members > 64 || iters < 1) return 2;
  return bench::ForkMembers(
      members, [&](int r, const std::string& dir) { return RunMember(r, members, dir, iters); });
}
