// The HTTP server's shared internals: HttpServer::Impl (io context, acceptor, TLS context,
// counters) and the session entry points, for http_server.cc and http_session.cc only.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange without it
// clang-format on
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>

#include "server/http.h"

namespace shoal::server {

class HttpConn;  // one connection (http_session.cc)

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// Logs at most one line per interval; the line counts the calls it stood for.
class RateLimitedLog {
 public:
  // Returns how many calls were suppressed since the last line, or -1 to stay silent now.
  int64_t Tick(std::chrono::steady_clock::duration interval = std::chrono::seconds(1));

 private:
  std::chrono::steady_clock::time_point last_{};
  int64_t suppressed_ = 0;
  bool logged_ = false;
};

struct HttpServer::Impl {
  // Sessions use these: declared before ioc, so they outlive the sessions ioc's destructor
  // drops.
  HttpServerOptions opts;
  HttpHandler handler;
  std::unique_ptr<asio::ssl::context> tls;  // set when opts name a certificate and key
  std::atomic<int64_t> n_conn{0};
  std::atomic<int64_t> n_handler_exceptions{0};

  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_pause{ioc};
  asio::signal_set signals{ioc};
  asio::executor_work_guard<asio::io_context::executor_type> work{ioc.get_executor()};
  // Every open connection. This, not its exchange, owns it: a handler may hold an exchange past
  // the connection and the server, and the connection's Asio objects must go before ioc.
  std::unordered_set<std::shared_ptr<HttpConn>> conns;
  int bound_port = 0;
  int accept_backoff_ms = 0;
  RateLimitedLog accept_log, refuse_log;
  std::function<void(int)> on_signal;

  void Accept();
  void OnAcceptError(const boost::system::error_code& ec);
  void Refuse(tcp::socket sock);
  Status LoadTls();
  void WaitSignal();
};

// Starts serving one accepted connection (plain or TLS); the session counts itself in n_conn.
void StartPlainSession(tcp::socket sock, HttpServer::Impl* srv);
void StartTlsSession(tcp::socket sock, HttpServer::Impl* srv);

}  // namespace shoal::server
