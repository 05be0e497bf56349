// Conn/Listener tests over real loopback sockets (ephemeral ports, every wait bounded).
#include "net/conn.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace shoal::net {
namespace {

using ::testing::HasSubstr;

// Generous bound for anything that should be immediate on loopback (loaded 2-core CI machine).
constexpr int64_t kWaitMs = 5'000;

struct Pair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Conn> dialer;
  std::unique_ptr<Conn> acceptor;
};

// A connected pair on host (the kernel completes the connect before accept is called).
Result<Pair> MakePair(const std::string& host, const ConnOptions& opts = {}) {
  Pair p;
  SHOAL_ASSIGN_OR_RETURN(p.listener, Listener::Listen(host, 0, opts));
  SHOAL_ASSIGN_OR_RETURN(p.dialer, Conn::Connect(host, p.listener->port(), kWaitMs, opts));
  SHOAL_ASSIGN_OR_RETURN(p.acceptor, p.listener->Accept(kWaitMs));
  if (!p.acceptor) return Errorf("accept timed out");
  return p;
}

Frame DataFrame(uint64_t request, uint64_t step, size_t size) {
  Frame f;
  f.type = MsgType::kActivations;
  f.tag = {request, 1, step};
  f.payload.resize(size);
  for (size_t i = 0; i < size; ++i) f.payload[i] = static_cast<uint8_t>(i + step * 7 + request);
  return f;
}

Frame RecvOrFail(Conn& c) {
  Result<std::optional<Frame>> r = c.Recv(kWaitMs);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok() || !*r) {
    ADD_FAILURE() << "no frame";
    return Frame{};
  }
  return std::move(**r);
}

TEST(ConnTest, LoopbackIPv4BothDirections) {
  Result<Pair> p = MakePair("127.0.0.1");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_THAT(p->dialer->peer(), HasSubstr("127.0.0.1:"));
  ASSERT_TRUE(p->dialer->Send(DataFrame(1, 2, 100)).ok());
  Frame f = RecvOrFail(*p->acceptor);
  EXPECT_EQ(f.tag, (DataTag{1, 1, 2}));
  EXPECT_EQ(f.payload, DataFrame(1, 2, 100).payload);
  ASSERT_TRUE(p->acceptor->Send(Frame{}).ok());
  EXPECT_EQ(RecvOrFail(*p->dialer).type, MsgType::kHeartbeat);
}

TEST(ConnTest, LoopbackIPv6) {
  Result<std::unique_ptr<Listener>> probe = Listener::Listen("::1", 0);
  if (!probe.ok()) GTEST_SKIP() << "no IPv6 loopback: " << probe.status().message();
  probe->reset();
  Result<Pair> p = MakePair("::1");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_THAT(p->acceptor->peer(), HasSubstr("[::1]:"));
  ASSERT_TRUE(p->dialer->Send(DataFrame(3, 4, 10)).ok());
  EXPECT_EQ(RecvOrFail(*p->acceptor).tag.step, 4u);
}

TEST(ConnTest, ConnectRefusedIsAnError) {
  uint16_t port = 0;
  {
    Result<std::unique_ptr<Listener>> l = Listener::Listen("127.0.0.1", 0);
    ASSERT_TRUE(l.ok());
    port = (*l)->port();
  }
  Result<std::unique_ptr<Conn>> c = Conn::Connect("127.0.0.1", port, kWaitMs);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("cannot connect to 127.0.0.1:"));
  EXPECT_FALSE(Conn::Connect("no such host.invalid", 1, 100).ok());
}

TEST(ConnTest, RecvAndAcceptTimeOut) {
  Result<Pair> p = MakePair("127.0.0.1");
  ASSERT_TRUE(p.ok());
  const auto start = std::chrono::steady_clock::now();
  Result<std::optional<Frame>> r = p->dialer->Recv(50);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_GE(ms, 45);
  EXPECT_EQ(p->dialer->state(), LinkState::kOpen);
  Result<std::unique_ptr<Conn>> none = p->listener->Accept(20);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

TEST(ConnTest, PeerCloseDistinguishedFromFailure) {
  Result<Pair> p = MakePair("127.0.0.1");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->acceptor->Send(Frame{}).ok());
  p->acceptor.reset();
  EXPECT_EQ(RecvOrFail(*p->dialer).type, MsgType::kHeartbeat);  // delivered before the close
  Result<std::optional<Frame>> r = p->dialer->Recv(kWaitMs);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("closed by peer"));
  EXPECT_EQ(p->dialer->state(), LinkState::kClosedByPeer);
}

TEST(ConnTest, TruncatedFrameAtCloseIsAFailure) {
  Result<Pair> p = MakePair("127.0.0.1");
  ASSERT_TRUE(p.ok());
  const std::vector<uint8_t> bytes = *EncodeFrame(DataFrame(1, 1, 64));
  ASSERT_TRUE(p->acceptor->SendBytes({bytes.data(), 40}).ok());
  p->acceptor.reset();
  Result<std::optional<Frame>> r = p->dialer->Recv(kWaitMs);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("truncated activations frame"));
  EXPECT_EQ(p->dialer->state(), LinkState::kFailed);
}

TEST(ConnTest, GarbageFailsTheLink) {
  Result<Pair> p = MakePair("127.0.0.1");
  ASSERT_TRUE(p.ok());
  const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(
      p->acceptor->SendBytes({reinterpret_cast<const uint8_t*>(http.data()), http.size()}).ok());
  Result<std::optional<Frame>> r = p->dialer->Recv(kWaitMs);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("bad magic"));
  EXPECT_EQ(p->dialer->state(), LinkState::kFailed);
  EXPECT_FALSE(p->dialer->Send(Frame{}).ok());  // a failed link stays failed
  EXPECT_FALSE(p->dialer->Recv(0).ok());
}

TEST(ConnTest, OversizedFrameRejectedByReceiverLimit) {
  ConnOptions small;
  small.limits.max_payload = 1000;
  Result<Pair> p = MakePair("127.0.0.1", small);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->acceptor->Send(DataFrame(1, 1, 1001)).ok());  // sender checks its limit too
  const std::vector<uint8_t> bytes = *EncodeFrame(DataFrame(1, 1, 1001));
  ASSERT_TRUE(p->acceptor->SendBytes(bytes).ok());
  Result<std::optional<Frame>> r = p->dialer->Recv(kWaitMs);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("exceeds the limit of 1000"));
}

TEST(ConnTest, ShutdownWakesABlockedRecv) {
  Result<Pair> p = MakePair("127.0.0.1");
  ASSERT_TRUE(p.ok());
  Conn* dialer = p->dialer.get();
  auto pending = std::async(std::launch::async, [dialer] { return dialer->Recv(-1).status(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  dialer->Shutdown();
  ASSERT_EQ(pending.wait_for(std::chrono::milliseconds(kWaitMs)), std::future_status::ready);
  EXPECT_FALSE(pending.get().ok());
  EXPECT_EQ(dialer->state(), LinkState::kShutdown);
}

TEST(ConnTest, TenThousandFramesArriveInOrder) {
  Result<Pair> p = MakePair("127.0.0.1");
  ASSERT_TRUE(p.ok());
  constexpr uint64_t kFrames = 10'000;
  Conn* sender = p->dialer.get();
  auto sent = std::async(std::launch::async, [sender] {
    for (uint64_t i = 0; i < kFrames; ++i) {
      SHOAL_RETURN_IF_ERROR(sender->Send(DataFrame(5, i, i % 1500)));
    }
    return Status::Ok();
  });
  for (uint64_t i = 0; i < kFrames; ++i) {
    Frame f = RecvOrFail(*p->acceptor);
    ASSERT_EQ(f.tag.step, i);
    ASSERT_EQ(f.payload, DataFrame(5, i, i % 1500).payload) << i;
  }
  ASSERT_EQ(sent.wait_for(std::chrono::milliseconds(kWaitMs)), std::future_status::ready);
  EXPECT_TRUE(sent.get().ok());
}

TEST(ConnTest, ConcurrentSendersNeverInterleaveFrames) {
  Result<Pair> p = MakePair("127.0.0.1");
  ASSERT_TRUE(p.ok());
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 300;
  Conn* sender = p->dialer.get();
  std::vector<std::future<Status>> senders;
  for (int t = 0; t < kThreads; ++t) {
    senders.push_back(std::async(std::launch::async, [sender, t] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        // Sizes past the socket buffer force partial writes while other threads wait.
        SHOAL_RETURN_IF_ERROR(sender->Send(DataFrame(t, i, (i % 5) * 40'000)));
      }
      return Status::Ok();
    }));
  }
  std::vector<uint64_t> next(kThreads, 0);
  for (uint64_t n = 0; n < kThreads * kPerThread; ++n) {
    Frame f = RecvOrFail(*p->acceptor);
    ASSERT_LT(f.tag.micro_batch, static_cast<uint64_t>(kThreads));
    const uint64_t t = f.tag.micro_batch;
    ASSERT_EQ(f.tag.step, next[t]++);
    ASSERT_EQ(f.payload, DataFrame(t, f.tag.step, (f.tag.step % 5) * 40'000).payload);
  }
  for (auto& s : senders) EXPECT_TRUE(s.get().ok());
}

TEST(ConnTest, SixteenMebibyteFrame) {
  Result<Pair> p = MakePair("127.0.0.1");
  ASSERT_TRUE(p.ok());
  const Frame big = DataFrame(9, 9, 16u << 20);
  Conn* sender = p->dialer.get();
  auto sent = std::async(std::launch::async, [sender, &big] { return sender->Send(big); });
  Frame f = RecvOrFail(*p->acceptor);
  EXPECT_TRUE(f.payload == big.payload);
  EXPECT_TRUE(sent.get().ok());
}

}  // namespace
}  // namespace shoal::net

namespace shoal::net {
namespace {

TEST(ParseHostPortTest, HostsPortsAndRejections) {
  EXPECT_EQ(*ParseHostPort("127.0.0.1:7000"),
            std::make_pair(std::string("127.0.0.1"), uint16_t{7000}));
  EXPECT_EQ(*ParseHostPort("[::1]:0"), std::make_pair(std::string("::1"), uint16_t{0}));
  for (const char* bad : {"", "7000", ":7000", "host:", "host:65536", "host:7x", "host:-1"})
    EXPECT_FALSE(ParseHostPort(bad).ok()) << bad;
}

}  // namespace
}  // namespace shoal::net
