// Cluster-key tests: key files, proofs, and the handshake over loopback with honest, wrong-key,
// garbage, out-of-order, forged and silent peers (every wait bounded).
#include "net/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "base/test_support.h"
#include "io/mapped_file.h"
#include "net/bytes.h"

namespace shoal::net {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kWaitMs = 5'000;  // bound for steps that are immediate on loopback
// Short handshake timeout for the silent-peer tests.
constexpr int64_t kShortAuthMs = 200;

ClusterKey Key(const std::string& s) {
  Result<ClusterKey> k =
      ClusterKey::FromBytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  EXPECT_TRUE(k.ok()) << k.status().message();
  return *k;
}

const ClusterKey& GoodKey() {
  static const ClusterKey k = Key("0123456789abcdef0123456789abcdef");
  return k;
}

TEST(ClusterKeyTest, RejectsShortAndEmptyKeys) {
  Result<ClusterKey> k = ClusterKey::FromBytes({});
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(k.status().message(), HasSubstr("at least 16 are required"));
  const std::string fifteen(15, 'k');
  EXPECT_FALSE(ClusterKey::FromBytes({reinterpret_cast<const uint8_t*>(fifteen.data()), 15}).ok());
}

TEST(ClusterKeyTest, LoadsFileTrimmingTrailingWhitespace) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(WriteStringToFile(dir.File("a"), "0123456789abcdef\n").ok());
  ASSERT_TRUE(WriteStringToFile(dir.File("b"), "0123456789abcdef").ok());
  ASSERT_TRUE(WriteStringToFile(dir.File("empty"), "").ok());
  ASSERT_TRUE(WriteStringToFile(dir.File("short"), "short key \r\n").ok());
  Result<ClusterKey> a = ClusterKey::LoadFile(dir.File("a"));
  Result<ClusterKey> b = ClusterKey::LoadFile(dir.File("b"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(
      std::equal(a->bytes().begin(), a->bytes().end(), b->bytes().begin(), b->bytes().end()));
  for (const char* bad : {"empty", "short", "missing"}) {
    Result<ClusterKey> k = ClusterKey::LoadFile(dir.File(bad));
    ASSERT_FALSE(k.ok()) << bad;
    EXPECT_THAT(k.status().message(), HasSubstr(dir.File(bad))) << bad;
  }
}

TEST(ProofTest, BoundToKeyRoleNoncesTargetAndCipher) {
  Transcript t;
  t.target = "10.0.0.2:7000";
  t.dialer[0] = 1;
  t.acceptor[0] = 2;
  const Proof p = *ComputeProof(GoodKey(), Role::kDialer, t);
  EXPECT_TRUE(ProofMatches(p, *ComputeProof(GoodKey(), Role::kDialer, t)));
  EXPECT_FALSE(ProofMatches(p, *ComputeProof(GoodKey(), Role::kAcceptor, t)));
  Transcript swapped = t;
  std::swap(swapped.dialer, swapped.acceptor);
  EXPECT_FALSE(ProofMatches(p, *ComputeProof(GoodKey(), Role::kDialer, swapped)));
  Transcript other_port = t;
  other_port.target = "10.0.0.2:7001";
  EXPECT_FALSE(ProofMatches(p, *ComputeProof(GoodKey(), Role::kDialer, other_port)));
  Transcript clear = t;
  clear.cipher = LinkCipher::kNone;
  EXPECT_FALSE(ProofMatches(p, *ComputeProof(GoodKey(), Role::kDialer, clear)));
  EXPECT_FALSE(ProofMatches(p, *ComputeProof(Key("another key of 16+ bytes"), Role::kDialer, t)));
  EXPECT_FALSE(ProofMatches(p, std::span(p).first(31)));
  EXPECT_NE(*RandomNonce(), *RandomNonce());
}

TEST(ProofTest, HelloRoundTripsAndRejectsJunk) {
  Hello h;
  h.nonce[3] = 9;
  h.cipher = 1;
  h.target = "[::1]:7000";
  Result<Hello> back = DecodeHello(EncodeHello(h));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->nonce, h.nonce);
  EXPECT_EQ(back->target, h.target);
  std::vector<uint8_t> longer = EncodeHello(h);
  longer.push_back(0);
  EXPECT_FALSE(DecodeHello(longer).ok());
  EXPECT_FALSE(DecodeHello(std::vector<uint8_t>(kNonceBytes, 0)).ok());
}

// Runs AcceptAuthenticated on another thread.
std::future<Result<std::unique_ptr<Conn>>> AcceptAsync(Listener& l, const ClusterKey& key,
                                                       int64_t auth_ms = kWaitMs) {
  return std::async(std::launch::async, [&l, key, auth_ms] {
    return AcceptAuthenticated(l, key, kWaitMs, AuthOptions{auth_ms});
  });
}

std::unique_ptr<Listener> Listen() {
  Result<std::unique_ptr<Listener>> l = Listener::Listen("127.0.0.1", 0);
  EXPECT_TRUE(l.ok()) << l.status().message();
  return l.ok() ? std::move(*l) : nullptr;
}

// An unauthenticated raw connection, for misbehaving peers.
std::unique_ptr<Conn> Raw(const Listener& l) {
  Result<std::unique_ptr<Conn>> c = Conn::Connect("127.0.0.1", l.port(), kWaitMs);
  EXPECT_TRUE(c.ok());
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(HandshakeTest, SameKeySucceedsAndLiftsTheHandshakeLimit) {
  auto l = Listen();
  auto accepted = AcceptAsync(*l, GoodKey());
  Result<std::unique_ptr<Conn>> dialer =
      ConnectAuthenticated("127.0.0.1", l->port(), GoodKey(), kWaitMs);
  ASSERT_TRUE(dialer.ok()) << dialer.status().message();
  Result<std::unique_ptr<Conn>> acceptor = accepted.get();
  ASSERT_TRUE(acceptor.ok()) << acceptor.status().message();
  ASSERT_NE(*acceptor, nullptr);
  // Frames far above the 256-byte handshake limit flow both ways afterwards.
  Frame f;
  f.type = MsgType::kActivations;
  f.tag = {1, 2, 3};
  f.payload.assign(100'000, 7);
  ASSERT_TRUE((*dialer)->Send(f).ok());
  Result<std::optional<Frame>> got = (*acceptor)->Recv(kWaitMs);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->payload.size(), 100'000u);
  ASSERT_TRUE((*acceptor)->Send(f).ok());
  got = (*dialer)->Recv(kWaitMs);
  ASSERT_TRUE(got.ok()) << got.status().message();
}

TEST(HandshakeTest, WrongKeyRejectedOnBothSides) {
  auto l = Listen();
  auto accepted = AcceptAsync(*l, Key("a different cluster key"));
  Result<std::unique_ptr<Conn>> dialer =
      ConnectAuthenticated("127.0.0.1", l->port(), GoodKey(), kWaitMs);
  ASSERT_FALSE(dialer.ok());
  EXPECT_THAT(dialer.status().message(), HasSubstr("acceptor did not prove the cluster key"));
  Result<std::unique_ptr<Conn>> acceptor = accepted.get();
  ASSERT_FALSE(acceptor.ok());
  EXPECT_THAT(acceptor.status().message(), HasSubstr("peer refused: authentication failed"));
}

TEST(HandshakeTest, ForgedProofRejectedAndPeerToldWhy) {
  auto l = Listen();
  auto accepted = AcceptAsync(*l, GoodKey());
  auto raw = Raw(*l);
  Frame hello;
  hello.type = MsgType::kHello;
  Hello h;
  h.nonce.fill(0x55);
  h.cipher = static_cast<uint8_t>(LinkCipher::kAes256Gcm);
  h.target = raw->target();
  hello.payload = EncodeHello(h);
  ASSERT_TRUE(raw->Send(hello).ok());
  Result<std::optional<Frame>> challenge = raw->Recv(kWaitMs);
  ASSERT_TRUE(challenge.ok() && challenge->has_value());
  EXPECT_EQ((*challenge)->type, MsgType::kChallenge);
  Frame proof;
  proof.type = MsgType::kProof;
  proof.payload.assign(kProofBytes, 0);
  ASSERT_TRUE(raw->Send(proof).ok());
  Result<std::unique_ptr<Conn>> acceptor = accepted.get();
  ASSERT_FALSE(acceptor.ok());
  EXPECT_THAT(acceptor.status().message(), HasSubstr("dialer did not prove the cluster key"));
  Result<std::optional<Frame>> bye = raw->Recv(kWaitMs);
  ASSERT_TRUE(bye.ok() && bye->has_value());
  ASSERT_EQ((*bye)->type, MsgType::kGoodbye);
  EXPECT_THAT(*DecodeGoodbye((*bye)->payload), HasSubstr("authentication failed"));
  EXPECT_FALSE(raw->Recv(kWaitMs).ok());  // then the acceptor hangs up
}

TEST(HandshakeTest, GarbageInsteadOfHelloDropped) {
  auto l = Listen();
  auto accepted = AcceptAsync(*l, GoodKey());
  auto raw = Raw(*l);
  const std::string junk = "GET / HTTP/1.1\r\nHost: node\r\n\r\n";
  ASSERT_TRUE(raw->SendBytes({reinterpret_cast<const uint8_t*>(junk.data()), junk.size()}).ok());
  Result<std::unique_ptr<Conn>> acceptor = accepted.get();
  ASSERT_FALSE(acceptor.ok());
  EXPECT_THAT(acceptor.status().message(), HasSubstr("bad magic"));
  // The connection is closed without anything the garbage sender could use.
  Result<std::optional<Frame>> r = raw->Recv(kWaitMs);
  EXPECT_FALSE(r.ok());
}

TEST(HandshakeTest, OtherFrameBeforeHelloDropped) {
  auto l = Listen();
  auto accepted = AcceptAsync(*l, GoodKey());
  auto raw = Raw(*l);
  Frame data;
  data.type = MsgType::kActivations;
  data.payload.assign(16, 1);
  ASSERT_TRUE(raw->Send(data).ok());
  Result<std::unique_ptr<Conn>> acceptor = accepted.get();
  ASSERT_FALSE(acceptor.ok());
  EXPECT_THAT(acceptor.status().message(), HasSubstr("expected hello, got activations"));
}

TEST(HandshakeTest, LargeFrameBeforeAuthRejectedFromItsHeader) {
  auto l = Listen();
  auto accepted = AcceptAsync(*l, GoodKey());
  auto raw = Raw(*l);
  Frame big;
  big.type = MsgType::kHello;
  big.payload.assign(1000, 0);
  ASSERT_TRUE(raw->Send(big).ok());
  Result<std::unique_ptr<Conn>> acceptor = accepted.get();
  ASSERT_FALSE(acceptor.ok());
  EXPECT_THAT(acceptor.status().message(), HasSubstr("exceeds the limit of 512 bytes"));
}

TEST(HandshakeTest, SilentDialerTimesOut) {
  auto l = Listen();
  const auto start = std::chrono::steady_clock::now();
  auto accepted = AcceptAsync(*l, GoodKey(), kShortAuthMs);
  auto raw = Raw(*l);  // connects, never speaks
  Result<std::unique_ptr<Conn>> acceptor = accepted.get();
  ASSERT_FALSE(acceptor.ok());
  EXPECT_THAT(acceptor.status().message(), HasSubstr("no hello within the 200 ms"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(kWaitMs));
}

TEST(HandshakeTest, SilentAcceptorTimesOut) {
  auto l = Listen();
  // The kernel completes the connection; nobody ever answers the hello.
  Result<std::unique_ptr<Conn>> dialer = ConnectAuthenticated(
      "127.0.0.1", l->port(), GoodKey(), kWaitMs, ConnOptions{}, AuthOptions{kShortAuthMs});
  ASSERT_FALSE(dialer.ok());
  EXPECT_THAT(dialer.status().message(), HasSubstr("no challenge within the 200 ms"));
}

TEST(HandshakeTest, FrameSentRightAfterAuthOkUsesTheFullLimit) {
  // A hand-driven acceptor writes AUTH_OK and a 100 KB data frame in one send: the dialer must
  // apply the handshake limit to AUTH_OK only.
  auto l = Listen();
  auto dialed = std::async(std::launch::async, [&l] {
    return ConnectAuthenticated("127.0.0.1", l->port(), GoodKey(), kWaitMs);
  });
  Result<std::unique_ptr<Conn>> acc = l->Accept(kWaitMs);
  ASSERT_TRUE(acc.ok() && *acc);
  Conn& raw = **acc;
  Result<std::optional<Frame>> hello = raw.Recv(kWaitMs);
  ASSERT_TRUE(hello.ok() && hello->has_value());
  Result<Hello> h = DecodeHello((*hello)->payload);
  ASSERT_TRUE(h.ok()) << h.status().message();
  Transcript t;
  t.target = h->target;
  t.dialer = h->nonce;
  t.acceptor = *RandomNonce();
  const Proof own_proof = *ComputeProof(GoodKey(), Role::kAcceptor, t);
  Frame challenge;
  challenge.type = MsgType::kChallenge;
  ByteWriter w(&challenge.payload);
  w.Bytes(t.acceptor);
  w.Bytes(own_proof);
  ASSERT_TRUE(raw.Send(challenge).ok());
  Result<std::optional<Frame>> proof = raw.Recv(kWaitMs);
  ASSERT_TRUE(proof.ok() && proof->has_value());
  const Proof dialer_proof = *ComputeProof(GoodKey(), Role::kDialer, t);
  EXPECT_TRUE(ProofMatches(dialer_proof, (*proof)->payload));
  // AUTH_OK in clear, then the data frame sealed as the acceptor seals it, in one write.
  Result<LinkKeys> keys = DeriveLinkKeys(GoodKey(), Role::kAcceptor, t, own_proof, dialer_proof);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  Frame ok;
  ok.type = MsgType::kAuthOk;
  std::vector<uint8_t> both = *EncodeFrame(ok);
  std::vector<uint8_t> plain(100'000, 3);
  uint8_t header[kMaxHeaderSize];
  const size_t hn = WriteHeader(MsgType::kControl, 0, {},
                                static_cast<uint32_t>(plain.size() + kAeadTagBytes), header);
  uint8_t tag[kAeadTagBytes];
  ASSERT_TRUE(keys->send->Begin({header, hn}).ok());
  ASSERT_TRUE(keys->send->Update(plain.data(), plain.data(), plain.size()).ok());
  ASSERT_TRUE(keys->send->SealFinish(tag).ok());
  both.insert(both.end(), header, header + hn);
  both.insert(both.end(), plain.begin(), plain.end());
  both.insert(both.end(), tag, tag + kAeadTagBytes);
  ASSERT_TRUE(raw.SendBytes(both).ok());
  Result<std::unique_ptr<Conn>> dialer = dialed.get();
  ASSERT_TRUE(dialer.ok()) << dialer.status().message();
  Result<std::optional<Frame>> got = (*dialer)->Recv(kWaitMs);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->payload, std::vector<uint8_t>(100'000, 3));
}

TEST(HandshakeTest, ListenerSurvivesAFailedPeer) {
  auto l = Listen();
  {
    auto accepted = AcceptAsync(*l, GoodKey());
    auto raw = Raw(*l);
    ASSERT_TRUE(raw->Send(Frame{}).ok());
    EXPECT_FALSE(accepted.get().ok());
  }
  auto accepted = AcceptAsync(*l, GoodKey());
  Result<std::unique_ptr<Conn>> dialer =
      ConnectAuthenticated("127.0.0.1", l->port(), GoodKey(), kWaitMs);
  EXPECT_TRUE(dialer.ok()) << dialer.status().message();
  EXPECT_TRUE(accepted.get().ok());
}

}  // namespace
}  // namespace shoal::net
