// AES-256-GCM frame sealing and HKDF-SHA256 over OpenSSL's EVP interface.
#include "net/link_cipher.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <climits>

namespace shoal::net {
namespace {

// EVP takes int lengths: feed it at most 1 GiB per call.
constexpr size_t kMaxEvpChunk = size_t{1} << 30;
// The label of the next-key derivation (kRekeyBytes).
constexpr char kRekeyLabel[] = "shoal-net v3 key update";

}  // namespace

const char* LinkCipherName(LinkCipher cipher) {
  switch (cipher) {
    case LinkCipher::kNone:
      return "none";
    case LinkCipher::kAes256Gcm:
      return "aes-256-gcm";
  }
  return "unknown";
}

Result<LinkCipher> ParseLinkCipher(std::string_view name) {
  for (LinkCipher c : {LinkCipher::kAes256Gcm, LinkCipher::kNone})
    if (name == LinkCipherName(c)) return c;
  return Errorf("unknown link cipher '{}' (aes-256-gcm, or none: no protection)", name);
}

DirectionKey::~DirectionKey() {
  OPENSSL_cleanse(key.data(), key.size());
  OPENSSL_cleanse(iv.data(), iv.size());
}

Status HkdfSha256(std::span<const uint8_t> ikm, std::span<const uint8_t> salt,
                  std::span<const uint8_t> info, std::span<uint8_t> out) {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  if (ctx == nullptr) return Errorf("HKDF: no context");
  size_t len = out.size();
  const bool ok =
      EVP_PKEY_derive_init(ctx) > 0 && EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_salt(ctx, salt.data(), static_cast<int>(salt.size())) > 0 &&
      EVP_PKEY_CTX_set1_hkdf_key(ctx, ikm.data(), static_cast<int>(ikm.size())) > 0 &&
      EVP_PKEY_CTX_add1_hkdf_info(ctx, info.data(), static_cast<int>(info.size())) > 0 &&
      EVP_PKEY_derive(ctx, out.data(), &len) > 0 && len == out.size();
  EVP_PKEY_CTX_free(ctx);
  if (!ok) return Errorf("HKDF-SHA256 failed ({} bytes of info)", info.size());
  return Status::Ok();
}

Result<std::unique_ptr<FrameAead>> FrameAead::Create(Mode mode, const DirectionKey& key) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx == nullptr) return Errorf("AES-256-GCM: no cipher context");
  auto a = std::unique_ptr<FrameAead>(new FrameAead(mode, ctx));
  a->key_.key = key.key;
  a->key_.iv = key.iv;
  // Keyed once here: each frame only sets its nonce (the key schedule is kept).
  const int enc = mode == Mode::kSeal ? 1 : 0;
  if (EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr, enc) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(kAeadIvBytes), nullptr) !=
          1 ||
      EVP_CipherInit_ex(ctx, nullptr, nullptr, a->key_.key.data(), nullptr, enc) != 1)
    return Errorf("AES-256-GCM: cannot set the key");
  return a;
}

FrameAead::~FrameAead() { EVP_CIPHER_CTX_free(ctx_); }  // frees and cleanses the key schedule

Status FrameAead::Begin(std::span<const uint8_t> aad) {
  // nonce = IV XOR (0^32 || counter big-endian): unique per frame for 2^64 frames per key.
  std::array<uint8_t, kAeadIvBytes> nonce = key_.iv;
  for (int i = 0; i < 8; ++i)
    nonce[kAeadIvBytes - 1 - static_cast<size_t>(i)] ^= static_cast<uint8_t>(counter_ >> (8 * i));
  frame_bytes_ = 0;
  int len = 0;
  if (EVP_CipherInit_ex(ctx_, nullptr, nullptr, nullptr, nonce.data(), -1) != 1 ||
      EVP_CipherUpdate(ctx_, nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1)
    return Errorf("AES-256-GCM: cannot start frame {}", counter_);
  return Status::Ok();
}

Status FrameAead::Update(const uint8_t* in, uint8_t* out, size_t n) {
  frame_bytes_ += n;
  while (n > 0) {
    const size_t take = std::min(n, kMaxEvpChunk);
    int len = 0;
    if (EVP_CipherUpdate(ctx_, out, &len, in, static_cast<int>(take)) != 1 ||
        static_cast<size_t>(len) != take)
      return Errorf("AES-256-GCM: frame {} failed", counter_);
    in += take;
    out += take;
    n -= take;
  }
  return Status::Ok();
}

Status FrameAead::SealFinish(uint8_t (&tag)[kAeadTagBytes]) {
  int len = 0;
  uint8_t none[16];
  if (mode_ != Mode::kSeal || EVP_CipherFinal_ex(ctx_, none, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kAeadTagBytes), tag) != 1)
    return Errorf("AES-256-GCM: cannot seal frame {}", counter_);
  return Advance();
}

Status FrameAead::OpenFinish(const uint8_t* tag) {
  int len = 0;
  uint8_t none[16];
  const uint64_t frame = counter_;
  const bool ok = mode_ == Mode::kOpen &&
                  EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kAeadTagBytes),
                                      const_cast<uint8_t*>(tag)) == 1 &&
                  EVP_CipherFinal_ex(ctx_, none, &len) == 1;
  SHOAL_RETURN_IF_ERROR(Advance());
  if (!ok) {
    return Errorf(
        "integrity check failed on frame {} of the link (AES-256-GCM tag mismatch: a changed, "
        "replayed, reordered or dropped frame, or another key)",
        frame);
  }
  return Status::Ok();
}

Status FrameAead::Advance() {
  ++counter_;
  key_bytes_ += frame_bytes_ + kAeadTagBytes;
  if (key_bytes_ < rekey_bytes_) return Status::Ok();
  // Next key = HMAC-SHA256(current key, label): one-way, so a later key reveals no earlier one.
  std::array<uint8_t, kAeadKeyBytes> next{};
  unsigned int len = 0;
  const bool ok = HMAC(EVP_sha256(), key_.key.data(), static_cast<int>(key_.key.size()),
                       reinterpret_cast<const uint8_t*>(kRekeyLabel), sizeof(kRekeyLabel) - 1,
                       next.data(), &len) != nullptr &&
                  len == next.size();
  key_.key = next;
  OPENSSL_cleanse(next.data(), next.size());
  if (!ok || EVP_CipherInit_ex(ctx_, nullptr, nullptr, key_.key.data(), nullptr, -1) != 1)
    return Errorf("AES-256-GCM: rekey after frame {} failed", counter_);
  key_bytes_ = 0;
  return Status::Ok();
}

}  // namespace shoal::net
