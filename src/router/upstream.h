// One request forwarded to a replica, its answer relayed as it arrives: the status and content
// type once, then the body's bytes in pieces (an SSE stream passes through event by event), then
// the outcome. Runs on the router's client io_context (one thread); cancellable from any thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "loadgen/http_client.h"

namespace shoal::router {

struct UpstreamRequest {
  std::string method = "POST";  // POST or GET
  std::string path;             // e.g. "/v1/completions" (the target's prefix goes first)
  std::string body;
  std::string content_type = "application/json";
  std::string api_key;       // "Authorization: Bearer" to the replica, when not empty
  int idle_timeout_s = 600;  // connect, or no byte from the replica for this long: failed
};

struct UpstreamHandlers {
  std::function<void(int status, std::string content_type)> on_head;  // once, before any data
  std::function<void(std::string data)> on_data;
  // Exactly once: ok when the answer ended; an error when the connection failed (before or after
  // on_head) or the call was cancelled.
  std::function<void(Status)> on_done;
};

class UpstreamCall {
 public:
  virtual ~UpstreamCall() = default;
  // Closes the replica's connection (the replica then drops the request); on_done follows.
  virtual void Cancel() = 0;
};

std::shared_ptr<UpstreamCall> StartUpstream(boost::asio::io_context& io,
                                            std::shared_ptr<const loadgen::HttpTarget> target,
                                            UpstreamRequest req, UpstreamHandlers h);

}  // namespace shoal::router
