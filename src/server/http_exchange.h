// The HttpExchange a handler answers through, and what it needs from its connection
// (HttpConn, implemented by Session<Stream> in http_session.cc). Io thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/http.h"

namespace shoal::server {

// What a connection does once its write queue drains.
enum class Then { kNothing, kNextRequest, kClose };

// What an Exchange needs from its connection (Session<Stream> in http_session.cc).
class HttpConn : public std::enable_shared_from_this<HttpConn> {
 public:
  virtual ~HttpConn() = default;
  // Queues bytes; once the queue drains, `then` runs (kNothing keeps the exchange open).
  virtual void Send(std::string data, Then then) = 0;
  virtual size_t buffered_bytes() const = 0;
  // The client shut its write side and no pipelined bytes wait: this is its last request.
  virtual bool last_request() const = 0;
  // Closes the connection now; the open exchange's OnClose runs.
  virtual void Abort(std::string_view why) = 0;
};

// "HTTP/1.1 404 Not Found\r\n".
std::string HttpStatusLine(int status);
// An OpenAI-style error body.
std::string HttpErrorJson(std::string_view message, int status);

class HttpExchangeImpl final : public HttpExchange {
 public:
  HttpExchangeImpl(std::weak_ptr<HttpConn> c, bool keep_alive)
      : c_(std::move(c)), keep_alive_(keep_alive) {}

  void Respond(int status, const std::string& content_type, std::string body,
               const Headers& extra) override;
  void StartStream(int status, const std::string& content_type) override;
  void Write(std::string data) override;
  void EndStream() override;
  void OnClose(std::function<void()> fn) override { on_close_ = std::move(fn); }
  void Close() override;
  bool closed() const override { return closed_ || c_.expired(); }
  size_t buffered_bytes() const override {
    auto c = c_.lock();
    return c ? c->buffered_bytes() : 0;
  }
  void OnDrained(std::function<void()> fn) override { on_drained_ = std::move(fn); }

  // The client went away (reset, failed write, timeout) before the exchange finished.
  void NotifyClosed();
  // The write queue emptied while the exchange is still open (exceptions go to Guard).
  void NotifyDrained();
  // The handler threw: a 500 if nothing was sent yet, else the connection closes.
  void Fail();

 private:
  void Finish() {
    done_ = true;
    on_close_ = nullptr;
    on_drained_ = nullptr;
  }

  std::weak_ptr<HttpConn> c_;  // gone once the connection closed
  bool keep_alive_;
  bool started_ = false, done_ = false, closed_ = false;
  std::function<void()> on_close_, on_drained_;
};

}  // namespace shoal::server
