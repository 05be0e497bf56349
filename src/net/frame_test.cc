// FrameDecoder/EncodeFrame tests: round trips, arbitrary splits, wire bytes, malformed headers.
#include "net/frame.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace shoal::net {
namespace {

using ::testing::HasSubstr;

const MsgType kAllTypes[] = {MsgType::kHello,     MsgType::kChallenge,   MsgType::kProof,
                             MsgType::kAuthOk,    MsgType::kHeartbeat,   MsgType::kGoodbye,
                             MsgType::kControl,   MsgType::kActivations, MsgType::kStepCommand,
                             MsgType::kStepResult};

Frame MakeFrame(MsgType type, size_t payload_size, uint64_t seed) {
  Frame f;
  f.type = type;
  f.flags = static_cast<uint16_t>(seed * 7919);
  if (IsDataType(type)) f.tag = {seed * 1000003 + 1, static_cast<uint32_t>(seed + 2), seed * 31};
  f.payload.resize(payload_size);
  for (size_t i = 0; i < payload_size; ++i) f.payload[i] = static_cast<uint8_t>(i * 131 + seed);
  return f;
}

void ExpectSame(const Frame& a, const Frame& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.tag, b.tag);
  EXPECT_EQ(a.payload, b.payload);
}

// Decodes `bytes` fed in chunks whose sizes come from `next_chunk`.
template <typename F>
std::vector<Frame> DecodeInChunks(const std::vector<uint8_t>& bytes, const FrameLimits& limits,
                                  F next_chunk) {
  FrameDecoder dec(limits);
  std::vector<Frame> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t n = std::min(next_chunk(), bytes.size() - pos);
    EXPECT_TRUE(dec.Feed({bytes.data() + pos, n}, &out).ok());
    pos += n;
  }
  EXPECT_TRUE(dec.Finish().ok());
  EXPECT_TRUE(dec.at_frame_boundary());
  return out;
}

TEST(FrameTest, RoundTripEveryTypeEmptySmallAndMaxPayload) {
  const FrameLimits limits{4096};
  for (MsgType type : kAllTypes) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{100}, size_t{4096}}) {
      const Frame in = MakeFrame(type, size, size + 3);
      Result<std::vector<uint8_t>> bytes = EncodeFrame(in, limits);
      ASSERT_TRUE(bytes.ok()) << bytes.status().message();
      EXPECT_EQ(bytes->size(), (IsDataType(type) ? kMaxHeaderSize : kBaseHeaderSize) + size);
      FrameDecoder dec(limits);
      std::vector<Frame> out;
      ASSERT_TRUE(dec.Feed(*bytes, &out).ok());
      ASSERT_EQ(out.size(), 1u) << MsgTypeName(type) << " " << size;
      ExpectSame(in, out[0]);
    }
  }
}

TEST(FrameTest, RoundTripAtTheDefaultLimit) {
  // A full 256 MiB frame would cost ~1 GiB in this test: check a full 16 MiB frame (one
  // 512 x 8192 f32 micro-batch) and the default limit on headers alone.
  Frame big = MakeFrame(MsgType::kActivations, 16u << 20, 5);
  Result<std::vector<uint8_t>> bytes = EncodeFrame(big);
  ASSERT_TRUE(bytes.ok());
  FrameDecoder dec;
  std::vector<Frame> out;
  ASSERT_TRUE(dec.Feed(*bytes, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  ExpectSame(big, out[0]);

  // The decoder accepts a header announcing exactly the limit (without filling 256 MiB) and
  // rejects one byte more.
  for (uint32_t len : {kDefaultMaxPayload, kDefaultMaxPayload + 1}) {
    uint8_t header[kBaseHeaderSize] = {'S', 'H', 'N', 'F', kProtocolVersion, 0x12, 0, 0};
    for (int i = 0; i < 4; ++i) header[8 + i] = static_cast<uint8_t>(len >> (8 * i));
    FrameDecoder at_limit;
    std::vector<Frame> none;
    const Status s = at_limit.Feed(header, &none);
    EXPECT_EQ(s.ok(), len == kDefaultMaxPayload) << len << ": " << s.message();
  }
}

TEST(FrameTest, EncodeRejectsUnknownTypeAndOversizedPayload) {
  Frame f = MakeFrame(MsgType::kControl, 11, 1);
  EXPECT_FALSE(EncodeFrame(f, FrameLimits{10}).ok());
  f.type = static_cast<MsgType>(0x7f);
  Result<std::vector<uint8_t>> r = EncodeFrame(f);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("unknown message type 0x7f"));
}

std::vector<uint8_t> EncodeStream(std::vector<Frame>* frames, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 200; ++i) {
    const MsgType type = kAllTypes[rng() % std::size(kAllTypes)];
    frames->push_back(MakeFrame(type, rng() % 3 == 0 ? 0 : rng() % 300, i));
    EXPECT_TRUE(AppendFrame(frames->back(), &bytes).ok());
  }
  return bytes;
}

TEST(FrameTest, DecoderFedByteByByte) {
  std::vector<Frame> frames;
  const std::vector<uint8_t> bytes = EncodeStream(&frames, 1);
  const std::vector<Frame> out = DecodeInChunks(bytes, {}, [] { return size_t{1}; });
  ASSERT_EQ(out.size(), frames.size());
  for (size_t i = 0; i < out.size(); ++i) ExpectSame(frames[i], out[i]);
}

TEST(FrameTest, DecoderFedRandomSplits) {
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<Frame> frames;
    const std::vector<uint8_t> bytes = EncodeStream(&frames, seed);
    std::mt19937_64 rng(seed + 100);
    const std::vector<Frame> out = DecodeInChunks(bytes, {}, [&] {
      // Mostly tiny pieces (header boundaries), sometimes large ones.
      return rng() % 4 == 0 ? size_t{rng() % 2000} + 1 : size_t{rng() % 13} + 1;
    });
    ASSERT_EQ(out.size(), frames.size()) << "seed " << seed;
    for (size_t i = 0; i < out.size(); ++i) ExpectSame(frames[i], out[i]);
  }
}

TEST(FrameTest, FeedStopsAfterMaxFrames) {
  std::vector<Frame> frames;
  const std::vector<uint8_t> bytes = EncodeStream(&frames, 3);
  FrameDecoder dec;
  std::vector<Frame> out;
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t used = 0;
    const size_t before = out.size();
    ASSERT_TRUE(dec.Feed({bytes.data() + pos, bytes.size() - pos}, &out, 1, &used).ok());
    ASSERT_GT(used, 0u);
    pos += used;
    ASSERT_EQ(out.size(), before + 1);
    ASSERT_TRUE(dec.at_frame_boundary());
  }
  ASSERT_EQ(out.size(), frames.size());
  for (size_t i = 0; i < out.size(); ++i) ExpectSame(frames[i], out[i]);
}

TEST(FrameTest, WireBytesAreLittleEndian) {
  Frame f;
  f.type = MsgType::kActivations;
  f.flags = 0x0102;
  f.tag = {0x1122334455667788ull, 0xA1B2C3D4u, 0x0807060504030201ull};
  f.payload = {0xEE, 0xFF};
  Result<std::vector<uint8_t>> bytes = EncodeFrame(f);
  ASSERT_TRUE(bytes.ok());
  const std::vector<uint8_t> expected = {
      'S',  'H',  'N',  'F',                           // magic
      0x03,                                            // version
      0x40,                                            // type: activations
      0x02, 0x01,                                      // flags
      0x02, 0x00, 0x00, 0x00,                          // payload length
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // micro-batch
      0xD4, 0xC3, 0xB2, 0xA1,                          // epoch
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // step
      0xEE, 0xFF};                                     // payload
  EXPECT_EQ(*bytes, expected);

  Frame hb;
  hb.type = MsgType::kHeartbeat;
  hb.payload.resize(0x010203);
  Result<std::vector<uint8_t>> hb_bytes = EncodeFrame(hb);
  ASSERT_TRUE(hb_bytes.ok());
  const std::vector<uint8_t> hb_header = {'S', 'H', 'N', 'F', 3, 0x10, 0, 0, 0x03, 0x02, 0x01, 0};
  EXPECT_EQ(std::vector<uint8_t>(hb_bytes->begin(), hb_bytes->begin() + 12), hb_header);
}

Status DecodeAll(const std::vector<uint8_t>& bytes, std::vector<Frame>* out,
                 const FrameLimits& limits = {}) {
  FrameDecoder dec(limits);
  SHOAL_RETURN_IF_ERROR(dec.Feed(bytes, out));
  return dec.Finish();
}

std::vector<uint8_t> Heartbeat() { return *EncodeFrame(Frame{}); }

TEST(FrameTest, MalformedHeadersRejectedWithReason) {
  struct Case {
    const char* name;
    size_t offset;
    uint8_t value;
    const char* reason;
  };
  const Case cases[] = {
      {"bad magic", 0, 'X', "bad magic"},
      {"bad version", 4, 9, "unsupported protocol version 9"},
      {"unknown type", 5, 0x33, "unknown message type 0x33"},
      {"oversized length", 11, 0x80, "exceeds the limit"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> bytes = Heartbeat();
    bytes[c.offset] = c.value;
    std::vector<Frame> out;
    const Status s = DecodeAll(bytes, &out);
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.reason)) << c.name;
    EXPECT_TRUE(out.empty()) << c.name;
  }
}

TEST(FrameTest, OversizedLengthRejectedBeforeThePayloadArrives) {
  Frame f;
  f.type = MsgType::kControl;
  f.payload.resize(1001);
  std::vector<uint8_t> bytes = *EncodeFrame(f);
  FrameDecoder dec(FrameLimits{1000});
  std::vector<Frame> out;
  const Status s = dec.Feed({bytes.data(), kBaseHeaderSize}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("payload length 1001 exceeds the limit of 1000 bytes"));
  // Poisoned: later bytes return the same error.
  EXPECT_EQ(dec.Feed(Heartbeat(), &out).message(), s.message());
}

TEST(FrameTest, TruncatedStreamsReportedAtFinish) {
  const Frame f = MakeFrame(MsgType::kStepResult, 50, 1);
  const std::vector<uint8_t> bytes = *EncodeFrame(f);
  for (size_t cut : {size_t{1}, size_t{11}, size_t{12}, size_t{31}, size_t{32}, bytes.size() - 1}) {
    FrameDecoder dec;
    std::vector<Frame> out;
    ASSERT_TRUE(dec.Feed({bytes.data(), cut}, &out).ok());
    EXPECT_TRUE(out.empty());
    const Status s = dec.Finish();
    ASSERT_FALSE(s.ok()) << cut;
    EXPECT_THAT(s.message(), HasSubstr("truncated")) << cut;
  }
}

TEST(FrameTest, FramesBeforeAMalformedOneAreDelivered) {
  std::vector<uint8_t> bytes = Heartbeat();
  const std::vector<uint8_t> second = *EncodeFrame(MakeFrame(MsgType::kControl, 5, 2));
  bytes.insert(bytes.end(), second.begin(), second.end());
  bytes.push_back('G');
  bytes.insert(bytes.end(), 11, 0);
  std::vector<Frame> out;
  const Status s = DecodeAll(bytes, &out);
  EXPECT_THAT(s.message(), HasSubstr("stream offset 29: bad magic"));
  EXPECT_EQ(out.size(), 2u);
}

}  // namespace
}  // namespace shoal::net
