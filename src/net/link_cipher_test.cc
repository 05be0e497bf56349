// Sealed links: AEAD round trips, and relays on loopback that change, replay, reorder or drop
// frames after the handshake, or forward it from another port (every wait bounded).
#include "net/link_cipher.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <thread>

#include "net/auth.h"
#include "net/bytes.h"

namespace shoal::net {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kWaitMs = 5'000;  // bound for steps that are immediate on loopback
// Handshake frames each way: HELLO and PROOF up, CHALLENGE and AUTH_OK down.
constexpr size_t kHandshakeFrames = 2;

const ClusterKey& TestKey() {
  static const ClusterKey k = [] {
    const std::string s = "0123456789abcdef0123456789abcdef";
    return *ClusterKey::FromBytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  }();
  return k;
}

Frame DataFrame(uint64_t step, size_t size) {
  Frame f;
  f.type = MsgType::kActivations;
  f.flags = 5;
  f.tag = {7, 1, step};
  f.payload.resize(size);
  for (size_t i = 0; i < size; ++i) f.payload[i] = static_cast<uint8_t>('A' + (i + step) % 26);
  return f;
}

Frame Heartbeat() {
  Frame f;
  f.type = MsgType::kHeartbeat;
  return f;
}

// Frames of one direction, as raw wire bytes, in order; the mutator decides what goes on.
using Mutator =
    std::function<std::vector<std::vector<uint8_t>>(size_t index, std::vector<uint8_t> frame)>;

std::vector<std::vector<uint8_t>> Keep(size_t, std::vector<uint8_t> f) { return {std::move(f)}; }

bool ReadExact(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteAll(int fd, const std::vector<uint8_t>& b) {
  return send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
}

// A man in the middle: listens on bind_host:bind_port, forwards each connection to
// 127.0.0.1:to_port frame by frame, passing the dialer's frames through `up` and the
// acceptor's through `down`. Records what it forwarded (for the confidentiality check).
class Relay {
 public:
  Relay(const std::string& bind_host, uint16_t bind_port, uint16_t to_port, Mutator up,
        Mutator down = Keep)
      : to_port_(to_port), up_(std::move(up)), down_(std::move(down)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(bind_port);
    inet_pton(AF_INET, bind_host.c_str(), &a.sin_addr);
    socklen_t len = sizeof(a);
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(listen_fd_, 8) != 0 ||
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      error_ = "cannot bind the relay to " + bind_host + ":" + std::to_string(bind_port);
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~Relay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    for (std::thread& t : pumps_) t.join();
    for (int fd : fds_) close(fd);
    close(listen_fd_);
  }
  const std::string& error() const { return error_; }
  uint16_t port() const { return port_; }
  // Every byte forwarded from the dialer after the handshake.
  std::vector<uint8_t> Seen() {
    std::lock_guard<std::mutex> lk(mu_);
    return seen_;
  }

 private:
  void Run() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int in = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (in < 0) continue;
      const int out = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(to_port_);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(out, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        close(in);
        close(out);
        continue;
      }
      fds_.push_back(in);
      fds_.push_back(out);
      pumps_.emplace_back([this, in, out] { Pump(in, out, up_, true); });
      pumps_.emplace_back([this, in, out] { Pump(out, in, down_, false); });
    }
  }
  void Pump(int from, int to, const Mutator& m, bool record) {
    for (size_t index = 0;; ++index) {
      std::vector<uint8_t> f(kBaseHeaderSize);
      if (!ReadExact(from, f.data(), kBaseHeaderSize)) break;
      const bool data = IsDataType(static_cast<MsgType>(f[5]));
      const size_t rest = (data ? kDataHeaderSize : 0) + LoadLE32(f.data() + 8);
      f.resize(kBaseHeaderSize + rest);
      if (!ReadExact(from, f.data() + kBaseHeaderSize, rest)) break;
      if (record && index >= kHandshakeFrames) {
        std::lock_guard<std::mutex> lk(mu_);
        seen_.insert(seen_.end(), f.begin(), f.end());
      }
      for (const auto& piece : m(index, std::move(f)))
        if (!WriteAll(to, piece)) return;
    }
    shutdown(to, SHUT_WR);
  }

  uint16_t to_port_;
  Mutator up_, down_;
  std::string error_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<int> fds_;
  std::vector<std::thread> pumps_;
  std::mutex mu_;
  std::vector<uint8_t> seen_;
};

struct Linked {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Conn> dialer, acceptor;
  Status dial_error, accept_error;
};

// A node listening on 127.0.0.1 and a dialer reaching it at dial_host:dial_port (a relay) or
// directly (dial_port 0).
Linked Link(const AuthOptions& dial_opts = {}, const AuthOptions& accept_opts = {},
            std::unique_ptr<Listener> listener = nullptr, const std::string& dial_host = "",
            uint16_t dial_port = 0) {
  Linked l;
  l.listener = listener ? std::move(listener) : std::move(*Listener::Listen("127.0.0.1", 0));
  Listener* raw = l.listener.get();
  auto accepted = std::async(std::launch::async, [raw, accept_opts] {
    return AcceptAuthenticated(*raw, TestKey(), kWaitMs, accept_opts);
  });
  auto d =
      ConnectAuthenticated(dial_host.empty() ? "127.0.0.1" : dial_host,
                           dial_port ? dial_port : raw->port(), TestKey(), kWaitMs, {}, dial_opts);
  auto a = accepted.get();
  if (d.ok())
    l.dialer = std::move(*d);
  else
    l.dial_error = d.status();
  if (a.ok())
    l.acceptor = std::move(*a);
  else
    l.accept_error = a.status();
  return l;
}

// A relay on 127.0.0.2 at the node's own port (so the target's port matches), and the link
// through it. Skips when 127.0.0.2 cannot be bound.
struct Relayed {
  std::unique_ptr<Relay> relay;
  Linked link;
};
Relayed ThroughRelay(Mutator up, Mutator down = Keep) {
  Relayed r;
  auto l = Listener::Listen("127.0.0.1", 0);
  EXPECT_TRUE(l.ok());
  const uint16_t port = (*l)->port();
  r.relay = std::make_unique<Relay>("127.0.0.2", port, port, std::move(up), std::move(down));
  if (!r.relay->error().empty()) return r;
  r.link = Link({}, {}, std::move(*l), "127.0.0.2", port);
  return r;
}

TEST(FrameAeadTest, SealOpenRoundTripAndRekey) {
  DirectionKey k;
  k.key.fill(1);
  k.iv.fill(2);
  auto seal = FrameAead::Create(FrameAead::Mode::kSeal, k);
  auto open = FrameAead::Create(FrameAead::Mode::kOpen, k);
  auto open_no_rekey = FrameAead::Create(FrameAead::Mode::kOpen, k);
  ASSERT_TRUE(seal.ok() && open.ok() && open_no_rekey.ok());
  (*seal)->set_rekey_bytes(1000);  // a new key every few frames
  (*open)->set_rekey_bytes(1000);
  const uint8_t aad[3] = {1, 2, 3};
  bool diverged = false;
  for (size_t i = 0; i < 50; ++i) {
    std::vector<uint8_t> plain(i * 37 % 300, static_cast<uint8_t>(i)), buf = plain;
    uint8_t tag[kAeadTagBytes];
    ASSERT_TRUE((*seal)->Begin(aad).ok());
    ASSERT_TRUE((*seal)->Update(buf.data(), buf.data(), buf.size()).ok());
    ASSERT_TRUE((*seal)->SealFinish(tag).ok());
    if (!buf.empty()) EXPECT_NE(buf, plain);
    std::vector<uint8_t> copy = buf;
    ASSERT_TRUE((*open)->Begin(aad).ok());
    ASSERT_TRUE((*open)->Update(buf.data(), buf.data(), buf.size()).ok());
    ASSERT_TRUE((*open)->OpenFinish(tag).ok()) << "frame " << i;
    EXPECT_EQ(buf, plain);
    // An opener that never rekeys fails once the sender has: the key really changed.
    ASSERT_TRUE((*open_no_rekey)->Begin(aad).ok());
    ASSERT_TRUE((*open_no_rekey)->Update(copy.data(), copy.data(), copy.size()).ok());
    if (!(*open_no_rekey)->OpenFinish(tag).ok()) diverged = true;
  }
  EXPECT_TRUE(diverged);
  EXPECT_EQ((*seal)->frames(), 50u);
}

TEST(FrameAeadTest, CipherNamesParse) {
  EXPECT_EQ(*ParseLinkCipher("aes-256-gcm"), LinkCipher::kAes256Gcm);
  EXPECT_EQ(*ParseLinkCipher("none"), LinkCipher::kNone);
  Result<LinkCipher> bad = ParseLinkCipher("rot13");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("aes-256-gcm"));
}

TEST(SealedLinkTest, ManyFramesBothWaysIncludingEmptyAndLarge) {
  Linked l = Link();
  ASSERT_TRUE(l.dialer && l.acceptor) << l.dial_error.message() << l.accept_error.message();
  EXPECT_TRUE(l.dialer->sealed());
  EXPECT_TRUE(l.acceptor->sealed());
  std::thread sender([&] {
    for (uint64_t i = 0; i < 300; ++i) {
      ASSERT_TRUE(l.dialer->Send(i % 3 == 0 ? Heartbeat() : DataFrame(i, i * 997 % 70'000)).ok());
      ASSERT_TRUE(l.acceptor->Send(DataFrame(i, i % 5)).ok());
    }
    // Several activation-sized frames, over many seal chunks.
    ASSERT_TRUE(l.dialer->Send(DataFrame(1000, 3 << 20)).ok());
  });
  for (uint64_t i = 0; i < 300; ++i) {
    auto a = l.acceptor->Recv(kWaitMs);
    ASSERT_TRUE(a.ok() && *a) << (a.ok() ? "timeout" : a.status().message());
    const Frame want = i % 3 == 0 ? Heartbeat() : DataFrame(i, i * 997 % 70'000);
    EXPECT_EQ((*a)->type, want.type);
    EXPECT_EQ((*a)->tag, want.tag);
    EXPECT_EQ((*a)->flags, want.flags);
    EXPECT_EQ((*a)->payload, want.payload);
    auto d = l.dialer->Recv(kWaitMs);
    ASSERT_TRUE(d.ok() && *d) << (d.ok() ? "timeout" : d.status().message());
    EXPECT_EQ((*d)->payload, DataFrame(i, i % 5).payload);
  }
  auto big = l.acceptor->Recv(kWaitMs);
  ASSERT_TRUE(big.ok() && *big);
  EXPECT_EQ((*big)->payload, DataFrame(1000, 3 << 20).payload);
  sender.join();
}

TEST(SealedLinkTest, FrameOfExactlyTheLimitPassesAndPreEncodedBytesAreSealed) {
  ConnOptions small;
  small.limits.max_payload = 1000;
  auto listener = Listener::Listen("127.0.0.1", 0, small);
  ASSERT_TRUE(listener.ok());
  Linked l = Link({}, {}, std::move(*listener));
  ASSERT_TRUE(l.dialer && l.acceptor);
  // Two frames encoded once, sent as bytes: each is sealed on its own.
  std::vector<uint8_t> bytes = *EncodeFrame(DataFrame(1, 1000));
  ASSERT_TRUE(AppendFrame(Heartbeat(), &bytes).ok());
  ASSERT_TRUE(l.dialer->SendBytes(bytes).ok());
  auto a = l.acceptor->Recv(kWaitMs);
  ASSERT_TRUE(a.ok() && *a) << (a.ok() ? "timeout" : a.status().message());
  EXPECT_EQ((*a)->payload, DataFrame(1, 1000).payload);
  a = l.acceptor->Recv(kWaitMs);
  ASSERT_TRUE(a.ok() && *a);
  EXPECT_EQ((*a)->type, MsgType::kHeartbeat);
  // Bytes that are not whole frames are refused before anything is sent; the link goes on.
  EXPECT_FALSE(l.dialer->SendBytes(std::span(bytes).first(20)).ok());
  ASSERT_TRUE(l.dialer->Send(DataFrame(2, 3)).ok());
  a = l.acceptor->Recv(kWaitMs);
  ASSERT_TRUE(a.ok() && *a) << (a.ok() ? "timeout" : a.status().message());
  EXPECT_EQ((*a)->tag.step, 2u);
}

// Sends three data frames dialer -> acceptor through a relay applying `up`; the acceptor's
// first error (or "" when all three arrived intact).
std::string SendThreeThrough(Mutator up, int* received = nullptr) {
  Relayed r = ThroughRelay(std::move(up));
  if (!r.relay->error().empty()) return "skip: " + r.relay->error();
  if (!r.link.dialer || !r.link.acceptor)
    return "link failed: " + r.link.dial_error.message() + r.link.accept_error.message();
  for (uint64_t i = 1; i <= 3; ++i) EXPECT_TRUE(r.link.dialer->Send(DataFrame(i, 100)).ok());
  int got = 0;
  for (int i = 0; i < 3; ++i) {
    auto f = r.link.acceptor->Recv(kWaitMs);
    if (!f.ok()) {
      EXPECT_EQ(r.link.acceptor->state(), LinkState::kFailed);
      if (received) *received = got;
      return f.status().message();
    }
    if (!*f) return "timeout";
    EXPECT_EQ((*f)->payload, DataFrame((*f)->tag.step, 100).payload);
    ++got;
  }
  if (received) *received = got;
  return "";
}

#define SKIP_IF_NO_RELAY(msg) \
  if ((msg).rfind("skip: ", 0) == 0) GTEST_SKIP() << (msg)

TEST(SealedLinkTest, RelayForwardingUnchangedWorksAndSeesNoPlaintext) {
  Relayed r = ThroughRelay(Keep);
  if (!r.relay->error().empty()) GTEST_SKIP() << r.relay->error();
  ASSERT_TRUE(r.link.dialer && r.link.acceptor)
      << r.link.dial_error.message() << r.link.accept_error.message();
  for (uint64_t i = 0; i < 20; ++i) {
    ASSERT_TRUE(r.link.dialer->Send(DataFrame(i, 4096)).ok());
    ASSERT_TRUE(r.link.acceptor->Send(DataFrame(i, 10)).ok());
    auto a = r.link.acceptor->Recv(kWaitMs);
    ASSERT_TRUE(a.ok() && *a) << (a.ok() ? "timeout" : a.status().message());
    EXPECT_EQ((*a)->payload, DataFrame(i, 4096).payload);
    auto d = r.link.dialer->Recv(kWaitMs);
    ASSERT_TRUE(d.ok() && *d) << (d.ok() ? "timeout" : d.status().message());
  }
  // The payload is a run of letters; the relay never saw 16 of them in a row.
  const std::vector<uint8_t> seen = r.relay->Seen();
  const std::vector<uint8_t> payload = DataFrame(0, 4096).payload;
  const std::vector<uint8_t> run(payload.begin() + 100, payload.begin() + 116);
  EXPECT_GT(seen.size(), 20u * 4096);
  EXPECT_EQ(std::search(seen.begin(), seen.end(), run.begin(), run.end()), seen.end());
}

TEST(SealedLinkTest, FlippedPayloadBitFailsTheLink) {
  const std::string err = SendThreeThrough([](size_t i, std::vector<uint8_t> f) {
    if (i == kHandshakeFrames + 1) f[kMaxHeaderSize + 50] ^= 0x01;
    return std::vector<std::vector<uint8_t>>{f};
  });
  SKIP_IF_NO_RELAY(err);
  EXPECT_THAT(err, HasSubstr("integrity check failed on frame 1"));
}

TEST(SealedLinkTest, FlippedHeaderFieldFailsTheLink) {
  for (size_t offset : {size_t{6}, size_t{12}, size_t{24}}) {  // flags, micro-batch, step
    const std::string err = SendThreeThrough([offset](size_t i, std::vector<uint8_t> f) {
      if (i == kHandshakeFrames) f[offset] ^= 0x04;
      return std::vector<std::vector<uint8_t>>{f};
    });
    SKIP_IF_NO_RELAY(err);
    EXPECT_THAT(err, HasSubstr("integrity check failed on frame 0")) << "offset " << offset;
  }
}

TEST(SealedLinkTest, FlippedTagBitFailsTheLink) {
  const std::string err = SendThreeThrough([](size_t i, std::vector<uint8_t> f) {
    if (i == kHandshakeFrames + 2) f.back() ^= 0x80;
    return std::vector<std::vector<uint8_t>>{f};
  });
  SKIP_IF_NO_RELAY(err);
  EXPECT_THAT(err, HasSubstr("integrity check failed on frame 2"));
}

TEST(SealedLinkTest, ReplayedFrameFailsTheLink) {
  int received = 0;
  const std::string err = SendThreeThrough(
      [](size_t i, std::vector<uint8_t> f) {
        if (i == kHandshakeFrames) return std::vector<std::vector<uint8_t>>{f, f};
        return std::vector<std::vector<uint8_t>>{f};
      },
      &received);
  SKIP_IF_NO_RELAY(err);
  EXPECT_THAT(err, HasSubstr("integrity check failed on frame 1"));
  EXPECT_EQ(received, 1);  // the original went through, its copy did not
}

TEST(SealedLinkTest, ReorderedPairFailsTheLink) {
  auto held = std::make_shared<std::vector<uint8_t>>();
  const std::string err = SendThreeThrough([held](size_t i, std::vector<uint8_t> f) {
    if (i == kHandshakeFrames) {
      *held = std::move(f);
      return std::vector<std::vector<uint8_t>>{};
    }
    if (i == kHandshakeFrames + 1) return std::vector<std::vector<uint8_t>>{f, *held};
    return std::vector<std::vector<uint8_t>>{f};
  });
  SKIP_IF_NO_RELAY(err);
  EXPECT_THAT(err, HasSubstr("integrity check failed on frame 0"));
}

TEST(SealedLinkTest, DroppedFrameFailsTheLink) {
  const std::string err = SendThreeThrough([](size_t i, std::vector<uint8_t> f) {
    if (i == kHandshakeFrames + 1) return std::vector<std::vector<uint8_t>>{};
    return std::vector<std::vector<uint8_t>>{f};
  });
  SKIP_IF_NO_RELAY(err);
  EXPECT_THAT(err, HasSubstr("integrity check failed on frame 1"));
}

TEST(SealedLinkTest, CipherMismatchFailsNamingBoth) {
  AuthOptions clear;
  clear.cipher = LinkCipher::kNone;
  Linked l = Link({}, clear);
  ASSERT_FALSE(l.dialer);
  ASSERT_FALSE(l.acceptor);
  for (const Status* s : {&l.dial_error, &l.accept_error}) {
    EXPECT_THAT(s->message(), HasSubstr("link cipher mismatch"));
    EXPECT_THAT(s->message(), HasSubstr("the dialer uses aes-256-gcm, the acceptor none"));
  }
}

TEST(SealedLinkTest, CipherNoneCarriesFramesInClear) {
  AuthOptions clear;
  clear.cipher = LinkCipher::kNone;
  Linked l = Link(clear, clear);
  ASSERT_TRUE(l.dialer && l.acceptor) << l.dial_error.message() << l.accept_error.message();
  EXPECT_FALSE(l.dialer->sealed());
  ASSERT_TRUE(l.dialer->Send(DataFrame(1, 10)).ok());
  auto a = l.acceptor->Recv(kWaitMs);
  ASSERT_TRUE(a.ok() && *a);
  EXPECT_EQ((*a)->payload, DataFrame(1, 10).payload);
}

TEST(RelayTest, RelayOnAnotherPortIsRefused) {
  auto l = Listener::Listen("127.0.0.1", 0);
  ASSERT_TRUE(l.ok());
  const uint16_t node_port = (*l)->port();
  Relay relay("127.0.0.1", 0, node_port, Keep);
  ASSERT_EQ(relay.error(), "");
  Linked link = Link({}, {}, std::move(*l), "127.0.0.1", relay.port());
  ASSERT_FALSE(link.acceptor);
  ASSERT_FALSE(link.dialer);
  EXPECT_THAT(link.accept_error.message(), HasSubstr("wrong target"));
  EXPECT_THAT(link.accept_error.message(),
              HasSubstr("arrived on port " + std::to_string(node_port)));
  EXPECT_THAT(link.dial_error.message(), HasSubstr("peer refused: wrong target"));
}

TEST(RelayTest, RelayRewritingTheTargetFailsTheDialersCheck) {
  auto l = Listener::Listen("127.0.0.1", 0);
  ASSERT_TRUE(l.ok());
  const uint16_t node_port = (*l)->port();
  // HELLO rewritten to name the node's real port: the acceptor's check passes, but its proof
  // covers the rewritten target, which the dialer never dialed.
  Relay relay("127.0.0.1", 0, node_port, [node_port](size_t i, std::vector<uint8_t> f) {
    if (i == 0) {
      Result<Hello> h = DecodeHello(std::span(f).subspan(kBaseHeaderSize));
      if (h.ok()) {
        h->target = "127.0.0.1:" + std::to_string(node_port);
        Frame hello;
        hello.type = MsgType::kHello;
        hello.payload = EncodeHello(*h);
        f = *EncodeFrame(hello);
      }
    }
    return std::vector<std::vector<uint8_t>>{f};
  });
  ASSERT_EQ(relay.error(), "");
  Linked link = Link({}, {}, std::move(*l), "127.0.0.1", relay.port());
  ASSERT_FALSE(link.dialer);
  EXPECT_THAT(link.dial_error.message(), HasSubstr("acceptor did not prove the cluster key"));
  EXPECT_FALSE(link.acceptor);
}

}  // namespace
}  // namespace shoal::net
