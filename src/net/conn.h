// Conn and Listener: framed blocking TCP links (connect/accept with timeouts, thread-safe Send).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "net/frame.h"
#include "net/link_cipher.h"

namespace shoal::net {

// "host:port", "[v6]:port" -> (host, port); errors name the address. Port 0 is accepted (a
// listener picks one); callers that dial must reject it.
Result<std::pair<std::string, uint16_t>> ParseHostPort(const std::string& s);

struct ConnOptions {
  // Payload limit for frames in both directions once the link is authenticated.
  FrameLimits limits;
  // A Send that cannot make progress for this long fails the link. 30 s: a 256 MiB frame at
  // 100 Mbit/s takes ~21 s, and a peer that stops reading for longer is as good as dead.
  int64_t send_timeout_ms = 30'000;
};

enum class LinkState {
  kOpen,
  kClosedByPeer,  // the peer closed cleanly between frames
  kFailed,        // socket error, malformed frame, truncated frame or send timeout
  kShutdown,      // Shutdown() was called here
};
const char* LinkStateName(LinkState s);

// One TCP connection carrying frames. Blocking sockets, meant for a thread per link (a node has a
// few links: coordinator, upstream, downstream). Send is thread-safe; Recv is meant for the one
// reading thread (it is serialized if called from several). Once a Send or Recv fails the link
// is dead: later calls return an error at once and the caller drops the Conn.
class Conn {
 public:
  // Connects to host:port (IPv4 or IPv6 literal or name; every address is tried) within
  // timeout_ms, with TCP_NODELAY set. Name resolution itself is not bounded by the timeout.
  static Result<std::unique_ptr<Conn>> Connect(const std::string& host, uint16_t port,
                                               int64_t timeout_ms, const ConnOptions& opts = {});
  // Wraps a connected socket (takes ownership of fd).
  static std::unique_ptr<Conn> Adopt(int fd, const ConnOptions& opts);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Writes the whole frame (header and payload in one sendmsg where possible); sealed once
  // StartSendCipher was called.
  Status Send(const Frame& frame);
  // Writes pre-encoded frame bytes (e.g. one frame encoded once for several links). On a sealed
  // link the bytes must be whole frames (each is sealed for this link); before, any bytes.
  Status SendBytes(std::span<const uint8_t> bytes);
  // The next frame; std::nullopt if none completed within timeout_ms (< 0: wait forever); an
  // error if the peer closed, the socket failed or a frame was malformed (see state()).
  Result<std::optional<Frame>> Recv(int64_t timeout_ms);
  // Shuts the socket down both ways; a Recv blocked in another thread returns. Thread-safe.
  void Shutdown();

  LinkState state() const { return state_.load(); }
  // The link failed because the peer's bytes were not valid frames or failed their integrity
  // check (not a socket error): someone changed them, or the peer is broken.
  bool corrupt() const { return corrupt_.load(); }
  // "addr:port" of the other end, for logs.
  const std::string& peer() const { return peer_; }
  // "host:port" as dialed by Connect ("" for an accepted link): the handshake binds it.
  const std::string& target() const { return target_; }
  // The local port of the socket (an accepted link: the port the peer dialed).
  uint16_t local_port() const { return local_port_; }
  // Limits the payload of received frames (the handshake lowers it; see auth.h). On a sealed
  // link the decoder allows the tag on top.
  void set_recv_max_payload(uint32_t max_payload);
  const ConnOptions& options() const { return opts_; }
  // From the next frame on, every frame sent is sealed with `aead` (link_cipher.h).
  void StartSendCipher(std::unique_ptr<FrameAead> aead);
  // From the next frame on, every frame received must open with `aead`: a frame that does not
  // (changed, replayed, reordered, dropped) fails the link with a logged reason.
  void StartRecvCipher(std::unique_ptr<FrameAead> aead);
  bool sealed() const { return sealed_.load(); }

 private:
  Conn(int fd, const ConnOptions& opts);
  Status SendLocked(std::span<const uint8_t> header, std::span<const uint8_t> payload);
  // Writes iov[0, count) whole (send_mu_ held).
  Status WriteLocked(iovec* iov, int count);
  // Seals and writes one frame: `header` (its length field counts the tag) in clear.
  Status SendSealedLocked(std::span<const uint8_t> header, std::span<const uint8_t> payload);
  // Opens a received frame in place (recv_mu_ held).
  Status OpenLocked(Frame* frame);
  Status FailRecv(Status s, LinkState state);

  int fd_;
  ConnOptions opts_;
  std::string peer_;
  std::string target_;
  uint16_t local_port_ = 0;
  std::atomic<LinkState> state_{LinkState::kOpen};
  std::atomic<bool> sealed_{false};
  std::mutex send_mu_;
  bool send_failed_ = false;         // guarded by send_mu_
  std::unique_ptr<FrameAead> seal_;  // guarded by send_mu_
  std::vector<uint8_t> seal_buf_;    // guarded by send_mu_: ciphertext of one chunk
  std::mutex recv_mu_;
  std::unique_ptr<FrameAead> open_;  // guarded by recv_mu_
  uint32_t recv_max_payload_;        // guarded by recv_mu_ (without the tag)
  FrameDecoder decoder_;             // guarded by recv_mu_
  std::vector<uint8_t> read_buf_;    // bytes [buf_begin_, buf_end_) received, not yet decoded
  size_t buf_begin_ = 0;
  size_t buf_end_ = 0;
  Status recv_error_;
  std::atomic<bool> corrupt_{false};
};

// A listening TCP socket.
class Listener {
 public:
  // Binds host:port ("127.0.0.1", "::1", "0.0.0.0", "::"; port 0 picks an ephemeral port).
  static Result<std::unique_ptr<Listener>> Listen(const std::string& host, uint16_t port,
                                                  const ConnOptions& opts = {});
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // The next connection; nullptr if none arrived within timeout_ms (< 0: wait forever). When
  // the process is out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) the error says
  // so and exhausted() is true: the pending connection stays queued and poll() reports it again
  // at once, so the caller must back off before the next Accept, not spin.
  Result<std::unique_ptr<Conn>> Accept(int64_t timeout_ms);
  // Whether the last Accept failed for lack of descriptors or memory.
  bool exhausted() const { return exhausted_; }
  uint16_t port() const { return port_; }
  const ConnOptions& options() const { return opts_; }

 private:
  Listener(int fd, uint16_t port, const ConnOptions& opts) : fd_(fd), port_(port), opts_(opts) {}
  int fd_;
  uint16_t port_;
  ConnOptions opts_;
  bool exhausted_ = false;
};

}  // namespace shoal::net
