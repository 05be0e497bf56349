// HTTP/1.1 connections: one Session per socket (plain or TLS, one template): request reads
// with deadlines, the answer's write queue (backpressure), the half-close watch.
// Nothing escapes: Asio reports error codes, and every completion runs inside Guard().
// clang-format off
#include <utility>  // first: Boost 1.74's asio/awaitable.hpp uses std::exchange without it
// clang-format on
#include <algorithm>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <cctype>
#include <cstdio>
#include <deque>
#include <optional>
#include <type_traits>
#include <vector>

#include "base/log.h"
#include "server/http_exchange.h"
#include "server/http_internal.h"
#include "server/http_parser.h"

namespace shoal::server {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using error_code = boost::system::error_code;

// 64 KiB of header fields (and, separately, of trailer fields): far above any real client's.
constexpr size_t kHeaderLimit = 64 * 1024;
// The read buffer holds a whole header block plus one 16 KiB read; Beast buffers a trailer
// whole, so this also bounds it (a longer one fails with buffer_overflow -> 431).
constexpr size_t kReadBufferMax = kHeaderLimit + 16 * 1024;
// The first read of a keep-alive request: one typical request line plus headers.
constexpr size_t kFirstRead = 4096;
// After an answer with Connection: close, unread request bytes are drained for up to 2 s or
// 1 MiB before the socket closes, so the client reads the answer instead of a reset.
constexpr int kLingerSeconds = 2;
constexpr size_t kLingerMaxBytes = 1 << 20;
// Queued pieces per write call: 16 SSE chunks of a burst go out in one syscall.
constexpr size_t kMaxWriteBuffers = 16;

// Which deadline the connection's one timer stands for.
enum class Phase { kNone, kHandshake, kIdle, kRequest, kSend, kLinger };

template <class Stream>
class Session final : public HttpConn {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  template <class... A>
  Session(HttpServer::Impl* srv, A&&... stream_args)
      : stream_(std::forward<A>(stream_args)...),
        srv_(srv),
        timer_(Sock().get_executor()),
        buf_(kReadBufferMax) {
    ++srv_->n_conn;
  }
  ~Session() override {
    if (!dead_) CloseSocket();
  }

  void Start() {
    Arm(srv_->opts.header_timeout_s, kTls ? Phase::kHandshake : Phase::kRequest);
    if constexpr (kTls) {
      stream_.async_handshake(ssl::stream_base::server, [self = Self()](const error_code& ec) {
        self->Guard([&] { self->OnHandshake(ec); });
      });
    } else {
      DoRead(true);
    }
  }

  void Send(std::string data, Then then) override {
    if (dead_) return;
    if (!data.empty()) {
      buffered_ += data.size();
      queue_.push_back(std::move(data));
    }
    if (then != Then::kNothing) after_ = then;
    if (writing_) return;
    if (!queue_.empty()) {
      DoWrite();
    } else if (then != Then::kNothing) {
      AfterDrain();
    }
  }
  size_t buffered_bytes() const override { return buffered_; }
  bool last_request() const override { return read_closed_ && buf_.size() == 0; }
  void Abort(std::string_view why) override {
    if (dead_) return;
    Log(LogLevel::kDebug, "http: closing a connection: {}", why);
    Close();
  }

 private:
  std::shared_ptr<Session> Self() { return std::static_pointer_cast<Session>(shared_from_this()); }
  tcp::socket& Sock() {
    if constexpr (kTls) {
      return stream_.next_layer();
    } else {
      return stream_;
    }
  }

  // Runs one completion; an exception closes this connection only.
  template <class F>
  void Guard(F&& f) {
    try {
      f();
    } catch (const std::exception& e) {
      Log(LogLevel::kWarn, "http: closing a connection after an exception: {}", e.what());
      Close();
    } catch (...) {
      Log(LogLevel::kWarn, "http: closing a connection after a non-exception throw");
      Close();
    }
  }

  // One deadline at a time; Arm replaces it (seconds <= 0: none).
  void Arm(int seconds, Phase p) { ArmMs(int64_t{seconds} * 1000, p); }
  void ArmMs(int64_t ms, Phase p) {
    phase_ = p;
    const uint64_t gen = ++arm_gen_;
    if (ms <= 0) {
      timer_.cancel();
      return;
    }
    timer_.expires_after(std::chrono::milliseconds(ms));
    timer_.async_wait([self = Self(), gen](const error_code& ec) {
      if (ec || gen != self->arm_gen_ || self->dead_) return;
      self->Guard([&] { self->OnTimeout(); });
    });
  }
  void Disarm() {
    ++arm_gen_;
    phase_ = Phase::kNone;
    timer_.cancel();
  }
  void OnTimeout() {
    switch (phase_) {
      case Phase::kRequest: {
        // Ends the pending read; OnRead answers 408 when part of a request came.
        timed_out_ = true;
        error_code ignored;
        Sock().cancel(ignored);
        break;
      }
      case Phase::kSend: {
        // Armed once per busy period; the window restarts with each write call.
        if (!writing_) {
          phase_ = Phase::kNone;
          break;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            write_started_ + std::chrono::seconds(srv_->opts.send_timeout_s) -
            std::chrono::steady_clock::now());
        if (left.count() > 0) {
          ArmMs(left.count() + 1, Phase::kSend);
        } else {
          Abort("send timeout: the client stopped reading");
        }
        break;
      }
      default:  // handshake, idle keep-alive, linger: nothing to answer
        Close();
        break;
    }
  }

  void OnHandshake(const error_code& ec) {
    if (dead_) return;
    if (ec) {
      Log(LogLevel::kDebug, "http: TLS handshake failed: {}", ec.message());
      Close();
      return;
    }
    phase_ = Phase::kRequest;  // the handshake and the first request share one deadline
    DoRead(true);
  }

  // Reads the next request: the first one under the deadline armed at connect; later ones
  // wait up to keep_alive_timeout_s for a first byte, then header_timeout_s for the rest.
  void DoRead(bool first) {
    if (dead_) return;
    parser_.emplace(srv_->opts.max_body_bytes, kHeaderLimit);
    timed_out_ = false;
    if (first) {
      ReadRequest();
    } else if (buf_.size() > 0) {
      Arm(srv_->opts.header_timeout_s, Phase::kRequest);
      ReadRequest();
    } else if (read_closed_) {
      Close();
    } else {
      buf_.shrink_to_fit();  // an idle connection holds no buffer
      Arm(srv_->opts.keep_alive_timeout_s, Phase::kIdle);
      stream_.async_read_some(buf_.prepare(kFirstRead),
                              [self = Self()](const error_code& ec, size_t n) {
                                self->Guard([&] { self->OnFirstBytes(ec, n); });
                              });
    }
  }
  void OnFirstBytes(const error_code& ec, size_t n) {
    if (dead_) return;
    buf_.commit(n);
    if (ec) {  // EOF or reset between requests
      Close();
      return;
    }
    Arm(srv_->opts.header_timeout_s, Phase::kRequest);
    ReadRequest();
  }
  // Headers first: a client that sent `Expect: 100-continue` (curl does for bodies over 1 KiB)
  // waits for a 100 before its body, or ~1 s without one; a refusal (e.g. 413) goes out at once.
  void ReadRequest() {
    http::async_read_header(stream_, buf_, *parser_, [self = Self()](const error_code& ec, size_t) {
      self->Guard([&] { self->OnHeader(ec); });
    });
  }
  void OnHeader(const error_code& ec) {
    if (dead_) return;
    if (ec || parser_->is_done()) {
      OnRead(ec);
      return;
    }
    std::string expect = parser_->request().Header("expect");
    for (char& c : expect) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (expect != "100-continue") {
      ReadBody();
      return;
    }
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(stream_, asio::buffer(kContinue, sizeof(kContinue) - 1),
                      [self = Self()](const error_code& wec, size_t) {
                        self->Guard([&] {
                          if (wec) {
                            self->Close();
                          } else {
                            self->ReadBody();
                          }
                        });
                      });
  }
  void ReadBody() {
    http::async_read(stream_, buf_, *parser_, [self = Self()](const error_code& ec, size_t) {
      self->Guard([&] { self->OnRead(ec); });
    });
  }

  void OnRead(const error_code& ec) {
    if (dead_) return;
    Disarm();
    if (ec) {
      OnReadError(ec);
      return;
    }
    HttpRequest req = std::move(parser_->request());
    const bool keep_alive = parser_->keep_alive();
    parser_.reset();
    auto ex = std::make_shared<HttpExchangeImpl>(Self(), keep_alive);
    exchange_ = ex;
    WatchClose();
    try {
      srv_->handler(req, ex);
    } catch (const std::exception& e) {
      ++srv_->n_handler_exceptions;
      Log(LogLevel::kWarn, "http: {} {}: the handler threw: {}", req.method, req.target, e.what());
      ex->Fail();
    } catch (...) {
      ++srv_->n_handler_exceptions;
      Log(LogLevel::kWarn, "http: {} {}: the handler threw a non-exception", req.method,
          req.target);
      ex->Fail();
    }
  }

  void OnReadError(const error_code& ec) {
    if (timed_out_) {
      if (parser_->got_some() || buf_.size() > 0) {
        Reject(408,
               "request not received within " + std::to_string(srv_->opts.header_timeout_s) + " s");
      } else {
        Close();
      }
      return;
    }
    if (parser_->reject_status() != 0) {
      Reject(parser_->reject_status(), parser_->reject_reason());
    } else if (ec == http::error::body_limit) {
      Reject(413,
             "request body larger than " + std::to_string(srv_->opts.max_body_bytes) + " bytes");
    } else if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      Reject(431, "request headers too large");
    } else if (ec == http::error::end_of_stream) {
      Close();  // the client hung up between requests
    } else if (ec == http::error::partial_message) {
      read_closed_ = true;
      Reject(400, "incomplete request: the client closed its side");
    } else if (&ec.category() == &http::make_error_code(http::error::end_of_stream).category()) {
      Reject(400, "malformed HTTP request: " + ec.message());
    } else {
      Close();  // reset, TLS error
    }
  }

  // Watches a client while its request is answered: a peek that ends with EOF means it shut
  // its write side (the answer still goes out, then the connection closes); an error means it
  // is gone. Pipelined bytes end the watch harmlessly; a failed write notices a gone client.
  void WatchClose() {
    const uint64_t gen = ++watch_gen_;
    watching_ = true;
    Sock().async_receive(asio::buffer(&peek_, 1), tcp::socket::message_peek,
                         [self = Self(), gen](const error_code& ec, size_t n) {
                           self->Guard([&] { self->OnWatch(gen, ec, n); });
                         });
  }
  void OnWatch(uint64_t gen, const error_code& ec, size_t n) {
    if (gen != watch_gen_ || dead_ || ec == asio::error::operation_aborted) return;
    watching_ = false;
    if (!ec && n > 0) return;
    if (!ec || ec == asio::error::eof) {
      read_closed_ = true;
      return;
    }
    Abort("client gone: " + ec.message());
  }
  void EndWatch() {
    if (!watching_) return;
    watching_ = false;
    ++watch_gen_;
    error_code ignored;
    Sock().cancel(ignored);  // no write is pending when this runs
  }

  void Reject(int status, const std::string& message) {
    Log(LogLevel::kDebug, "http: answering {}: {}", status, message);
    const std::string body = HttpErrorJson(message, status);
    Send(HttpStatusLine(status) + "Content-Type: application/json\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body,
         Then::kClose);
  }

  void DoWrite() {
    writing_ = true;
    write_bufs_.clear();
    for (const std::string& s : queue_) {
      if (write_bufs_.size() == kMaxWriteBuffers) break;
      write_bufs_.push_back(asio::buffer(s) + (write_bufs_.empty() ? front_off_ : 0));
    }
    // The send deadline measures progress: each write call must complete within it. The timer
    // is armed once and re-armed from OnTimeout, not once per write (one per SSE token).
    write_started_ = std::chrono::steady_clock::now();
    if (srv_->opts.send_timeout_s > 0 && phase_ != Phase::kSend)
      Arm(srv_->opts.send_timeout_s, Phase::kSend);
    stream_.async_write_some(write_bufs_, [self = Self()](const error_code& ec, size_t n) {
      self->Guard([&] { self->OnWrite(ec, n); });
    });
  }
  void OnWrite(const error_code& ec, size_t n) {
    writing_ = false;
    if (dead_) {
      queue_.clear();
      return;
    }
    if (ec) {
      Abort("write failed: " + ec.message());
      return;
    }
    buffered_ -= n;
    while (!queue_.empty()) {
      const size_t avail = queue_.front().size() - front_off_;
      if (n < avail) {
        front_off_ += n;
        break;
      }
      n -= avail;
      queue_.pop_front();
      front_off_ = 0;
    }
    if (!queue_.empty()) {
      DoWrite();
      return;
    }
    AfterDrain();  // a kSend deadline left armed expires harmlessly (nothing is writing)
  }
  void AfterDrain() {
    const Then then = after_;
    after_ = Then::kNothing;
    if (then == Then::kNextRequest) {
      exchange_.reset();
      EndWatch();
      DoRead(false);
    } else if (then == Then::kClose) {
      exchange_.reset();
      EndWatch();
      Linger();
    } else if (exchange_) {
      auto ex = exchange_;
      ex->NotifyDrained();
    }
  }

  // Closes after the last answer: our side first, then drain what the client still sends.
  void Linger() {
    Arm(kLingerSeconds, Phase::kLinger);
    if constexpr (kTls) {
      stream_.async_shutdown(
          [self = Self()](const error_code&) { self->Guard([&] { self->Close(); }); });
    } else {
      error_code ignored;
      Sock().shutdown(tcp::socket::shutdown_send, ignored);
      if (read_closed_) {
        Close();
        return;
      }
      buf_.consume(buf_.size());
      LingerRead();
    }
  }
  void LingerRead() {
    Sock().async_read_some(buf_.prepare(kFirstRead),
                           [self = Self()](const error_code& ec, size_t n) {
                             self->Guard([&] {
                               if (self->dead_) return;
                               self->lingered_ += n;
                               if (ec || self->lingered_ >= kLingerMaxBytes) {
                                 self->Close();
                               } else {
                                 self->LingerRead();
                               }
                             });
                           });
  }

  void CloseSocket() {
    error_code ignored;
    Sock().shutdown(tcp::socket::shutdown_both, ignored);
    Sock().close(ignored);
    --srv_->n_conn;
  }
  // Idempotent; an open exchange hears OnClose.
  void Close() {
    if (dead_) return;
    auto keep = Self();  // the registry may hold the last reference
    srv_->conns.erase(keep);
    dead_ = true;
    ++arm_gen_;
    timer_.cancel();
    // A pending write still reads the pieces it was given: they go when it completes.
    if (writing_) {
      queue_.resize(std::min(queue_.size(), write_bufs_.size()));
    } else {
      queue_.clear();
    }
    buffered_ = 0;
    CloseSocket();
    if (auto ex = std::move(exchange_)) ex->NotifyClosed();
  }

  Stream stream_;
  HttpServer::Impl* srv_;
  asio::steady_timer timer_;
  Phase phase_ = Phase::kNone;
  uint64_t arm_gen_ = 0;
  std::chrono::steady_clock::time_point write_started_{};
  beast::flat_buffer buf_;
  std::optional<RequestParser> parser_;
  std::shared_ptr<HttpExchangeImpl> exchange_;
  std::deque<std::string> queue_;
  std::vector<asio::const_buffer> write_bufs_;
  size_t front_off_ = 0;  // bytes of queue_.front() already written
  size_t buffered_ = 0;   // bytes in queue_ not yet written
  size_t lingered_ = 0;
  Then after_ = Then::kNothing;
  bool writing_ = false, dead_ = false, read_closed_ = false, timed_out_ = false;
  bool watching_ = false;
  uint64_t watch_gen_ = 0;
  char peek_ = 0;
};

}  // namespace

void StartPlainSession(tcp::socket sock, HttpServer::Impl* srv) {
  auto s = std::make_shared<Session<tcp::socket>>(srv, std::move(sock));
  srv->conns.insert(s);
  s->Start();
}

void StartTlsSession(tcp::socket sock, HttpServer::Impl* srv) {
  auto s = std::make_shared<Session<ssl::stream<tcp::socket>>>(srv, std::move(sock), *srv->tls);
  srv->conns.insert(s);
  s->Start();
}

}  // namespace shoal::server
