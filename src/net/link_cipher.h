// Link ciphers: the per-frame AEAD (AES-256-GCM) that seals every frame of an authenticated link.
#pragma once

#include <openssl/evp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "base/status.h"

namespace shoal::net {

// The cipher both ends of a link must agree on (bound into the handshake, auth.h).
enum class LinkCipher : uint8_t {
  kNone = 0,       // INSECURE: frames travel in clear, unprotected (for measuring the cost only)
  kAes256Gcm = 1,  // default: every frame after the handshake sealed with AES-256-GCM
};
// "none", "aes-256-gcm".
const char* LinkCipherName(LinkCipher cipher);
// The names above; an error lists them.
Result<LinkCipher> ParseLinkCipher(std::string_view name);

inline constexpr size_t kAeadKeyBytes = 32;  // AES-256
inline constexpr size_t kAeadIvBytes = 12;   // GCM's 96-bit nonce, built from the IV and counter
inline constexpr size_t kAeadTagBytes = 16;  // full-length GCM tag: forgery odds 2^-128 a frame
// A direction derives a fresh key from its current one after this many sealed bytes (at the
// frame boundary both ends see alike, so no message is needed): 2^34 bytes = 2^30 AES blocks
// per key keeps GCM's distinguishing bound near (2^30)^2 / 2^128 = 2^-68, far below TLS 1.3's
// 2^-57 target, while rekeying a 1 GB/s link only every ~17 s (one HMAC, ~1 us).
inline constexpr uint64_t kRekeyBytes = uint64_t{1} << 34;

// One direction's key material; wiped on destruction.
struct DirectionKey {
  std::array<uint8_t, kAeadKeyBytes> key{};
  std::array<uint8_t, kAeadIvBytes> iv{};
  DirectionKey() = default;
  DirectionKey(const DirectionKey&) = delete;
  DirectionKey& operator=(const DirectionKey&) = delete;
  ~DirectionKey();
};

// HKDF-SHA256 (RFC 5869) of `ikm` into `out` (at most 255 * 32 bytes).
Status HkdfSha256(std::span<const uint8_t> ikm, std::span<const uint8_t> salt,
                  std::span<const uint8_t> info, std::span<uint8_t> out);

// One direction of a link: AES-256-GCM with nonce = IV XOR the 64-bit frame counter (in the
// nonce's last 8 bytes, big-endian, as TLS 1.3). The counter is never sent: both ends count
// frames, so a replayed, dropped or reordered frame is opened with the wrong nonce and fails
// its tag. One EVP_CIPHER_CTX, keyed once and reused for every frame. Not thread-safe: the
// sender holds its send lock, the receiver its receive lock.
class FrameAead {
 public:
  enum class Mode { kSeal, kOpen };
  static Result<std::unique_ptr<FrameAead>> Create(Mode mode, const DirectionKey& key);
  ~FrameAead();
  FrameAead(const FrameAead&) = delete;
  FrameAead& operator=(const FrameAead&) = delete;

  // Starts the next frame; `aad` (its clear header) is authenticated, not encrypted.
  Status Begin(std::span<const uint8_t> aad);
  // Encrypts (seal) or decrypts (open) n bytes; `out` may equal `in`.
  Status Update(const uint8_t* in, uint8_t* out, size_t n);
  // Seal: writes the frame's tag. Open: checks it (an error means a changed, replayed,
  // reordered or dropped frame, or another key). Either way the counter moves on.
  Status SealFinish(uint8_t (&tag)[kAeadTagBytes]);
  Status OpenFinish(const uint8_t* tag);
  // Frames finished so far (the next frame's counter).
  uint64_t frames() const { return counter_; }
  // Rekey interval in bytes (tests use a small one to cover the rekey path).
  void set_rekey_bytes(uint64_t bytes) { rekey_bytes_ = bytes; }

 private:
  FrameAead(Mode mode, EVP_CIPHER_CTX* ctx) : mode_(mode), ctx_(ctx) {}
  // Counts a finished frame's bytes; derives the next key after rekey_bytes_.
  Status Advance();

  Mode mode_;
  EVP_CIPHER_CTX* ctx_;
  DirectionKey key_;
  uint64_t counter_ = 0;
  uint64_t frame_bytes_ = 0;  // of the frame in progress
  uint64_t key_bytes_ = 0;    // under the current key
  uint64_t rekey_bytes_ = kRekeyBytes;
};

}  // namespace shoal::net
