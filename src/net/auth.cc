// Cluster-key handshake: OpenSSL HMAC-SHA256 proofs over RAND_bytes nonces, run on a Conn.
#include "net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <string_view>

#include "base/log.h"
#include "io/mapped_file.h"
#include "net/bytes.h"

namespace shoal::net {
namespace {

// A GOODBYE reason longer than this is cut (it is only for the peer's log).
constexpr uint32_t kMaxGoodbyeReason = 200;

std::string_view RoleLabel(Role role) {
  return role == Role::kDialer ? "shoal-net v1 dialer" : "shoal-net v1 acceptor";
}

bool IsSpace(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Receives one frame before `deadline`; `expecting` names it in errors. A GOODBYE becomes an
// error carrying the peer's reason.
Result<Frame> RecvBefore(Conn& conn, std::chrono::steady_clock::time_point deadline,
                         MsgType expecting, size_t payload_size, int64_t timeout_ms) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
  SHOAL_ASSIGN_OR_RETURN(std::optional<Frame> frame, conn.Recv(left > 0 ? left : 0));
  if (!frame) {
    return Errorf("no {} within the {} ms handshake timeout", MsgTypeName(expecting), timeout_ms);
  }
  if (frame->type == MsgType::kGoodbye) {
    Result<std::string> reason = DecodeGoodbye(frame->payload);
    return Errorf("peer refused: {}", reason.ok() ? *reason : "(malformed goodbye)");
  }
  if (frame->type != expecting) {
    return Errorf("expected {}, got {}", MsgTypeName(expecting), MsgTypeName(frame->type));
  }
  if (frame->payload.size() != payload_size) {
    return Errorf("{} payload is {} bytes, expected {}", MsgTypeName(expecting),
                  frame->payload.size(), payload_size);
  }
  return std::move(*frame);
}

// Best effort: tell the peer why, then shut the link down.
Status Refuse(Conn& conn, std::string_view tell_peer, Status error) {
  if (!tell_peer.empty() && conn.state() == LinkState::kOpen) {
    Frame bye;
    bye.type = MsgType::kGoodbye;
    bye.payload = EncodeGoodbye(tell_peer);
    (void)conn.Send(bye);
  }
  conn.Shutdown();
  return error.Annotate("authenticating " + conn.peer());
}

Frame MakeFrame(MsgType type, std::vector<uint8_t> payload) {
  Frame f;
  f.type = type;
  f.payload = std::move(payload);
  return f;
}

}  // namespace

Result<ClusterKey> ClusterKey::FromBytes(std::span<const uint8_t> bytes) {
  if (bytes.size() < kMinClusterKeyBytes) {
    return Errorf("cluster key is {} bytes; at least {} are required (e.g. openssl rand -hex 32)",
                  bytes.size(), kMinClusterKeyBytes);
  }
  if (bytes.size() > kMaxClusterKeyBytes) {
    return Errorf("cluster key is {} bytes; at most {} are allowed", bytes.size(),
                  kMaxClusterKeyBytes);
  }
  return ClusterKey(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

Result<ClusterKey> ClusterKey::LoadFile(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && st.st_size > static_cast<off_t>(kMaxClusterKeyBytes) * 2) {
    return Errorf("{}: cluster key file is {} bytes; a key is at most {}", path, st.st_size,
                  kMaxClusterKeyBytes);
  }
  Result<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status().Annotate("cluster key");
  std::string& s = *text;
  while (!s.empty() && IsSpace(static_cast<uint8_t>(s.back()))) s.pop_back();
  Result<ClusterKey> key = FromBytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  OPENSSL_cleanse(s.data(), s.size());
  if (!key.ok()) return key.status().Annotate(path);
  if ((st.st_mode & 077) != 0) {
    Log(LogLevel::kWarn, "{}: cluster key file is readable by group or others (mode {:o})", path,
        st.st_mode & 0777);
  }
  return key;
}

void ClusterKey::Wipe() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

ClusterKey& ClusterKey::operator=(const ClusterKey& other) {
  if (this != &other) {
    Wipe();
    bytes_ = other.bytes_;
  }
  return *this;
}

ClusterKey& ClusterKey::operator=(ClusterKey&& other) noexcept {
  if (this != &other) {
    Wipe();
    bytes_ = std::move(other.bytes_);
  }
  return *this;
}

ClusterKey::~ClusterKey() { Wipe(); }

Result<Nonce> RandomNonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    return Errorf("RAND_bytes failed: no randomness for the handshake nonce");
  }
  return n;
}

Result<Proof> ComputeProof(const ClusterKey& key, Role role, const Nonce& own, const Nonce& peer) {
  const std::string_view label = RoleLabel(role);
  std::vector<uint8_t> msg(label.begin(), label.end());
  msg.insert(msg.end(), own.begin(), own.end());
  msg.insert(msg.end(), peer.begin(), peer.end());
  Proof out{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.bytes().data(), static_cast<int>(key.bytes().size()), msg.data(),
           msg.size(), out.data(), &len) == nullptr ||
      len != out.size()) {
    return Errorf("HMAC-SHA256 failed");
  }
  return out;
}

bool ProofMatches(const Proof& expected, std::span<const uint8_t> received) {
  return received.size() == expected.size() &&
         CRYPTO_memcmp(expected.data(), received.data(), expected.size()) == 0;
}

std::vector<uint8_t> EncodeGoodbye(std::string_view reason) {
  std::vector<uint8_t> out;
  ByteWriter(&out).String(reason.substr(0, kMaxGoodbyeReason));
  return out;
}

Result<std::string> DecodeGoodbye(std::span<const uint8_t> payload) {
  ByteReader r(payload);
  std::string reason;
  SHOAL_RETURN_IF_ERROR(r.String(&reason, kHandshakeMaxPayload, "goodbye reason"));
  SHOAL_RETURN_IF_ERROR(r.ExpectEnd("goodbye"));
  return reason;
}

Status AuthenticateDialer(Conn& conn, const ClusterKey& key, const AuthOptions& opts) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(opts.timeout_ms);
  conn.set_recv_max_payload(kHandshakeMaxPayload);
  Result<Nonce> own = RandomNonce();
  if (!own.ok()) return Refuse(conn, "", own.status());
  Status sent = conn.Send(MakeFrame(MsgType::kHello, {own->begin(), own->end()}));
  if (!sent.ok()) return Refuse(conn, "", sent);

  Result<Frame> challenge =
      RecvBefore(conn, deadline, MsgType::kChallenge, kNonceBytes + kProofBytes, opts.timeout_ms);
  if (!challenge.ok()) return Refuse(conn, "handshake failed", challenge.status());
  Nonce peer{};
  std::copy_n(challenge->payload.begin(), kNonceBytes, peer.begin());
  if (peer == *own) return Refuse(conn, "reflected nonce", Errorf("peer echoed our nonce"));
  Result<Proof> expected = ComputeProof(key, Role::kAcceptor, peer, *own);
  if (!expected.ok()) return Refuse(conn, "", expected.status());
  if (!ProofMatches(*expected, std::span(challenge->payload).subspan(kNonceBytes))) {
    return Refuse(conn, "authentication failed: your proof does not match our cluster key",
                  Errorf("acceptor did not prove the cluster key (different key?)"));
  }
  Result<Proof> proof = ComputeProof(key, Role::kDialer, *own, peer);
  if (!proof.ok()) return Refuse(conn, "", proof.status());
  sent = conn.Send(MakeFrame(MsgType::kProof, {proof->begin(), proof->end()}));
  if (!sent.ok()) return Refuse(conn, "", sent);

  Result<Frame> ok = RecvBefore(conn, deadline, MsgType::kAuthOk, 0, opts.timeout_ms);
  if (!ok.ok()) return Refuse(conn, "handshake failed", ok.status());
  conn.set_recv_max_payload(conn.options().limits.max_payload);
  return Status::Ok();
}

Status AuthenticateAcceptor(Conn& conn, const ClusterKey& key, const AuthOptions& opts) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(opts.timeout_ms);
  conn.set_recv_max_payload(kHandshakeMaxPayload);
  Result<Frame> hello = RecvBefore(conn, deadline, MsgType::kHello, kNonceBytes, opts.timeout_ms);
  if (!hello.ok()) return Refuse(conn, "handshake failed", hello.status());
  Nonce peer{};
  std::copy_n(hello->payload.begin(), kNonceBytes, peer.begin());
  Result<Nonce> own = RandomNonce();
  if (!own.ok()) return Refuse(conn, "", own.status());
  if (peer == *own) return Refuse(conn, "reflected nonce", Errorf("peer echoed our nonce"));
  Result<Proof> proof = ComputeProof(key, Role::kAcceptor, *own, peer);
  if (!proof.ok()) return Refuse(conn, "", proof.status());
  std::vector<uint8_t> body(own->begin(), own->end());
  body.insert(body.end(), proof->begin(), proof->end());
  Status sent = conn.Send(MakeFrame(MsgType::kChallenge, std::move(body)));
  if (!sent.ok()) return Refuse(conn, "", sent);

  Result<Frame> answer = RecvBefore(conn, deadline, MsgType::kProof, kProofBytes, opts.timeout_ms);
  if (!answer.ok()) return Refuse(conn, "handshake failed", answer.status());
  Result<Proof> expected = ComputeProof(key, Role::kDialer, peer, *own);
  if (!expected.ok()) return Refuse(conn, "", expected.status());
  if (!ProofMatches(*expected, answer->payload)) {
    return Refuse(conn, "authentication failed: your proof does not match our cluster key",
                  Errorf("dialer did not prove the cluster key (different key?)"));
  }
  sent = conn.Send(MakeFrame(MsgType::kAuthOk, {}));
  if (!sent.ok()) return Refuse(conn, "", sent);
  conn.set_recv_max_payload(conn.options().limits.max_payload);
  return Status::Ok();
}

Result<std::unique_ptr<Conn>> ConnectAuthenticated(const std::string& host, uint16_t port,
                                                   const ClusterKey& key,
                                                   int64_t connect_timeout_ms,
                                                   const ConnOptions& conn_opts,
                                                   const AuthOptions& auth_opts) {
  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<Conn> conn,
                         Conn::Connect(host, port, connect_timeout_ms, conn_opts));
  SHOAL_RETURN_IF_ERROR(AuthenticateDialer(*conn, key, auth_opts));
  return conn;
}

Result<std::unique_ptr<Conn>> AcceptAuthenticated(Listener& listener, const ClusterKey& key,
                                                  int64_t accept_timeout_ms,
                                                  const AuthOptions& auth_opts) {
  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<Conn> conn, listener.Accept(accept_timeout_ms));
  if (!conn) return conn;
  SHOAL_RETURN_IF_ERROR(AuthenticateAcceptor(*conn, key, auth_opts));
  return conn;
}

}  // namespace shoal::net
