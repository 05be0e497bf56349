// Conn and Listener over POSIX sockets (poll for timeouts, sendmsg for header + payload).
#include "net/conn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/log.h"
#include "net/bytes.h"

namespace shoal::net {

Result<std::pair<std::string, uint16_t>> ParseHostPort(const std::string& s) {
  const size_t c = s.rfind(':');
  if (c == std::string::npos || c == 0 || c + 1 == s.size())
    return Errorf("address '{}' is not HOST:PORT", s);
  const std::string digits = s.substr(c + 1);
  if (digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(digits) > 65535)
    return Errorf("bad port in '{}'", s);
  std::string host = s.substr(0, c);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return std::make_pair(host, static_cast<uint16_t>(std::stoi(digits)));
}
namespace {

// Reads up to 256 KiB per recv: large enough that a 16 MiB activation frame costs ~64 calls.
constexpr size_t kReadChunk = 256 << 10;
// Pending connections the kernel queues for accept: a node accepts a handful of links.
constexpr int kListenBacklog = 64;
// A sealed frame is encrypted and written in pieces of this size from one buffer per link:
// 256 KiB stays in L2 between encryption and the copy into the socket, costs ~64 sendmsg calls
// for a 16 MiB activation frame (as kReadChunk does on the reading side), and bounds what a
// link holds beyond the frame itself.
constexpr size_t kSealChunk = 256 << 10;

using SteadyTime = std::chrono::steady_clock::time_point;

// Milliseconds left until `deadline` for poll(): -1 when there is no deadline.
int RemainingMs(const std::optional<SteadyTime>& deadline) {
  if (!deadline) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        *deadline - std::chrono::steady_clock::now())
                        .count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

std::optional<SteadyTime> DeadlineFrom(int64_t timeout_ms) {
  if (timeout_ms < 0) return std::nullopt;
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

std::string Errno() { return std::strerror(errno); }

std::string FormatAddr(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    return fmt::format("{}:{}", buf, ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    return fmt::format("[{}]:{}", buf, ntohs(in6->sin6_port));
  }
  return "?";
}

uint16_t LocalPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

// The decoder's limit on a sealed link: the payload limit plus the tag (saturating).
uint32_t WithTag(uint32_t max_payload) {
  return max_payload > UINT32_MAX - kAeadTagBytes
             ? UINT32_MAX
             : max_payload + static_cast<uint32_t>(kAeadTagBytes);
}

std::string PeerName(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return FormatAddr(reinterpret_cast<const sockaddr*>(&ss));
}

void SetSocketOptions(int fd, const ConnOptions& opts) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval tv{};
  tv.tv_sec = opts.send_timeout_ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>((opts.send_timeout_ms % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

Result<addrinfo*> Resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0) return Errorf("cannot resolve {}:{}: {}", host, port, gai_strerror(rc));
  return res;
}

// One non-blocking connect attempt bounded by `deadline`; returns the connected blocking fd.
Result<int> ConnectOne(const addrinfo* ai, const std::optional<SteadyTime>& deadline) {
  const int fd =
      socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return Errorf("socket: {}", Errno());
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
    const std::string err = Errno();
    close(fd);
    return Errorf("connect: {}", err);
  }
  pollfd p{fd, POLLOUT, 0};
  while (true) {
    const int rc = poll(&p, 1, RemainingMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) {
      const std::string err = rc == 0 ? "timed out" : Errno();
      close(fd);
      return Errorf("connect: {}", err);
    }
    break;
  }
  int so_error = 0;
  socklen_t len = sizeof(so_error);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
  if (so_error != 0) {
    close(fd);
    return Errorf("connect: {}", std::strerror(so_error));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

const char* LinkStateName(LinkState s) {
  switch (s) {
    case LinkState::kOpen:
      return "open";
    case LinkState::kClosedByPeer:
      return "closed by peer";
    case LinkState::kFailed:
      return "failed";
    case LinkState::kShutdown:
      return "shut down";
  }
  return "unknown";
}

Conn::Conn(int fd, const ConnOptions& opts)
    : fd_(fd),
      opts_(opts),
      peer_(PeerName(fd)),
      local_port_(LocalPort(fd)),
      recv_max_payload_(opts.limits.max_payload),
      decoder_(opts.limits) {
  read_buf_.resize(kReadChunk);
  SetSocketOptions(fd_, opts_);
}

Conn::~Conn() { close(fd_); }

std::unique_ptr<Conn> Conn::Adopt(int fd, const ConnOptions& opts) {
  return std::unique_ptr<Conn>(new Conn(fd, opts));
}

Result<std::unique_ptr<Conn>> Conn::Connect(const std::string& host, uint16_t port,
                                            int64_t timeout_ms, const ConnOptions& opts) {
  SHOAL_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host, port, /*passive=*/false));
  const auto deadline = DeadlineFrom(timeout_ms);
  std::string errors;
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    Result<int> fd = ConnectOne(ai, deadline);
    if (fd.ok()) {
      freeaddrinfo(res);
      std::unique_ptr<Conn> c = Adopt(*fd, opts);
      c->target_ = host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                                       : fmt::format("{}:{}", host, port);
      return c;
    }
    errors += fmt::format("{}{}: {}", errors.empty() ? "" : "; ", FormatAddr(ai->ai_addr),
                          fd.status().message());
  }
  freeaddrinfo(res);
  return Errorf("cannot connect to {}:{} within {} ms: {}", host, port, timeout_ms, errors);
}

Status Conn::SendLocked(std::span<const uint8_t> header, std::span<const uint8_t> payload) {
  if (seal_) return SendSealedLocked(header, payload);
  iovec iov[2] = {{const_cast<uint8_t*>(header.data()), header.size()},
                  {const_cast<uint8_t*>(payload.data()), payload.size()}};
  return WriteLocked(iov, payload.empty() ? 1 : 2);
}

Status Conn::WriteLocked(iovec* iov, int count) {
  int first = 0;
  while (first < count && iov[first].iov_len == 0) ++first;
  while (first < count) {
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = static_cast<size_t>(count - first);
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      const bool timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
      const std::string err =
          timed_out ? fmt::format("no progress for {} ms", opts_.send_timeout_ms) : Errno();
      send_failed_ = true;
      state_ = LinkState::kFailed;
      return Errorf("send to {}: {}", peer_, err);
    }
    size_t left = static_cast<size_t>(n);
    while (first < count && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < count) {
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return Status::Ok();
}

Status Conn::SendSealedLocked(std::span<const uint8_t> header, std::span<const uint8_t> payload) {
  // Header in clear (it is the AAD; its length already counts the tag), then the ciphertext in
  // kSealChunk pieces, the tag after the last: at most 3 iovecs per sendmsg.
  Status s = seal_->Begin(header);
  uint8_t tag[kAeadTagBytes];
  size_t done = 0;
  bool first = true;
  while (s.ok()) {
    const size_t take = std::min(kSealChunk, payload.size() - done);
    if (seal_buf_.size() < take) seal_buf_.resize(kSealChunk);
    s = seal_->Update(payload.data() + done, seal_buf_.data(), take);
    done += take;
    const bool last = done == payload.size();
    if (s.ok() && last) s = seal_->SealFinish(tag);
    if (!s.ok()) break;
    iovec iov[3] = {{const_cast<uint8_t*>(header.data()), first ? header.size() : 0},
                    {seal_buf_.data(), take},
                    {tag, last ? kAeadTagBytes : 0}};
    SHOAL_RETURN_IF_ERROR(WriteLocked(iov, 3));
    first = false;
    if (last) return Status::Ok();
  }
  send_failed_ = true;
  state_ = LinkState::kFailed;
  return s.Annotate("send to " + peer_);
}

Status Conn::Send(const Frame& frame) {
  uint8_t header[kMaxHeaderSize];
  SHOAL_ASSIGN_OR_RETURN(const size_t n, EncodeHeader(frame, header, opts_.limits));
  std::lock_guard lock(send_mu_);
  if (send_failed_ || state_ != LinkState::kOpen) {
    return Errorf("send to {}: link is {}", peer_, LinkStateName(state_));
  }
  if (seal_) {
    if (frame.payload.size() > UINT32_MAX - kAeadTagBytes)
      return Errorf("send to {}: {} payload too large to seal", peer_, MsgTypeName(frame.type));
    StoreLE32(header + 8, static_cast<uint32_t>(frame.payload.size() + kAeadTagBytes));
  }
  return SendLocked({header, n}, frame.payload);
}

Status Conn::SendBytes(std::span<const uint8_t> bytes) {
  std::lock_guard lock(send_mu_);
  if (send_failed_ || state_ != LinkState::kOpen) {
    return Errorf("send to {}: link is {}", peer_, LinkStateName(state_));
  }
  if (!seal_) return SendLocked(bytes, {});
  // Sealed: the bytes must be whole frames; each is sealed on its own (checked before any is
  // sent, so a bad buffer leaves the link as it was).
  struct Piece {
    uint8_t header[kMaxHeaderSize];
    size_t header_len;
    std::span<const uint8_t> payload;
  };
  std::vector<Piece> pieces;
  for (size_t pos = 0; pos < bytes.size();) {
    FrameDecoder one(opts_.limits);
    std::vector<Frame> out;
    size_t used = 0;
    Status s = one.Feed(bytes.subspan(pos), &out, 1, &used);
    if (s.ok() && out.empty()) s = Errorf("a truncated frame at byte {}", pos);
    if (!s.ok()) return s.Annotate(fmt::format("send to {}: pre-encoded bytes", peer_));
    const Frame& f = out[0];
    Piece p;
    p.header_len = WriteHeader(f.type, f.flags, f.tag,
                               static_cast<uint32_t>(f.payload.size() + kAeadTagBytes), p.header);
    p.payload = bytes.subspan(pos + used - f.payload.size(), f.payload.size());
    pieces.push_back(p);
    pos += used;
  }
  for (const Piece& p : pieces)
    SHOAL_RETURN_IF_ERROR(SendSealedLocked({p.header, p.header_len}, p.payload));
  return Status::Ok();
}

void Conn::StartSendCipher(std::unique_ptr<FrameAead> aead) {
  std::lock_guard lock(send_mu_);
  seal_ = std::move(aead);
  sealed_ = true;
}

void Conn::StartRecvCipher(std::unique_ptr<FrameAead> aead) {
  std::lock_guard lock(recv_mu_);
  open_ = std::move(aead);
  decoder_.set_max_payload(WithTag(recv_max_payload_));
}

Status Conn::OpenLocked(Frame* frame) {
  if (frame->payload.size() < kAeadTagBytes) {
    return Errorf(
        "integrity check failed on frame {} of the link: {} payload of {} bytes is "
        "shorter than its {}-byte tag",
        open_->frames(), MsgTypeName(frame->type), frame->payload.size(), kAeadTagBytes);
  }
  uint8_t header[kMaxHeaderSize];
  const size_t n = WriteHeader(frame->type, frame->flags, frame->tag,
                               static_cast<uint32_t>(frame->payload.size()), header);
  const size_t plain = frame->payload.size() - kAeadTagBytes;
  uint8_t* p = frame->payload.data();
  SHOAL_RETURN_IF_ERROR(open_->Begin({header, n}));
  SHOAL_RETURN_IF_ERROR(open_->Update(p, p, plain));
  SHOAL_RETURN_IF_ERROR(open_->OpenFinish(p + plain));
  frame->payload.resize(plain);
  return Status::Ok();
}

Status Conn::FailRecv(Status s, LinkState state) {
  recv_error_ = s;
  LinkState open = LinkState::kOpen;
  state_.compare_exchange_strong(open, state);
  return s;
}

Result<std::optional<Frame>> Conn::Recv(int64_t timeout_ms) {
  std::lock_guard lock(recv_mu_);
  const auto deadline = DeadlineFrom(timeout_ms);
  std::vector<Frame> frames;
  while (true) {
    if (!recv_error_.ok()) return recv_error_;
    if (state_ == LinkState::kShutdown) return Errorf("receive from {}: link shut down", peer_);
    if (buf_begin_ < buf_end_) {
      // One frame at a time, so a limit changed after this frame applies to the next one.
      size_t used = 0;
      const Status fed =
          decoder_.Feed({read_buf_.data() + buf_begin_, buf_end_ - buf_begin_}, &frames, 1, &used);
      buf_begin_ += used;
      if (!fed.ok()) {
        corrupt_ = true;
        return FailRecv(fed.Annotate("receive from " + peer_), LinkState::kFailed);
      }
      if (!frames.empty()) {
        if (open_) {
          if (Status s = OpenLocked(&frames[0]); !s.ok()) {
            Log(LogLevel::kWarn, "closing the link to {}: {}", peer_, s.message());
            corrupt_ = true;
            shutdown(fd_, SHUT_RDWR);  // a tampered link carries nothing more, either way
            return FailRecv(s.Annotate("receive from " + peer_), LinkState::kFailed);
          }
        }
        return std::optional<Frame>(std::move(frames[0]));
      }
    }
    buf_begin_ = buf_end_ = 0;
    pollfd p{fd_, POLLIN, 0};
    const int rc = poll(&p, 1, RemainingMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) {
      return FailRecv(Errorf("receive from {}: poll: {}", peer_, Errno()), LinkState::kFailed);
    }
    if (rc == 0) return std::optional<Frame>();
    const ssize_t n = recv(fd_, read_buf_.data(), read_buf_.size(), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (state_ == LinkState::kShutdown) continue;
      return FailRecv(Errorf("receive from {}: {}", peer_, Errno()), LinkState::kFailed);
    }
    if (n == 0) {
      if (state_ == LinkState::kShutdown) continue;
      const Status end = decoder_.Finish();
      if (!end.ok()) return FailRecv(end.Annotate("receive from " + peer_), LinkState::kFailed);
      return FailRecv(Errorf("receive from {}: connection closed by peer", peer_),
                      LinkState::kClosedByPeer);
    }
    buf_end_ = static_cast<size_t>(n);
  }
}

void Conn::Shutdown() {
  state_ = LinkState::kShutdown;
  shutdown(fd_, SHUT_RDWR);
}

void Conn::set_recv_max_payload(uint32_t max_payload) {
  std::lock_guard lock(recv_mu_);
  recv_max_payload_ = max_payload;
  decoder_.set_max_payload(open_ ? WithTag(max_payload) : max_payload);
}

Result<std::unique_ptr<Listener>> Listener::Listen(const std::string& host, uint16_t port,
                                                   const ConnOptions& opts) {
  SHOAL_ASSIGN_OR_RETURN(addrinfo * res, Resolve(host, port, /*passive=*/true));
  std::string errors;
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      errors += fmt::format("{}: socket: {}; ", FormatAddr(ai->ai_addr), Errno());
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, kListenBacklog) != 0) {
      errors += fmt::format("{}: {}; ", FormatAddr(ai->ai_addr), Errno());
      close(fd);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    const uint16_t bound = ss.ss_family == AF_INET6
                               ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                               : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    freeaddrinfo(res);
    return std::unique_ptr<Listener>(new Listener(fd, bound, opts));
  }
  freeaddrinfo(res);
  return Errorf("cannot listen on {}:{}: {}", host, port, errors);
}

Listener::~Listener() { close(fd_); }

Result<std::unique_ptr<Conn>> Listener::Accept(int64_t timeout_ms) {
  const auto deadline = DeadlineFrom(timeout_ms);
  exhausted_ = false;
  while (true) {
    pollfd p{fd_, POLLIN, 0};
    const int rc = poll(&p, 1, RemainingMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return Errorf("accept on port {}: poll: {}", port_, Errno());
    if (rc == 0) return std::unique_ptr<Conn>();
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // The connection may have been reset between poll and accept; wait for the next one.
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      exhausted_ = errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM;
      return Errorf("accept on port {}: {}{}", port_, Errno(),
                    exhausted_ ? " (out of descriptors or memory)" : "");
    }
    return Conn::Adopt(fd, opts_);
  }
}

}  // namespace shoal::net
