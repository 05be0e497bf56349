// HttpExchangeImpl: a response (whole or chunked stream) framed onto its connection's queue.
#include "server/http_exchange.h"

#include <boost/beast/http/status.hpp>
#include <cstdio>
#include <exception>

#include "base/log.h"

namespace shoal::server {

namespace http = boost::beast::http;

std::string HttpStatusLine(int status) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n";
}

std::string HttpErrorJson(std::string_view message, int status) {
  std::string m;
  for (char c : message) {
    if (c == '"' || c == '\\') m += '\\';
    m += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  }
  const char* type = status >= 500 ? "server_error" : "invalid_request_error";
  return R"({"error":{"message":")" + m + R"(","type":")" + type +
         R"(","param":null,"code":null}})";
}

void HttpExchangeImpl::Respond(int status, const std::string& content_type, std::string body,
                               const Headers& extra) {
  if (done_ || started_ || closed_) return;
  Finish();
  auto c = c_.lock();
  if (!c) return;
  const bool ka = keep_alive_ && !c->last_request();
  std::string head = HttpStatusLine(status);
  head += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\n";
  for (const auto& [k, v] : extra) head += k + ": " + v + "\r\n";
  head += ka ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  c->Send(head + body, ka ? Then::kNextRequest : Then::kClose);
}

void HttpExchangeImpl::StartStream(int status, const std::string& content_type) {
  if (done_ || started_ || closed_) return;
  started_ = true;
  auto c = c_.lock();
  if (!c) return;
  if (c->last_request()) keep_alive_ = false;
  c->Send(HttpStatusLine(status) + "Content-Type: " + content_type +
              "\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n" +
              (keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n"),
          Then::kNothing);
}

void HttpExchangeImpl::Write(std::string data) {
  if (done_ || closed_ || !started_ || data.empty()) return;
  char hex[20];
  std::snprintf(hex, sizeof hex, "%zx\r\n", data.size());
  data.insert(0, hex);
  data += "\r\n";
  if (auto c = c_.lock()) c->Send(std::move(data), Then::kNothing);
}

void HttpExchangeImpl::EndStream() {
  if (done_ || closed_ || !started_) return;
  Finish();
  if (auto c = c_.lock()) c->Send("0\r\n\r\n", keep_alive_ ? Then::kNextRequest : Then::kClose);
}

void HttpExchangeImpl::Close() {
  if (done_ || closed_) return;
  Finish();
  closed_ = true;
  if (auto c = c_.lock()) c->Abort("closed by the server");
}

void HttpExchangeImpl::NotifyClosed() {
  if (closed_ || done_) return;
  closed_ = true;
  on_drained_ = nullptr;
  if (!on_close_) return;
  auto fn = std::move(on_close_);
  on_close_ = nullptr;
  try {
    fn();
  } catch (const std::exception& e) {
    Log(LogLevel::kWarn, "http: an OnClose callback threw: {}", e.what());
  } catch (...) {
    Log(LogLevel::kWarn, "http: an OnClose callback threw a non-exception");
  }
}

void HttpExchangeImpl::NotifyDrained() {
  if (done_ || closed_ || !on_drained_) return;
  auto fn = on_drained_;  // a copy: fn may replace itself
  fn();
}

void HttpExchangeImpl::Fail() {
  if (done_ || closed_) return;
  if (!started_) {
    keep_alive_ = false;
    Respond(500, "application/json", HttpErrorJson("internal server error", 500), {});
  } else {
    if (auto c = c_.lock()) c->Abort("the handler threw after the stream started");
  }
}

}  // namespace shoal::server
