// Test helpers for the HTTP server: a server on a loopback port run on its own thread, and a
// blocking raw-socket client with deadlines (no HTTP library between the test and the parser).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "server/http.h"

namespace shoal::server::testing {

class TestServer {
 public:
  TestServer(HttpServerOptions opts, HttpHandler handler) {
    opts.host = "127.0.0.1";
    opts.port = 0;
    server_ = std::make_unique<HttpServer>(std::move(opts), std::move(handler));
    status_ = server_->Listen();
    if (status_.ok()) thread_ = std::thread([this] { server_->Run(); });
  }
  ~TestServer() {
    if (thread_.joinable()) {
      server_->Stop();
      thread_.join();
    }
  }
  const Status& status() const { return status_; }
  HttpServer& server() { return *server_; }
  int port() const { return server_->port(); }
  // Waits up to `ms` for the open connection count to reach `n`.
  bool WaitConnections(int64_t n, int ms = 3000) {
    for (int i = 0; i < ms / 5; ++i) {
      if (server_->n_connections() == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return server_->n_connections() == n;
  }

 private:
  std::unique_ptr<HttpServer> server_;
  Status status_;
  std::thread thread_;
};

// A connected loopback socket (closed on destruction), or fd() < 0. rcvbuf > 0 shrinks the
// receive buffer before connecting (a client that reads slowly).
class Client {
 public:
  explicit Client(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~Client() { Close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  int fd() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Sends everything (false when the server closed first).
  bool Send(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }
  // Closes with a reset (SO_LINGER 0).
  void Reset() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    Close();
  }
  // Reads until EOF, an error or `ms` milliseconds; eof() says which.
  std::string ReadAll(int ms = 5000) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    eof_ = false;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        eof_ = true;
        return out;
      }
      out.append(buf, static_cast<size_t>(n));
    }
  }
  // Reads one response with a Content-Length body (keep-alive), or "" after `ms`.
  std::string ReadResponse(int ms = 5000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      const size_t end = pending_.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t len = 0;
        const size_t cl = pending_.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) len = std::stoul(pending_.substr(cl + 16));
        if (pending_.size() >= end + 4 + len) {
          std::string r = pending_.substr(0, end + 4 + len);
          pending_.erase(0, end + 4 + len);
          return r;
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0) return "";
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[65536];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return "";
      pending_.append(buf, static_cast<size_t>(n));
    }
  }
  bool eof() const { return eof_; }

 private:
  int fd_ = -1;
  bool eof_ = false;
  std::string pending_;
};

inline std::string StatusOf(const std::string& response) {
  return response.size() >= 12 ? response.substr(9, 3) : "";
}

inline double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace shoal::server::testing
