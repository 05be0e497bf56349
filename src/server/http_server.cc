// HttpServer: the listening socket, accept loop (connection cap, back-off on descriptor
// exhaustion), TLS context, signals and the io loop; connections live in http_session.cc.
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>

#include "base/log.h"
#include "server/http_internal.h"

namespace shoal::server {

namespace ssl = asio::ssl;
using error_code = boost::system::error_code;

namespace {

// Accept errors that mean "out of descriptors or memory" pause accepting: 100 ms, doubling to
// 1 s while they last (a retry at once spins a core and floods the log), reset by a success.
constexpr int kAcceptBackoffMinMs = 100;
constexpr int kAcceptBackoffMaxMs = 1000;

// What a connection past max_connections reads before the close.
constexpr std::string_view kBusyBody =
    R"({"error":{"message":"too many connections","type":"server_error","param":null,"code":null}})";
static_assert(kBusyBody.size() == 91, "kBusyHead's Content-Length");
constexpr std::string_view kBusyHead =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    "Content-Length: 91\r\nRetry-After: 1\r\nConnection: close\r\n\r\n";

// OpenSSL's own words for an ssl error ("asio.ssl error" says nothing).
std::string TlsError(const error_code& ec) {
  if (ec.category() != asio::error::get_ssl_category()) return ec.message();
  const auto e = static_cast<unsigned long>(ec.value());
  ERR_clear_error();
  if (ERR_SYSTEM_ERROR(e)) return std::strerror(ERR_GET_REASON(e));  // e.g. ENOENT
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace

std::string HttpRequest::Header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return "";
}

int64_t RateLimitedLog::Tick(std::chrono::steady_clock::duration interval) {
  const auto now = std::chrono::steady_clock::now();
  if (logged_ && now - last_ < interval) {
    ++suppressed_;
    return -1;
  }
  logged_ = true;
  last_ = now;
  const int64_t n = suppressed_;
  suppressed_ = 0;
  return n;
}

void HttpServer::Impl::WaitSignal() {
  signals.async_wait([this](error_code ec, int sig) {
    if (ec) return;
    if (on_signal) on_signal(sig);
    WaitSignal();
  });
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket sock) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      OnAcceptError(ec);
      return;
    }
    accept_backoff_ms = 0;
    try {
      error_code ignored;
      sock.set_option(tcp::no_delay(true), ignored);  // SSE tokens must not wait for Nagle
      if (opts.max_connections > 0 && n_conn.load() >= opts.max_connections) {
        Refuse(std::move(sock));
      } else if (tls) {
        StartTlsSession(std::move(sock), this);
      } else {
        StartPlainSession(std::move(sock), this);
      }
    } catch (const std::exception& e) {
      Log(LogLevel::kWarn, "http: dropping a new connection: {}", e.what());
    }
    Accept();
  });
}

void HttpServer::Impl::OnAcceptError(const error_code& ec) {
  const int64_t suppressed = accept_log.Tick();
  // Per-connection failures (the client reset before we accepted it): accept the next at once.
  const bool per_connection = ec == asio::error::connection_aborted ||
                              ec == asio::error::interrupted || ec == asio::error::try_again ||
                              ec == asio::error::would_block || ec.value() == EPROTO ||
                              ec.value() == EPERM;
  if (per_connection) {
    if (suppressed >= 0)
      Log(LogLevel::kWarn, "accept: {} ({} more not logged)", ec.message(), suppressed);
    Accept();
    return;
  }
  // EMFILE, ENFILE, ENOBUFS, ENOMEM and anything unexpected: pause, then try again.
  accept_backoff_ms = accept_backoff_ms == 0 ? kAcceptBackoffMinMs
                                             : std::min(accept_backoff_ms * 2, kAcceptBackoffMaxMs);
  if (suppressed >= 0)
    Log(LogLevel::kWarn, "accept: {} ({} more not logged); pausing accepts for {} ms", ec.message(),
        suppressed, accept_backoff_ms);
  accept_pause.expires_after(std::chrono::milliseconds(accept_backoff_ms));
  accept_pause.async_wait([this](error_code wait_ec) {
    if (!wait_ec && acceptor.is_open()) Accept();
  });
}

// Bounded work for a connection over the cap: one non-blocking write, one non-blocking read of
// what the client already sent (so the close is a FIN, not a reset), close.
void HttpServer::Impl::Refuse(tcp::socket sock) {
  const int64_t suppressed = refuse_log.Tick();
  if (suppressed >= 0)
    Log(LogLevel::kWarn, "http: refusing connections: {} open, max_connections {} ({} more)",
        n_conn.load(), opts.max_connections, suppressed);
  error_code ec;
  sock.non_blocking(true, ec);
  const std::array<asio::const_buffer, 2> busy = {asio::buffer(kBusyHead.data(), kBusyHead.size()),
                                                  asio::buffer(kBusyBody.data(), kBusyBody.size())};
  sock.write_some(busy, ec);
  char sink[4096];
  sock.read_some(asio::buffer(sink), ec);
  sock.shutdown(tcp::socket::shutdown_both, ec);
  sock.close(ec);
}

Status HttpServer::Impl::LoadTls() {
  const bool has_cert = !opts.ssl_certfile.empty(), has_key = !opts.ssl_keyfile.empty();
  if (!has_cert && !has_key) return Status::Ok();
  if (!has_cert || !has_key)
    return Errorf("TLS needs both a certificate file and a key file (got only the {})",
                  has_cert ? "certificate" : "key");
  try {
    auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::single_dh_use);
    if (SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION) != 1)
      return Errorf("TLS setup failed: cannot require TLS 1.2");
    error_code ec;
    ctx->use_certificate_chain_file(opts.ssl_certfile, ec);
    if (ec) return Errorf("cannot load TLS certificate '{}': {}", opts.ssl_certfile, TlsError(ec));
    ctx->use_private_key_file(opts.ssl_keyfile, ssl::context::pem, ec);
    if (ec) return Errorf("cannot load TLS private key '{}': {}", opts.ssl_keyfile, TlsError(ec));
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
      return Errorf("TLS private key '{}' does not match certificate '{}'", opts.ssl_keyfile,
                    opts.ssl_certfile);
    tls = std::move(ctx);
  } catch (const std::exception& e) {
    return Errorf("TLS setup failed: {}", e.what());
  }
  return Status::Ok();
}

HttpServer::HttpServer(HttpServerOptions opts, HttpHandler handler) : impl_(new Impl) {
  impl_->opts = std::move(opts);
  impl_->handler = std::move(handler);
}

HttpServer::~HttpServer() = default;

Status HttpServer::Listen() {
  SHOAL_RETURN_IF_ERROR(impl_->LoadTls());
  error_code ec;
  const auto addr = asio::ip::make_address(impl_->opts.host, ec);
  if (ec) return Errorf("bad listen address '{}': {}", impl_->opts.host, ec.message());
  const tcp::endpoint ep(addr, static_cast<uint16_t>(impl_->opts.port));
  auto& a = impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  // A backlog of 4096 lets a burst of 1,000+ clients connect at once (the kernel caps it at
  // net.core.somaxconn).
  if (!ec) a.listen(4096, ec);
  if (ec)
    return Errorf("cannot listen on {}:{}: {}", impl_->opts.host, impl_->opts.port, ec.message());
  impl_->bound_port = a.local_endpoint().port();
  impl_->Accept();
  return Status::Ok();
}

int HttpServer::port() const { return impl_->bound_port; }

// Completions guard themselves; this catches what still escapes (a Post or After callback),
// logs it and goes on: one bad callback must not take the process and its streams down.
void HttpServer::Run() {
  for (;;) {
    try {
      impl_->ioc.run();
      return;
    } catch (const std::exception& e) {
      Log(LogLevel::kError, "http: an exception escaped to the io loop (continuing): {}", e.what());
    } catch (...) {
      Log(LogLevel::kError, "http: a non-exception escaped to the io loop (continuing)");
    }
  }
}

void HttpServer::Post(std::function<void()> fn) { asio::post(impl_->ioc, std::move(fn)); }

void HttpServer::After(int ms, std::function<void()> fn) {
  auto t = std::make_shared<asio::steady_timer>(impl_->ioc, std::chrono::milliseconds(ms));
  t->async_wait([t, fn = std::move(fn)](error_code ec) {
    if (!ec) fn();
  });
}

void HttpServer::OnSignal(std::function<void(int)> fn) {
  error_code ec;
  impl_->signals.add(SIGTERM, ec);
  impl_->signals.add(SIGINT, ec);
  impl_->on_signal = std::move(fn);
  impl_->WaitSignal();
}

void HttpServer::StopAccepting() {
  Post([this] {
    error_code ignored;
    impl_->acceptor.close(ignored);
    impl_->accept_pause.cancel();
  });
}

void HttpServer::Stop() {
  impl_->work.reset();
  error_code ignored;
  impl_->signals.cancel(ignored);
  impl_->ioc.stop();
}

int64_t HttpServer::n_connections() const { return impl_->n_conn.load(); }

int64_t HttpServer::n_handler_exceptions() const { return impl_->n_handler_exceptions.load(); }

}  // namespace shoal::server
