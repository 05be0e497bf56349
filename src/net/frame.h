// Wire frames of the node protocol: layout, message types, EncodeFrame and FrameDecoder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace shoal::net {

// Frame layout (all integers little-endian; see docs/ARCHITECTURE.md, "net"):
//   offset 0  u32 magic 0x464E4853 (bytes "SHNF")
//   offset 4  u8  protocol version (kProtocolVersion)
//   offset 5  u8  message type (MsgType)
//   offset 6  u16 flags (meaning defined per message type; carried unchanged)
//   offset 8  u32 payload length in bytes (after all headers)
//   data types only (IsDataType):
//   offset 12 u64 micro-batch, offset 20 u32 plan epoch, offset 24 u64 step
//   then the payload.
inline constexpr uint32_t kFrameMagic = 0x464E4853;  // "SHNF" in wire order
// 2: state slots, hidden planes and state copies in step work (kimi-k3 over stages), heartbeat
// answers with the node's memory, fetches answered while the node loads on its own thread.
// 3: the handshake binds the dialed target, the protocol version and the link cipher into both
// proofs (HELLO carries the cipher id and target), and every frame after AUTH_OK is sealed with
// AES-256-GCM (link_cipher.h): its payload length then counts the 16-byte tag. A version-2 peer
// would read sealed frames as garbage, so it must be refused before the handshake.
// Peers of another version are refused at the first frame, with both versions in the reason.
inline constexpr uint8_t kProtocolVersion = 3;
inline constexpr size_t kBaseHeaderSize = 12;
inline constexpr size_t kDataHeaderSize = 20;
inline constexpr size_t kMaxHeaderSize = kBaseHeaderSize + kDataHeaderSize;

// Default payload limit: one micro-batch of activations, 512 tokens x 8192 floats in f32, is
// 16 MiB; 256 MiB leaves 16x for wider models (16384) and longer prefill chunks (2048 tokens)
// while bounding what one frame can make a receiver allocate.
inline constexpr uint32_t kDefaultMaxPayload = 256u << 20;
// Before authentication only handshake frames are accepted; the largest is HELLO, at most 298
// bytes (nonce 32, cipher 1, a target of up to 261 bytes with its 4-byte length: a 253-byte
// DNS name, brackets, ":65535"), and a 512-byte cap keeps an unknown peer from making us buffer
// anything sizeable.
inline constexpr uint32_t kHandshakeMaxPayload = 512;

enum class MsgType : uint8_t {
  // Handshake (auth.h): the only types accepted before authentication.
  kHello = 0x01,      // dialer -> acceptor: nonce, link cipher, dialed target
  kChallenge = 0x02,  // acceptor -> dialer: nonce, proof
  kProof = 0x03,      // dialer -> acceptor: proof
  kAuthOk = 0x04,     // acceptor -> dialer: empty
  // Link management.
  kHeartbeat = 0x10,  // empty, or a body defined by the node agent
  kGoodbye = 0x11,    // string reason; the sender closes after it
  kControl = 0x12,    // coordinator <-> node control messages (body defined by cluster)
  // Data frames: carry the (micro-batch, plan epoch, step) data header.
  kActivations = 0x40,  // stage -> next stage: hidden states of one micro-batch
  kStepCommand = 0x41,  // coordinator -> stage: run one step
  kStepResult = 0x42,   // last stage -> coordinator: logits or sampled tokens
};

// True for the types this version knows.
bool IsKnownType(uint8_t type);
// True for types that carry the 20-byte data header.
bool IsDataType(MsgType type);
const char* MsgTypeName(MsgType type);

// (micro-batch, plan epoch, step): which part of which engine step of which plan a data frame
// carries; a receiver drops frames of another plan epoch.
struct DataTag {
  uint64_t micro_batch = 0;  // index within the step (cluster/remote_executor.h)
  uint32_t epoch = 0;
  uint64_t step = 0;
  bool operator==(const DataTag&) const = default;
};

struct Frame {
  MsgType type = MsgType::kHeartbeat;
  uint16_t flags = 0;
  DataTag tag;  // meaningful (and sent) for data types only
  std::vector<uint8_t> payload;
};

struct FrameLimits {
  uint32_t max_payload = kDefaultMaxPayload;
};

// Header bytes for a frame of a known `type` whose payload is `payload_len` bytes on the wire
// (sealed frames count their tag); returns their count (12 or 32). No checks.
size_t WriteHeader(MsgType type, uint16_t flags, const DataTag& tag, uint32_t payload_len,
                   uint8_t (&out)[kMaxHeaderSize]);
// Header bytes of `frame` into `out`; returns their count (12 or 32). Errors: unknown type,
// payload over the limit.
Result<size_t> EncodeHeader(const Frame& frame, uint8_t (&out)[kMaxHeaderSize],
                            const FrameLimits& limits = {});
// Appends the whole frame (header + payload) to `out`.
Status AppendFrame(const Frame& frame, std::vector<uint8_t>* out, const FrameLimits& limits = {});
Result<std::vector<uint8_t>> EncodeFrame(const Frame& frame, const FrameLimits& limits = {});

// Incremental decoder for a byte stream. Feed any split of the stream; each completed frame is
// appended to `out`. A malformed header (bad magic, version, type, or a length over the limit)
// is reported as soon as its 12 bytes have arrived, before any payload is buffered. After an
// error the decoder is poisoned and returns the same error; the caller closes the connection.
class FrameDecoder {
 public:
  explicit FrameDecoder(const FrameLimits& limits = {}) : limits_(limits) {}

  Status Feed(std::span<const uint8_t> bytes, std::vector<Frame>* out) {
    return Feed(bytes, out, SIZE_MAX, nullptr);
  }
  // Stops after `max_frames` frames; `*consumed` gets the bytes used (the rest must be fed
  // again). Lets a connection apply a new limit from the very next frame on (auth.h).
  Status Feed(std::span<const uint8_t> bytes, std::vector<Frame>* out, size_t max_frames,
              size_t* consumed);
  // Call at end of stream: an error if the stream stopped inside a frame.
  Status Finish() const;

  void set_max_payload(uint32_t max_payload) { limits_.max_payload = max_payload; }
  uint32_t max_payload() const { return limits_.max_payload; }
  // True between frames (nothing of a partial frame buffered).
  bool at_frame_boundary() const { return header_have_ == 0 && !in_payload_; }
  // Bytes consumed from the stream so far (for error messages).
  uint64_t stream_offset() const { return offset_; }

 private:
  Status ParseBaseHeader();
  void StartPayload();
  Status Fail(Status s);

  FrameLimits limits_;
  uint8_t header_[kMaxHeaderSize] = {};
  size_t header_have_ = 0;
  size_t header_need_ = kBaseHeaderSize;
  bool in_payload_ = false;
  size_t payload_len_ = 0;
  uint64_t frame_start_ = 0;  // stream offset of the frame being decoded
  uint64_t offset_ = 0;
  Frame frame_;
  Status error_;
};

}  // namespace shoal::net
