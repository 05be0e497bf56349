// The link cipher's cost at the net layer: activation-sized frames over an authenticated
// loopback pair, one thread sending and one receiving, with aes-256-gcm against none.
//   ninja link_cipher_bench && bin/link_cipher_bench --benchmark_repetitions=5
// Prints bytes/s and time per frame for each frame size and cipher (arg 1: 0 none, 1 aes).
#include <benchmark/benchmark.h>

#include <future>
#include <thread>

#include "net/auth.h"

namespace shoal::net {
namespace {

const ClusterKey& BenchKey() {
  static const ClusterKey k = [] {
    const std::string s = "link-cipher-bench-key-0123456789";
    return *ClusterKey::FromBytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  }();
  return k;
}

void BM_LinkFrames(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  AuthOptions auth;
  auth.cipher = state.range(1) != 0 ? LinkCipher::kAes256Gcm : LinkCipher::kNone;
  auto listener = Listener::Listen("127.0.0.1", 0);
  if (!listener.ok()) return state.SkipWithError(listener.status().message().c_str());
  Listener* l = listener->get();
  auto accepted = std::async(
      std::launch::async, [l, auth] { return AcceptAuthenticated(*l, BenchKey(), 5'000, auth); });
  auto dialer = ConnectAuthenticated("127.0.0.1", l->port(), BenchKey(), 5'000, {}, auth);
  auto acceptor = accepted.get();
  if (!dialer.ok() || !acceptor.ok()) return state.SkipWithError("handshake failed");
  Frame f;
  f.type = MsgType::kActivations;
  f.payload.assign(size, 0x5a);
  // The receiver drains in its own thread, as a stage's link thread does.
  std::atomic<int64_t> received{0};
  std::thread reader([&] {
    for (;;) {
      auto r = (*acceptor)->Recv(5'000);
      if (!r.ok() || !*r) return;
      ++received;
    }
  });
  int64_t sent = 0;
  for (auto _ : state) {
    f.tag.step = static_cast<uint64_t>(sent++);
    if (!(*dialer)->Send(f).ok()) {
      state.SkipWithError("send failed");
      break;
    }
  }
  // Count the time until the last frame is in (the receiver's work is part of the cost).
  while (received.load() < sent) std::this_thread::yield();
  (*dialer)->Shutdown();
  reader.join();
  state.SetBytesProcessed(sent * static_cast<int64_t>(size));
  state.SetLabel(LinkCipherName(auth.cipher));
}

BENCHMARK(BM_LinkFrames)
    ->ArgsProduct({{16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shoal::net

BENCHMARK_MAIN();
