// Cluster-key authentication: mutual HMAC-SHA256 challenge-response run right after connect,
// bound to the dialed target and the link cipher, which then seals the link (link_cipher.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "net/conn.h"
#include "net/link_cipher.h"

namespace shoal::net {

// 16 bytes = 128 bits, the usual floor for a symmetric key; shorter keys are refused.
inline constexpr size_t kMinClusterKeyBytes = 16;
// A key file larger than 4 KiB is almost certainly the wrong file.
inline constexpr size_t kMaxClusterKeyBytes = 4096;
inline constexpr size_t kNonceBytes = 32;  // 256 random bits per side: never repeats
inline constexpr size_t kProofBytes = 32;  // HMAC-SHA256 output

// The shared secret of a cluster. The bytes are wiped on destruction.
class ClusterKey {
 public:
  static Result<ClusterKey> FromBytes(std::span<const uint8_t> bytes);
  // Reads `--cluster-key-file`: the key is the file's bytes with trailing ASCII whitespace
  // removed (so `openssl rand -hex 32 > key` works on every node alike). Errors name the file.
  static Result<ClusterKey> LoadFile(const std::string& path);

  ClusterKey(const ClusterKey& other) = default;
  ClusterKey(ClusterKey&& other) noexcept = default;
  ClusterKey& operator=(const ClusterKey& other);
  ClusterKey& operator=(ClusterKey&& other) noexcept;
  ~ClusterKey();

  std::span<const uint8_t> bytes() const { return bytes_; }

 private:
  explicit ClusterKey(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  void Wipe();
  std::vector<uint8_t> bytes_;
};

// The dialer connects; the acceptor accepted. Each side's proof is bound to its role, so a proof
// can never be reflected back as the other side's.
enum class Role : uint8_t { kDialer = 0, kAcceptor = 1 };

using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

// The longest target HELLO may name: a 253-byte DNS name in brackets and ":65535".
inline constexpr size_t kMaxTargetBytes = 261;

// What both proofs and the link keys are bound to (besides the key and the role): the protocol
// version, the link cipher, the "host:port" the dialer dialed, and both fresh nonces.
struct Transcript {
  LinkCipher cipher = LinkCipher::kAes256Gcm;
  std::string target;
  Nonce dialer{};
  Nonce acceptor{};
};

// A fresh nonce from OpenSSL's CSPRNG (RAND_bytes).
Result<Nonce> RandomNonce();
// HMAC-SHA256(key, "shoal-net v3 " + role name || u8 version || u8 cipher || u32 target length
// || target || dialer nonce || acceptor nonce).
Result<Proof> ComputeProof(const ClusterKey& key, Role role, const Transcript& t);
// Constant-time comparison (CRYPTO_memcmp); false when the sizes differ.
bool ProofMatches(const Proof& expected, std::span<const uint8_t> received);

// HELLO body: nonce, u8 cipher id, target (u32 length + bytes).
struct Hello {
  Nonce nonce{};
  uint8_t cipher = 0;  // raw: an unknown id is reported by name as a mismatch
  std::string target;
};
std::vector<uint8_t> EncodeHello(const Hello& hello);
Result<Hello> DecodeHello(std::span<const uint8_t> payload);

// One link's AEAD states for one side (both null for LinkCipher::kNone): keys from
// HKDF-SHA256(ikm = cluster key, salt = dialer nonce || acceptor nonce, info = "shoal-net v3
// link keys" || the proofs' transcript || acceptor proof || dialer proof), 88 bytes: the dialer's
// sending key and IV, then the acceptor's.
struct LinkKeys {
  std::unique_ptr<FrameAead> send, recv;
};
Result<LinkKeys> DeriveLinkKeys(const ClusterKey& key, Role role, const Transcript& t,
                                const Proof& acceptor_proof, const Proof& dialer_proof);

struct AuthOptions {
  // The whole handshake (two round trips) must finish within this. 5 s covers a loaded node on
  // a slow network while a peer that connects and stays silent is dropped quickly.
  int64_t timeout_ms = 5'000;
  // The link cipher. Both ends must use the same; a mismatch fails the handshake naming both.
  LinkCipher cipher = LinkCipher::kAes256Gcm;
};

// Handshake, dialer side:   HELLO(nonce_d, cipher, target) -> CHALLENGE(nonce_a, proof_a) ->
//                           verify proof_a -> PROOF(proof_d) -> AUTH_OK -> sealed frames.
// Acceptor side: the mirror image; it refuses a HELLO naming another cipher (the error names
// both) or a target whose port is not the one the link arrived on (a relay listening on another
// port). The target is conn.target() (what Connect dialed; the peer's address for an adopted
// socket). Until it succeeds only handshake frames of at most kHandshakeMaxPayload bytes are
// accepted; then the link's own limit applies again, and every later frame both ways is sealed
// with keys derived from the transcript (DeriveLinkKeys), so a relay that forwarded the
// handshake can neither read nor change anything after it. On any failure (wrong key, another
// frame first, garbage, timeout) the peer is told why with a GOODBYE where the stream still
// allows it, the Conn is shut down, and the error says what happened.
Status AuthenticateDialer(Conn& conn, const ClusterKey& key, const AuthOptions& opts = {});
Status AuthenticateAcceptor(Conn& conn, const ClusterKey& key, const AuthOptions& opts = {});

// Connect + AuthenticateDialer.
Result<std::unique_ptr<Conn>> ConnectAuthenticated(const std::string& host, uint16_t port,
                                                   const ClusterKey& key,
                                                   int64_t connect_timeout_ms,
                                                   const ConnOptions& conn_opts = {},
                                                   const AuthOptions& auth_opts = {});
// Accept + AuthenticateAcceptor on the calling thread (a silent peer holds it for at most
// auth_opts.timeout_ms; accept loops serving many peers should authenticate on the link thread).
// nullptr when nothing arrived within accept_timeout_ms; an error when a peer failed the
// handshake (the listener stays usable).
Result<std::unique_ptr<Conn>> AcceptAuthenticated(Listener& listener, const ClusterKey& key,
                                                  int64_t accept_timeout_ms,
                                                  const AuthOptions& auth_opts = {});

// GOODBYE body: one string. Errors if the body is malformed.
std::vector<uint8_t> EncodeGoodbye(std::string_view reason);
Result<std::string> DecodeGoodbye(std::span<const uint8_t> payload);

}  // namespace shoal::net
