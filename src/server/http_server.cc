// HttpServer on Boost.Beast: one io_context thread, a session per connection, raw chunked
// writes for streams. Nothing here throws out: Asio errors arrive as error codes.
// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange without it
// clang-format on
#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <deque>
#include <optional>

#include "base/log.h"
#include "server/http.h"

namespace shoal::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string HttpRequest::Header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return "";
}

namespace {

std::string StatusLine(int status) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
}

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions opts;
  HttpHandler handler;
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::signal_set signals{ioc};
  asio::executor_work_guard<asio::io_context::executor_type> work{ioc.get_executor()};
  std::atomic<int64_t> n_conn{0};
  int bound_port = 0;
  std::function<void(int)> on_signal;

  void Accept();
  void WaitSignal() {
    signals.async_wait([this](beast::error_code ec, int sig) {
      if (ec) return;
      if (on_signal) on_signal(sig);
      WaitSignal();
    });
  }
};

namespace {

class Session;

class Exchange final : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Session> s, bool keep_alive)
      : s_(std::move(s)), keep_alive_(keep_alive) {}
  void Respond(int status, const std::string& content_type, std::string body,
               const Headers& extra) override;
  void StartStream(int status, const std::string& content_type) override;
  void Write(std::string data) override;
  void EndStream() override;
  void OnClose(std::function<void()> fn) override { on_close_ = std::move(fn); }
  void Close() override;
  size_t buffered_bytes() const override;
  void OnDrained(std::function<void()> fn) override { on_drained_ = std::move(fn); }
  void NotifyDrained() {
    if (on_drained_ && !done_ && !closed_) on_drained_();
  }
  bool closed() const override { return closed_; }

  void NotifyClosed() {
    if (closed_ || done_) return;
    closed_ = true;
    if (on_close_) {
      auto fn = std::move(on_close_);
      on_close_ = nullptr;
      fn();
    }
  }

 private:
  std::shared_ptr<Session> s_;
  bool keep_alive_;
  bool started_ = false, done_ = false, closed_ = false;
  std::function<void()> on_close_;
  std::function<void()> on_drained_;
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket sock, HttpServer::Impl* srv) : stream_(std::move(sock)), srv_(srv) {
    ++srv_->n_conn;
  }
  ~Session() { --srv_->n_conn; }

  void Start() { DoRead(); }

  // Queues bytes; after the queue drains, `then` runs: 0 nothing, 1 read next request, 2 close.
  void Send(std::string data, int then) {
    if (dead_) return;
    queued_bytes_ += data.size();
    queue_.push_back(std::move(data));
    if (then != 0) after_ = then;
    if (!writing_) DoWrite();
  }
  bool dead() const { return dead_; }
  size_t queued_bytes() const { return queued_bytes_; }
  // Discards what is queued and closes the socket (a client that stopped reading).
  void Abort() {
    // A pending async_write still reads the front string: keep it until OnWrite sees the error.
    while (queue_.size() > (writing_ ? 1u : 0u)) {
      queued_bytes_ -= queue_.back().size();
      queue_.pop_back();
    }
    exchange_.reset();
    Close();
  }

 private:
  void DoRead() {
    parser_.emplace();
    parser_->body_limit(srv_->opts.max_body_bytes);
    parser_->header_limit(64 * 1024);  // 64 KiB of headers: far above any real client's
    stream_.expires_after(std::chrono::seconds(srv_->opts.idle_timeout_s));
    http::async_read(
        stream_, buf_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    stream_.expires_never();
    if (ec == http::error::body_limit) {
      Reject(413,
             "request body larger than " + std::to_string(srv_->opts.max_body_bytes) + " bytes");
      return;
    }
    if (ec == http::error::header_limit) {
      Reject(431, "request headers too large");
      return;
    }
    if (ec) {
      // EOF, timeout, reset: just close. A malformed request gets a 400 first.
      if (ec.category() == http::make_error_code(http::error::end_of_stream).category() &&
          ec != http::error::end_of_stream && ec != http::error::partial_message) {
        Reject(400, "malformed HTTP request: " + ec.message());
        return;
      }
      Close();
      return;
    }
    const auto& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    std::string target(msg.target());
    const size_t q = target.find('?');
    if (q != std::string::npos) {
      req.query = target.substr(q + 1);
      target.resize(q);
    }
    req.target = std::move(target);
    for (const auto& f : msg)
      req.headers.emplace_back(
          Lower(std::string_view(f.name_string().data(), f.name_string().size())),
          std::string(f.value()));
    req.body = std::move(parser_->get().body());
    const bool keep_alive = msg.keep_alive();
    exchange_ = std::make_shared<Exchange>(shared_from_this(), keep_alive);
    WatchClose();
    srv_->handler(req, exchange_);
  }

  // Detects a client that hangs up while its request is being answered: a peek that completes
  // with EOF (or an error) means the peer is gone. Pipelined data ends the watch harmlessly.
  void WatchClose() {
    const uint64_t gen = ++watch_gen_;
    stream_.socket().async_receive(
        asio::buffer(&peek_, 1), tcp::socket::message_peek,
        [self = shared_from_this(), gen](beast::error_code ec, size_t n) {
          if (gen != self->watch_gen_ || ec == asio::error::operation_aborted) return;
          if (ec || n == 0) {
            self->dead_ = true;
            if (self->exchange_) self->exchange_->NotifyClosed();
            self->exchange_.reset();
            beast::error_code ignored;
            self->stream_.socket().close(ignored);
          }
        });
  }

  void Reject(int status, const std::string& message) {
    const std::string body = R"({"error":{"message":")" + message +
                             R"(","type":"invalid_request_error","param":null,"code":null}})";
    Send(StatusLine(status) + "Content-Type: application/json\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body,
         2);
  }

  void DoWrite() {
    writing_ = true;
    asio::async_write(
        stream_, asio::buffer(queue_.front()),
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnWrite(ec); });
  }

  void OnWrite(beast::error_code ec) {
    writing_ = false;
    if (ec) {
      dead_ = true;
      if (exchange_) exchange_->NotifyClosed();
      exchange_.reset();
      queue_.clear();
      queued_bytes_ = 0;
      Close();
      return;
    }
    queued_bytes_ -= queue_.front().size();
    queue_.pop_front();
    if (!queue_.empty()) {
      DoWrite();
      return;
    }
    if (exchange_) exchange_->NotifyDrained();
    if (dead_ || writing_ || !queue_.empty()) return;  // the callback wrote or closed
    const int then = after_;
    after_ = 0;
    if (then == 1) {
      exchange_.reset();
      ++watch_gen_;
      beast::error_code ignored;
      stream_.socket().cancel(ignored);  // ends the close watch (no write is pending now)
      DoRead();
    } else if (then == 2) {
      exchange_.reset();
      Close();
    }
  }

  void Close() {
    dead_ = true;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  HttpServer::Impl* srv_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<Exchange> exchange_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;  // sum of queue_'s sizes
  bool writing_ = false, dead_ = false;
  int after_ = 0;
  uint64_t watch_gen_ = 0;
  char peek_ = 0;
};

void Exchange::Respond(int status, const std::string& content_type, std::string body,
                       const Headers& extra) {
  if (done_ || started_) return;
  done_ = true;
  on_close_ = nullptr;
  std::string head = StatusLine(status);
  head += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n";
  for (const auto& [k, v] : extra) head += k + ": " + v + "\r\n";
  head += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  s_->Send(head + body, keep_alive_ ? 1 : 2);
}

void Exchange::StartStream(int status, const std::string& content_type) {
  if (done_ || started_) return;
  started_ = true;
  s_->Send(StatusLine(status) + "Content-Type: " + content_type +
               "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n" +
               (keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n"),
           0);
}

void Exchange::Write(std::string data) {
  if (done_ || !started_ || data.empty()) return;
  char hex[20];
  std::snprintf(hex, sizeof hex, "%zx\r\n", data.size());
  s_->Send(std::string(hex) + data + "\r\n", 0);
}

size_t Exchange::buffered_bytes() const { return s_->queued_bytes(); }

void Exchange::Close() {
  if (done_ || closed_) return;
  done_ = closed_ = true;
  on_close_ = nullptr;
  s_->Abort();
}

void Exchange::EndStream() {
  if (done_ || !started_) return;
  done_ = true;
  on_close_ = nullptr;
  s_->Send("0\r\n\r\n", keep_alive_ ? 1 : 2);
}

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket sock) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      sock.set_option(tcp::no_delay(true), ignored);  // SSE tokens must not wait for Nagle
      std::make_shared<Session>(std::move(sock), this)->Start();
    } else {
      Log(LogLevel::kWarn, "accept: {}", ec.message());
    }
    Accept();
  });
}

HttpServer::HttpServer(HttpServerOptions opts, HttpHandler handler) : impl_(new Impl) {
  impl_->opts = std::move(opts);
  impl_->handler = std::move(handler);
}

HttpServer::~HttpServer() = default;

Status HttpServer::Listen() {
  beast::error_code ec;
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

void HttpServer::Run() { impl_->ioc.run(); }

void HttpServer::Post(std::function<void()> fn) { asio::post(impl_->ioc, std::move(fn)); }

void HttpServer::After(int ms, std::function<void()> fn) {
  auto t = std::make_shared<asio::steady_timer>(impl_->ioc, std::chrono::milliseconds(ms));
  t->async_wait([t, fn = std::move(fn)](beast::error_code ec) {
    if (!ec) fn();
  });
}

void HttpServer::OnSignal(std::function<void(int)> fn) {
  beast::error_code ec;
  impl_->signals.add(SIGTERM, ec);
  impl_->signals.add(SIGINT, ec);
  impl_->on_signal = std::move(fn);
  impl_->WaitSignal();
}

void HttpServer::StopAccepting() {
  Post([this] {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
  });
}

void HttpServer::Stop() {
  impl_->work.reset();
  beast::error_code ignored;
  impl_->signals.cancel(ignored);
  impl_->ioc.stop();
}

int64_t HttpServer::n_connections() const { return impl_->n_conn.load(); }

}  // namespace shoal::server
