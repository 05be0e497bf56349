// libFuzzer target: FrameDecoder over arbitrary bytes and splits (must never crash or over-read).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/bytes.h"
#include "net/frame.h"

using shoal::net::ByteReader;
using shoal::net::Frame;
using shoal::net::FrameDecoder;
using shoal::net::FrameLimits;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // First byte: the chunk size to feed with (1..128) and the payload limit: 512 bytes (the
  // handshake limit) or 1 MiB (the default 256 MiB only makes ASan slower at reserving).
  const size_t chunk = (data[0] & 0x7f) + 1;
  const FrameLimits limits{(data[0] & 0x80) ? shoal::net::kHandshakeMaxPayload : (1u << 20)};
  ++data;
  --size;

  FrameDecoder dec(limits);
  std::vector<Frame> frames;
  bool ok = true;
  for (size_t pos = 0; pos < size && ok; pos += chunk) {
    const size_t n = size - pos < chunk ? size - pos : chunk;
    // A copy exactly the chunk's size, so ASan flags any read past it.
    std::vector<uint8_t> piece(data + pos, data + pos + n);
    ok = dec.Feed(piece, &frames).ok();
  }
  if (ok) (void)dec.Finish();

  // Every decoded frame re-encodes to a frame that decodes to the same thing.
  for (const Frame& f : frames) {
    if (f.payload.size() > limits.max_payload) std::abort();
    auto bytes = shoal::net::EncodeFrame(f, limits);
    if (!bytes.ok()) std::abort();
    FrameDecoder again(limits);
    std::vector<Frame> out;
    if (!again.Feed(*bytes, &out).ok() || out.size() != 1 || out[0].payload != f.payload ||
        out[0].tag != f.tag || out[0].flags != f.flags || out[0].type != f.type) {
      std::abort();
    }
    // Typed reads over the payload stay in bounds whatever the bytes say.
    ByteReader r(f.payload);
    std::string s;
    std::vector<float> floats;
    uint64_t u = 0;
    (void)r.String(&s, 1024);
    (void)r.F32Array(&floats, 1u << 20);
    (void)r.U64(&u);
  }
  return 0;
}
