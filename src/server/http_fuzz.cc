// libFuzzer target: raw bytes through a live HttpServer (its real parser and session) on
// loopback. Each input goes to a fresh connection, write side shut, the reply read to EOF; then
// the process must be alive, the connection count back to zero, and /health must answer 200.
//   ninja http_fuzz && bin/http_fuzz -max_len=65536 <copy of src/server/testdata/http_corpus>
// Four bytes 00 00 N C in an input expand to N x 512 copies of C, so small seeds (and
// mutations) reach the header, trailer and body limits.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "base/log.h"
#include "server/http.h"

namespace {

using shoal::server::HttpExchange;
using shoal::server::HttpRequest;
using shoal::server::HttpServer;
using shoal::server::HttpServerOptions;
using Clock = std::chrono::steady_clock;

// Every connection must end within this (the server's own deadlines are 2 s).
constexpr int kReplyDeadlineMs = 5000;
constexpr size_t kMaxExpanded = 1 << 20;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "http_fuzz: %s (errno %d: %s)\n", what, errno, std::strerror(errno));
  std::abort();
}

void Handle(HttpServer* server, const HttpRequest& r, std::shared_ptr<HttpExchange> ex) {
  if (r.target == "/throw") throw std::runtime_error("handler throws");
  if (r.target == "/stream" || r.target == "/throw-stream" || r.target == "/close") {
    ex->StartStream(200, "text/event-stream");
    ex->Write("data: " + std::to_string(r.body.size()) + "\n\n");
    if (r.target == "/throw-stream") throw std::runtime_error("handler throws mid-stream");
    if (r.target == "/close") return ex->Close();
    server->After(1, [ex] {
      ex->Write("data: [DONE]\n\n");
      ex->EndStream();
    });
    return;
  }
  ex->Respond(200, "application/json",
              "{\"target\":" + std::to_string(r.target.size()) +
                  ",\"body\":" + std::to_string(r.body.size()) + "}");
}

std::string Expand(const uint8_t* d, size_t n) {
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n && out.size() < kMaxExpanded; ++i) {
    if (i + 3 < n && d[i] == 0 && d[i + 1] == 0) {
      out.append(std::min<size_t>(size_t{d[i + 2]} * 512, kMaxExpanded - out.size()),
                 static_cast<char>(d[i + 3]));
      i += 3;
    } else {
      out += static_cast<char>(d[i]);
    }
  }
  return out;
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Fail("socket() failed");
  // Each connection leaves a TIME_WAIT entry for ~60 s (the server closes first), and entries
  // for one source address hold its ~28k ephemeral ports: a 30 s run right after the e2e tests
  // ran out of them (connect: EADDRNOTAVAIL). Rotating the source over 127.0.0.1-250, all
  // loopback, gives 250 times the room.
  static uint32_t next_source = 0;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + next_source++ % 250);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) Fail("bind() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Fail("connect() failed");
  return fd;
}

// Sends `in` (reading meanwhile, so neither side blocks), shuts the write side, reads to EOF.
std::string Exchange(int port, const std::string& in) {
  const int fd = Connect(port);
  std::string out;
  size_t sent = 0;
  bool shut = false;
  const auto deadline = Clock::now() + std::chrono::milliseconds(kReplyDeadlineMs);
  for (;;) {
    if (!shut && sent == in.size()) {
      ::shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) Fail("no EOF from the server within 5 s");
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    if (p.revents & POLLIN || p.revents & (POLLERR | POLLHUP)) {
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;  // EOF or reset: the server is done with us
      out.append(buf, static_cast<size_t>(n));
    }
    if (!shut && (p.revents & POLLOUT)) {
      const ssize_t n = ::send(fd, in.data() + sent, in.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        sent = in.size();  // the server closed early; stop sending
      }
    }
  }
  ::close(fd);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static HttpServer* server = [] {
    std::signal(SIGPIPE, SIG_IGN);
    shoal::SetLogLevel(shoal::LogLevel::kError);  // 400s and handler throws are expected here
    HttpServerOptions o;
    o.port = 0;
    o.max_body_bytes = 64 << 10;  // reachable by inputs: 413
    o.header_timeout_s = 2;
    o.keep_alive_timeout_s = 2;
    o.send_timeout_s = 2;
    static HttpServer* self = nullptr;
    self = new HttpServer(o, [](const HttpRequest& r, std::shared_ptr<HttpExchange> ex) {
      Handle(self, r, std::move(ex));
    });
    if (!self->Listen().ok()) Fail("cannot listen on 127.0.0.1");
    std::thread([] { self->Run(); }).detach();
    return self;
  }();
  static uint64_t n_inputs = 0;

  Exchange(server->port(), Expand(data, size));
  // Every connection is closed once the client has gone (lingering closes end on our EOF).
  const auto until = Clock::now() + std::chrono::seconds(3);
  while (server->n_connections() != 0) {
    if (Clock::now() > until) Fail("connection count did not return to 0");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (++n_inputs % 64 == 1) {
    const std::string r = Exchange(server->port(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    if (r.compare(0, 12, "HTTP/1.1 200") != 0) Fail("GET /health did not answer 200");
  }
  return 0;
}
