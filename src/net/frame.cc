// Frame encoding and the incremental FrameDecoder (explicit little-endian bytes, bounded reads).
#include "net/frame.h"

#include <algorithm>
#include <cstring>

#include "net/bytes.h"

namespace shoal::net {

bool IsKnownType(uint8_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::kHello:
    case MsgType::kChallenge:
    case MsgType::kProof:
    case MsgType::kAuthOk:
    case MsgType::kHeartbeat:
    case MsgType::kGoodbye:
    case MsgType::kControl:
    case MsgType::kActivations:
    case MsgType::kStepCommand:
    case MsgType::kStepResult:
      return true;
  }
  return false;
}

bool IsDataType(MsgType type) {
  return type == MsgType::kActivations || type == MsgType::kStepCommand ||
         type == MsgType::kStepResult;
}

const char* MsgTypeName(MsgType type) {
  switch (type) {
    case MsgType::kHello:
      return "hello";
    case MsgType::kChallenge:
      return "challenge";
    case MsgType::kProof:
      return "proof";
    case MsgType::kAuthOk:
      return "auth-ok";
    case MsgType::kHeartbeat:
      return "heartbeat";
    case MsgType::kGoodbye:
      return "goodbye";
    case MsgType::kControl:
      return "control";
    case MsgType::kActivations:
      return "activations";
    case MsgType::kStepCommand:
      return "step-command";
    case MsgType::kStepResult:
      return "step-result";
  }
  return "unknown";
}

size_t WriteHeader(MsgType type, uint16_t flags, const DataTag& tag, uint32_t payload_len,
                   uint8_t (&out)[kMaxHeaderSize]) {
  StoreLE32(out, kFrameMagic);
  out[4] = kProtocolVersion;
  out[5] = static_cast<uint8_t>(type);
  StoreLE16(out + 6, flags);
  StoreLE32(out + 8, payload_len);
  if (!IsDataType(type)) return kBaseHeaderSize;
  StoreLE64(out + 12, tag.micro_batch);
  StoreLE32(out + 20, tag.epoch);
  StoreLE64(out + 24, tag.step);
  return kMaxHeaderSize;
}

Result<size_t> EncodeHeader(const Frame& frame, uint8_t (&out)[kMaxHeaderSize],
                            const FrameLimits& limits) {
  const uint8_t type = static_cast<uint8_t>(frame.type);
  if (!IsKnownType(type)) return Errorf("cannot encode unknown message type 0x{:02x}", type);
  if (frame.payload.size() > limits.max_payload) {
    return Errorf("{} payload of {} bytes exceeds the limit of {} bytes", MsgTypeName(frame.type),
                  frame.payload.size(), limits.max_payload);
  }
  return WriteHeader(frame.type, frame.flags, frame.tag,
                     static_cast<uint32_t>(frame.payload.size()), out);
}

Status AppendFrame(const Frame& frame, std::vector<uint8_t>* out, const FrameLimits& limits) {
  uint8_t header[kMaxHeaderSize];
  SHOAL_ASSIGN_OR_RETURN(const size_t n, EncodeHeader(frame, header, limits));
  out->insert(out->end(), header, header + n);
  out->insert(out->end(), frame.payload.begin(), frame.payload.end());
  return Status::Ok();
}

Result<std::vector<uint8_t>> EncodeFrame(const Frame& frame, const FrameLimits& limits) {
  std::vector<uint8_t> out;
  out.reserve(kMaxHeaderSize + frame.payload.size());
  SHOAL_RETURN_IF_ERROR(AppendFrame(frame, &out, limits));
  return out;
}

Status FrameDecoder::Fail(Status s) {
  error_ = s.Annotate(fmt::format("malformed frame at stream offset {}", frame_start_));
  return error_;
}

Status FrameDecoder::ParseBaseHeader() {
  const uint32_t magic = LoadLE32(header_);
  if (magic != kFrameMagic) {
    return Fail(Errorf("bad magic 0x{:08x} (expected 0x{:08x}, \"SHNF\")", magic, kFrameMagic));
  }
  if (header_[4] != kProtocolVersion) {
    return Fail(Errorf("unsupported protocol version {} (this build speaks {})", header_[4],
                       kProtocolVersion));
  }
  if (!IsKnownType(header_[5])) {
    return Fail(Errorf("unknown message type 0x{:02x}", header_[5]));
  }
  const uint32_t length = LoadLE32(header_ + 8);
  if (length > limits_.max_payload) {
    return Fail(
        Errorf("payload length {} exceeds the limit of {} bytes", length, limits_.max_payload));
  }
  frame_.type = static_cast<MsgType>(header_[5]);
  frame_.flags = LoadLE16(header_ + 6);
  header_need_ = IsDataType(frame_.type) ? kMaxHeaderSize : kBaseHeaderSize;
  return Status::Ok();
}

void FrameDecoder::StartPayload() {
  if (IsDataType(frame_.type)) {
    frame_.tag.micro_batch = LoadLE64(header_ + 12);
    frame_.tag.epoch = LoadLE32(header_ + 20);
    frame_.tag.step = LoadLE64(header_ + 24);
  } else {
    frame_.tag = DataTag{};
  }
  // The length was checked against the limit. reserve() only maps address space: pages are
  // touched as bytes arrive, so a header alone does not make us fill 256 MiB.
  payload_len_ = LoadLE32(header_ + 8);
  frame_.payload.clear();
  frame_.payload.reserve(payload_len_);
  in_payload_ = true;
}

Status FrameDecoder::Feed(std::span<const uint8_t> bytes, std::vector<Frame>* out,
                          size_t max_frames, size_t* consumed) {
  if (!error_.ok()) return error_;
  size_t pos = 0;
  size_t frames = 0;
  struct Report {  // *consumed = pos on every return
    size_t* consumed;
    const size_t& pos;
    ~Report() {
      if (consumed != nullptr) *consumed = pos;
    }
  } report{consumed, pos};
  while (true) {
    if (!in_payload_) {
      // Header bytes: 12, then 20 more for data types once the type is known.
      const size_t take = std::min(header_need_ - header_have_, bytes.size() - pos);
      if (take > 0) std::memcpy(header_ + header_have_, bytes.data() + pos, take);
      header_have_ += take;
      pos += take;
      offset_ += take;
      if (header_have_ < header_need_) return Status::Ok();
      if (header_need_ == kBaseHeaderSize) {
        SHOAL_RETURN_IF_ERROR(ParseBaseHeader());
        if (header_have_ < header_need_) continue;  // data header still to come
      }
      StartPayload();
    }
    const size_t take = std::min(payload_len_ - frame_.payload.size(), bytes.size() - pos);
    frame_.payload.insert(frame_.payload.end(), bytes.data() + pos, bytes.data() + pos + take);
    pos += take;
    offset_ += take;
    if (frame_.payload.size() < payload_len_) return Status::Ok();
    out->push_back(std::move(frame_));
    frame_ = Frame{};
    in_payload_ = false;
    header_have_ = 0;
    header_need_ = kBaseHeaderSize;
    frame_start_ = offset_;
    if (pos == bytes.size() || ++frames == max_frames) return Status::Ok();
  }
}

Status FrameDecoder::Finish() const {
  if (!error_.ok()) return error_;
  if (at_frame_boundary()) return Status::Ok();
  const uint64_t have = offset_ - frame_start_;
  if (!in_payload_) {
    return Errorf("malformed frame at stream offset {}: truncated header ({} of {} bytes)",
                  frame_start_, have, header_need_);
  }
  return Errorf("malformed frame at stream offset {}: truncated {} frame ({} of {} bytes)",
                frame_start_, MsgTypeName(frame_.type), have, header_need_ + payload_len_);
}

}  // namespace shoal::net
