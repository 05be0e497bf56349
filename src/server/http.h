// A small asynchronous HTTP/1.1 server (Boost.Beast underneath, hidden here): requests in,
// whole responses or chunked streams (SSE) out, one io thread for every connection.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace shoal::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path (query string stripped into `query`)
  std::string query;
  std::string body;
  Headers headers;  // names lower-cased
  // The value of header `name` (lower-case), or "" when absent.
  std::string Header(const std::string& name) const;
};

// One request being answered. Every method must be called on the server's io thread (use
// HttpServer::Post from other threads). After Respond or EndStream the exchange is finished
// and further calls do nothing.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  // A whole response with Content-Length.
  virtual void Respond(int status, const std::string& content_type, std::string body,
                       const Headers& extra = {}) = 0;
  // Starts a chunked response (for text/event-stream); then Write pieces, then EndStream.
  virtual void StartStream(int status, const std::string& content_type) = 0;
  virtual void Write(std::string data) = 0;
  virtual void EndStream() = 0;
  // Called once if the client goes away before the exchange finished.
  virtual void OnClose(std::function<void()> fn) = 0;
  // Drops the connection now: queued bytes are discarded (their memory is freed) and the
  // exchange is finished; OnClose's callback does not run.
  virtual void Close() = 0;
  virtual bool closed() const = 0;
  // Bytes handed to StartStream/Write that the socket has not taken yet (a client that stops
  // reading makes this grow).
  virtual size_t buffered_bytes() const = 0;
  // Called (io thread) each time the write queue empties after having held bytes.
  virtual void OnDrained(std::function<void()> fn) = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpExchange>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: an ephemeral port (see HttpServer::port())
  uint64_t max_body_bytes = 8 << 20;  // larger bodies get 413 (8 MiB holds a 1M-token prompt)
  int idle_timeout_s = 120;  // a keep-alive connection with no request for this long closes
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions opts, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; errors name the address.
  Status Listen();
  int port() const;
  // Runs the io loop on the calling thread until Stop().
  void Run();
  // Thread-safe: runs fn on the io thread.
  void Post(std::function<void()> fn);
  // Runs fn on the io thread after `ms` milliseconds.
  void After(int ms, std::function<void()> fn);
  // Calls fn (on the io thread) when SIGTERM or SIGINT arrives.
  void OnSignal(std::function<void(int)> fn);
  // Closes the listening socket; open connections continue.
  void StopAccepting();
  // Ends Run() (pending connections are dropped).
  void Stop();
  // Open connections right now.
  int64_t n_connections() const;

  struct Impl;  // Beast objects, defined in http_server.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoal::server
