// A small asynchronous HTTP/1.1 server (Boost.Beast underneath, hidden here): requests in,
// whole responses or chunked streams (SSE) out, one io thread for every connection.
#pragma once

#include <cstddef>
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
  // Called once if the client goes away before the exchange finished: a reset, a write that
  // fails or makes no progress for send_timeout_s. A client that only shut its write side (FIN)
  // still gets the whole answer.
  virtual void OnClose(std::function<void()> fn) = 0;
  // Drops the connection now: queued bytes are discarded (their memory is freed) and the
  // exchange is finished; OnClose's callback does not run.
  virtual void Close() = 0;
  virtual bool closed() const = 0;
  // Bytes handed to StartStream/Write that the socket has not taken yet (a client that stops
  // reading makes this grow). Writes never block; the caller decides when to pause or give up.
  virtual size_t buffered_bytes() const = 0;
  // Called (io thread) each time the write queue empties after having held bytes, until the
  // exchange finishes. A later call replaces fn.
  virtual void OnDrained(std::function<void()> fn) = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, std::shared_ptr<HttpExchange>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: an ephemeral port (see HttpServer::port())
  uint64_t max_body_bytes = 8 << 20;  // larger bodies get 413 (8 MiB holds a 1M-token prompt)
  // Open connections beyond this get a short 503 (Connection: close) and are closed at once, so
  // each excess connection costs one accept and one small write. 1024 holds the 1,000 concurrent
  // streams the server is sized for; the process also needs RLIMIT_NOFILE above it.
  int max_connections = 1024;
  // A request (headers and body) must arrive within this many seconds of its first byte (of the
  // connect, for a connection's first request, TLS handshake included), else 408 and close.
  // 10 s carries an 8 MiB body at 7 Mbit/s and bounds how long a slow client holds a slot.
  int header_timeout_s = 10;
  // A keep-alive connection with no new request for this long closes (15 s outlasts a client's
  // think time between requests; idle sockets cost a descriptor each).
  int keep_alive_timeout_s = 15;
  // A socket write that makes no progress for this long aborts the exchange (OnClose runs): the
  // client stopped reading. 60 s outlasts any pause of a live client; 0 turns it off.
  int send_timeout_s = 60;
  // Both set: the server speaks only HTTPS (TLS 1.2 or newer) with this PEM certificate chain
  // and private key. Errors loading them come back from Listen().
  std::string ssl_certfile;
  std::string ssl_keyfile;
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
  // Open connections right now (sockets not yet closed; refused ones never count).
  int64_t n_connections() const;
  // Requests whose handler threw (each answered 500 or closed), since start.
  int64_t n_handler_exceptions() const;

  struct Impl;  // Beast objects, defined in http_server.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoal::server
