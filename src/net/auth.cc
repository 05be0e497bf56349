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
  return role == Role::kDialer ? "shoal-net v3 dialer" : "shoal-net v3 acceptor";
}

constexpr std::string_view kKeysLabel = "shoal-net v3 link keys";

// version || cipher || target (u32 length + bytes) || dialer nonce || acceptor nonce.
void AppendTranscript(const Transcript& t, std::vector<uint8_t>* out) {
  ByteWriter w(out);
  w.U8(kProtocolVersion);
  w.U8(static_cast<uint8_t>(t.cipher));
  w.String(t.target);
  w.Bytes(t.dialer);
  w.Bytes(t.acceptor);
}

// The cipher id's name, also for ids this build does not know.
std::string CipherIdName(uint8_t id) {
  if (id == static_cast<uint8_t>(LinkCipher::kNone) ||
      id == static_cast<uint8_t>(LinkCipher::kAes256Gcm))
    return LinkCipherName(static_cast<LinkCipher>(id));
  return fmt::format("unknown cipher {}", id);
}

bool IsSpace(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Receives one frame before `deadline`; `expecting` names it in errors; its payload must be
// `payload_size` bytes (SIZE_MAX: any). A GOODBYE becomes an error carrying the peer's reason.
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
  if (payload_size != SIZE_MAX && frame->payload.size() != payload_size) {
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

Result<Proof> ComputeProof(const ClusterKey& key, Role role, const Transcript& t) {
  const std::string_view label = RoleLabel(role);
  std::vector<uint8_t> msg(label.begin(), label.end());
  AppendTranscript(t, &msg);
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

std::vector<uint8_t> EncodeHello(const Hello& hello) {
  std::vector<uint8_t> out;
  ByteWriter w(&out);
  w.Bytes(hello.nonce);
  w.U8(hello.cipher);
  w.String(hello.target);
  return out;
}

Result<Hello> DecodeHello(std::span<const uint8_t> payload) {
  ByteReader r(payload);
  Hello h;
  SHOAL_RETURN_IF_ERROR(r.Bytes(h.nonce, "hello nonce"));
  SHOAL_RETURN_IF_ERROR(r.U8(&h.cipher, "hello cipher"));
  SHOAL_RETURN_IF_ERROR(r.String(&h.target, kMaxTargetBytes, "hello target"));
  SHOAL_RETURN_IF_ERROR(r.ExpectEnd("hello"));
  return h;
}

Result<LinkKeys> DeriveLinkKeys(const ClusterKey& key, Role role, const Transcript& t,
                                const Proof& acceptor_proof, const Proof& dialer_proof) {
  LinkKeys keys;
  if (t.cipher == LinkCipher::kNone) return keys;
  std::vector<uint8_t> salt(t.dialer.begin(), t.dialer.end());
  salt.insert(salt.end(), t.acceptor.begin(), t.acceptor.end());
  std::vector<uint8_t> info(kKeysLabel.begin(), kKeysLabel.end());
  AppendTranscript(t, &info);
  info.insert(info.end(), acceptor_proof.begin(), acceptor_proof.end());
  info.insert(info.end(), dialer_proof.begin(), dialer_proof.end());
  std::array<uint8_t, 2 * (kAeadKeyBytes + kAeadIvBytes)> okm{};
  const Status s = HkdfSha256(key.bytes(), salt, info, okm);
  DirectionKey from_dialer, from_acceptor;
  const uint8_t* p = okm.data();
  for (DirectionKey* k : {&from_dialer, &from_acceptor}) {
    std::copy_n(p, kAeadKeyBytes, k->key.begin());
    std::copy_n(p + kAeadKeyBytes, kAeadIvBytes, k->iv.begin());
    p += kAeadKeyBytes + kAeadIvBytes;
  }
  OPENSSL_cleanse(okm.data(), okm.size());
  SHOAL_RETURN_IF_ERROR(s);
  const bool dialer = role == Role::kDialer;
  SHOAL_ASSIGN_OR_RETURN(
      keys.send, FrameAead::Create(FrameAead::Mode::kSeal, dialer ? from_dialer : from_acceptor));
  SHOAL_ASSIGN_OR_RETURN(
      keys.recv, FrameAead::Create(FrameAead::Mode::kOpen, dialer ? from_acceptor : from_dialer));
  return keys;
}

Status AuthenticateDialer(Conn& conn, const ClusterKey& key, const AuthOptions& opts) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(opts.timeout_ms);
  conn.set_recv_max_payload(kHandshakeMaxPayload);
  Transcript t;
  t.cipher = opts.cipher;
  t.target = conn.target().empty() ? conn.peer() : conn.target();
  if (t.target.size() > kMaxTargetBytes) {
    return Refuse(conn, "",
                  Errorf("target '{}' is longer than {} bytes", t.target, kMaxTargetBytes));
  }
  Result<Nonce> own = RandomNonce();
  if (!own.ok()) return Refuse(conn, "", own.status());
  t.dialer = *own;
  Hello hello{t.dialer, static_cast<uint8_t>(t.cipher), t.target};
  Status sent = conn.Send(MakeFrame(MsgType::kHello, EncodeHello(hello)));
  if (!sent.ok()) return Refuse(conn, "", sent);

  Result<Frame> challenge =
      RecvBefore(conn, deadline, MsgType::kChallenge, kNonceBytes + kProofBytes, opts.timeout_ms);
  if (!challenge.ok()) return Refuse(conn, "handshake failed", challenge.status());
  std::copy_n(challenge->payload.begin(), kNonceBytes, t.acceptor.begin());
  if (t.acceptor == t.dialer) {
    return Refuse(conn, "reflected nonce", Errorf("peer echoed our nonce"));
  }
  Result<Proof> expected = ComputeProof(key, Role::kAcceptor, t);
  if (!expected.ok()) return Refuse(conn, "", expected.status());
  if (!ProofMatches(*expected, std::span(challenge->payload).subspan(kNonceBytes))) {
    return Refuse(conn, "authentication failed: your proof does not match our cluster key",
                  Errorf("acceptor did not prove the cluster key for {} over {} (different key, "
                         "or a relay that changed the handshake?)",
                         t.target, LinkCipherName(t.cipher)));
  }
  Result<Proof> proof = ComputeProof(key, Role::kDialer, t);
  if (!proof.ok()) return Refuse(conn, "", proof.status());
  Result<LinkKeys> keys = DeriveLinkKeys(key, Role::kDialer, t, *expected, *proof);
  if (!keys.ok()) return Refuse(conn, "", keys.status());
  sent = conn.Send(MakeFrame(MsgType::kProof, {proof->begin(), proof->end()}));
  if (!sent.ok()) return Refuse(conn, "", sent);

  Result<Frame> ok = RecvBefore(conn, deadline, MsgType::kAuthOk, 0, opts.timeout_ms);
  if (!ok.ok()) return Refuse(conn, "handshake failed", ok.status());
  // Everything after AUTH_OK is sealed both ways (the acceptor sealed from AUTH_OK on).
  if (keys->send) {
    conn.StartRecvCipher(std::move(keys->recv));
    conn.StartSendCipher(std::move(keys->send));
  }
  conn.set_recv_max_payload(conn.options().limits.max_payload);
  return Status::Ok();
}

Status AuthenticateAcceptor(Conn& conn, const ClusterKey& key, const AuthOptions& opts) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(opts.timeout_ms);
  conn.set_recv_max_payload(kHandshakeMaxPayload);
  Result<Frame> frame = RecvBefore(conn, deadline, MsgType::kHello, SIZE_MAX, opts.timeout_ms);
  if (!frame.ok()) return Refuse(conn, "handshake failed", frame.status());
  Result<Hello> hello = DecodeHello(frame->payload);
  if (!hello.ok()) return Refuse(conn, "handshake failed: malformed hello", hello.status());
  if (hello->cipher != static_cast<uint8_t>(opts.cipher)) {
    const std::string why = fmt::format(
        "link cipher mismatch: the dialer uses {}, the acceptor {} (set the same "
        "--link-cipher on every node and the coordinator)",
        CipherIdName(hello->cipher), LinkCipherName(opts.cipher));
    return Refuse(conn, why, Errorf("{}", why));
  }
  Result<std::pair<std::string, uint16_t>> target = ParseHostPort(hello->target);
  if (!target.ok() || target->second != conn.local_port()) {
    const std::string why = fmt::format(
        "wrong target: the dialer named '{}', but this link arrived on port {} (a "
        "relay forwarding from another port?)",
        hello->target, conn.local_port());
    return Refuse(conn, why, Errorf("{}", why));
  }
  Transcript t;
  t.cipher = opts.cipher;
  t.target = hello->target;
  t.dialer = hello->nonce;
  Result<Nonce> own = RandomNonce();
  if (!own.ok()) return Refuse(conn, "", own.status());
  t.acceptor = *own;
  if (t.acceptor == t.dialer) {
    return Refuse(conn, "reflected nonce", Errorf("peer echoed our nonce"));
  }
  Result<Proof> proof = ComputeProof(key, Role::kAcceptor, t);
  if (!proof.ok()) return Refuse(conn, "", proof.status());
  std::vector<uint8_t> body(t.acceptor.begin(), t.acceptor.end());
  body.insert(body.end(), proof->begin(), proof->end());
  Status sent = conn.Send(MakeFrame(MsgType::kChallenge, std::move(body)));
  if (!sent.ok()) return Refuse(conn, "", sent);

  Result<Frame> answer = RecvBefore(conn, deadline, MsgType::kProof, kProofBytes, opts.timeout_ms);
  if (!answer.ok()) return Refuse(conn, "handshake failed", answer.status());
  Result<Proof> expected = ComputeProof(key, Role::kDialer, t);
  if (!expected.ok()) return Refuse(conn, "", expected.status());
  if (!ProofMatches(*expected, answer->payload)) {
    return Refuse(conn, "authentication failed: your proof does not match our cluster key",
                  Errorf("dialer did not prove the cluster key (different key?)"));
  }
  Result<LinkKeys> keys = DeriveLinkKeys(key, Role::kAcceptor, t, *proof, *expected);
  if (!keys.ok()) return Refuse(conn, "", keys.status());
  // The dialer seals from its first frame after AUTH_OK; we seal from the first after it too.
  if (keys->recv) conn.StartRecvCipher(std::move(keys->recv));
  conn.set_recv_max_payload(conn.options().limits.max_payload);
  sent = conn.Send(MakeFrame(MsgType::kAuthOk, {}));
  if (!sent.ok()) return Refuse(conn, "", sent);
  if (keys->send) conn.StartSendCipher(std::move(keys->send));
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
