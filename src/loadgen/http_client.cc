// Streaming HTTP/1.1 request as an Asio coroutine on Beast's tcp_stream (see http_client.h).
#include "loadgen/http_client.h"

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "loadgen/openai_stream.h"
#include "loadgen/response_decoder.h"

namespace shoal::loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kToken = asio::use_awaitable;
constexpr const char* kUserAgent = "shoal-bench-serve";
// 8 KiB per read: dozens of SSE chunks; 1,000 streams hold 8 MiB.
constexpr size_t kReadBuffer = 8192;
// 1 MiB: a /v1/models listing is a few KiB even with hundreds of models.
constexpr uint64_t kMaxModelsBody = 1 << 20;

std::string Describe(const beast::error_code& ec, const StreamRequest& req, const char* what) {
  if (ec == beast::error::timeout) return req.deadline_error;
  return fmt::format("{}: {}", what, ec.message());
}

asio::awaitable<RequestResult> Stream(std::shared_ptr<const HttpTarget> target, StreamRequest req) {
  RequestResult r;
  const Clock::time_point start = Clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  auto fail = [&](std::string message) {
    r.ok = false;
    r.error = std::move(message);
    r.latency = since_start();
    return r;
  };
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_at(req.deadline);
  beast::error_code ec;
  co_await stream.async_connect(target->endpoints, asio::redirect_error(kToken, ec));
  if (ec) co_return fail(Describe(ec, req, "connect"));

  http::request<http::string_body> hreq{http::verb::post, target->path_prefix + req.path, 11};
  hreq.set(http::field::host, target->host_header);
  hreq.set(http::field::user_agent, kUserAgent);
  hreq.set(http::field::content_type, "application/json");
  hreq.set(http::field::accept, "text/event-stream");
  hreq.set(http::field::connection, "close");
  if (!req.api_key.empty()) hreq.set(http::field::authorization, "Bearer " + req.api_key);
  hreq.body() = std::move(req.body);
  hreq.prepare_payload();
  co_await http::async_write(stream, hreq, asio::redirect_error(kToken, ec));
  if (ec) co_return fail(Describe(ec, req, "send"));

  ResponseDecoder decoder;
  std::vector<std::string> events;
  std::array<char, kReadBuffer> buf;
  double last_chunk = 0;
  bool got_done = false;
  while (!got_done && !decoder.done()) {
    const size_t n = co_await stream.async_read_some(asio::buffer(buf), redirect_error(kToken, ec));
    const double now = since_start();
    const bool eof = ec == asio::error::eof;
    if (ec && !eof) co_return fail(Describe(ec, req, "receive"));
    Status s = eof ? decoder.FeedEof(&events) : decoder.Feed({buf.data(), n}, &events);
    if (!s.ok()) co_return fail(s.message());
    for (const std::string& data : events) {
      const StreamEvent ev = ParseStreamEvent(data);
      if (ev.kind == StreamEvent::kError) co_return fail(ev.error);
      if (ev.kind == StreamEvent::kDone) got_done = true;
      if (ev.kind == StreamEvent::kContent) {
        if (++r.content_chunks == 1) {
          r.ttft = now;
        } else {
          r.itl.push_back(now - last_chunk);
        }
        last_chunk = now;
      }
      if (ev.has_usage) {
        r.prompt_tokens = ev.prompt_tokens;
        r.output_tokens = ev.completion_tokens;
      }
    }
    events.clear();
    r.latency = now;
    if (eof) break;
    // An error body long enough to quote: no need to wait for the rest.
    if (decoder.header_done() && decoder.status() != 200 &&
        decoder.error_body().size() >= ResponseDecoder::kMaxErrorBody)
      break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (decoder.status() != 200) {
    std::string body = decoder.error_body();
    for (char& c : body)
      if (c == '\n' || c == '\r') c = ' ';
    co_return fail(fmt::format("HTTP {}: {}", decoder.status(), body));
  }
  if (!got_done) co_return fail("stream ended without data: [DONE]");
  if (r.content_chunks == 0) co_return fail("stream carried no generated text");
  r.ok = true;
  co_return r;
}

std::string ExceptionMessage(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// Result<T> has no default constructor, which co_spawn's completion needs.
struct GetReply {
  Status status;
  std::string body;
};

// GET <prefix><path> (POST when `post_body` is set); the body of a 200 answer, else the status
// and the start of the body.
asio::awaitable<GetReply> Get(const HttpTarget* target, std::string path, std::string api_key,
                              SteadyTime deadline, std::optional<std::string> post_body = {}) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_at(deadline);
  beast::error_code ec;
  co_await stream.async_connect(target->endpoints, asio::redirect_error(kToken, ec));
  if (ec) co_return GetReply{Errorf("connect: {}", ec.message()), {}};
  http::request<http::string_body> req{post_body ? http::verb::post : http::verb::get,
                                       target->path_prefix + path, 11};
  if (post_body) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(*post_body);
    req.prepare_payload();
  }
  req.set(http::field::host, target->host_header);
  req.set(http::field::user_agent, kUserAgent);
  req.set(http::field::connection, "close");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  co_await http::async_write(stream, req, asio::redirect_error(kToken, ec));
  if (ec) co_return GetReply{Errorf("send: {}", ec.message()), {}};
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxModelsBody);
  co_await http::async_read(stream, buffer, parser, asio::redirect_error(kToken, ec));
  if (ec) co_return GetReply{Errorf("receive: {}", ec.message()), {}};
  const auto& res = parser.get();
  if (res.result_int() != 200)
    co_return GetReply{Errorf("HTTP {}: {:.200}", res.result_int(), std::string(res.body())), {}};
  co_return GetReply{Status::Ok(), std::string(res.body())};
}

}  // namespace

Result<HttpTarget> ResolveTarget(const Url& url) {
  HttpTarget t;
  const bool v6 = url.host.find(':') != std::string::npos;
  t.host_header = v6 ? fmt::format("[{}]:{}", url.host, url.port) : url.host + ":" + url.port;
  t.path_prefix = url.path;
  asio::io_context io;
  tcp::resolver resolver(io);
  beast::error_code ec;
  auto results = resolver.resolve(url.host, url.port, ec);
  if (ec) return Errorf("cannot resolve {}: {}", url.host, ec.message());
  for (const auto& e : results) t.endpoints.push_back(e.endpoint());
  if (t.endpoints.empty()) return Errorf("{} has no address", url.host);
  return t;
}

void StartStreamRequest(asio::io_context& io, std::shared_ptr<const HttpTarget> target,
                        StreamRequest request, std::function<void(RequestResult)> done) {
  asio::co_spawn(io, Stream(std::move(target), std::move(request)),
                 [done = std::move(done)](std::exception_ptr e, RequestResult r) {
                   if (e) {
                     r = RequestResult{};
                     r.error = "internal error: " + ExceptionMessage(e);
                   }
                   done(std::move(r));
                 });
}

namespace {

// One GET (no body) or POST (body) to completion: the reply body, or an error naming the request.
Result<std::string> Fetch(const HttpTarget& target, const std::string& path,
                          std::optional<std::string> post_body, const std::string& api_key,
                          double timeout_s) {
  const std::string what = (post_body ? "POST " : "GET ") + path;
  asio::io_context io;
  Result<std::string> out = Errorf("{} did not finish", what);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  asio::co_spawn(io, Get(&target, path, api_key, deadline, std::move(post_body)),
                 [&](std::exception_ptr e, GetReply r) {
                   if (e) {
                     out = Errorf("internal error: {}", ExceptionMessage(e));
                   } else if (!r.status.ok()) {
                     out = r.status;
                   } else {
                     out = std::move(r.body);
                   }
                 });
  io.run();
  if (!out.ok()) return out.status().Annotate(what);
  return out;
}

}  // namespace

Result<std::string> HttpGet(const HttpTarget& target, const std::string& path,
                            const std::string& api_key, double timeout_s) {
  return Fetch(target, path, std::nullopt, api_key, timeout_s);
}

Result<std::string> HttpPost(const HttpTarget& target, const std::string& path,
                             const std::string& body, const std::string& api_key,
                             double timeout_s) {
  return Fetch(target, path, body, api_key, timeout_s);
}

Result<std::string> FetchFirstModelId(const HttpTarget& target, const std::string& api_key,
                                      double timeout_s) {
  SHOAL_ASSIGN_OR_RETURN(std::string body, HttpGet(target, "/v1/models", api_key, timeout_s));
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    auto data = j.find("data");
    if (data != j.end() && data->is_array() && !data->empty() && data->front().is_object()) {
      auto id = data->front().find("id");
      if (id != data->front().end() && id->is_string()) return id->get<std::string>();
    }
  }
  return Errorf("GET /v1/models: no model id in {:.200}", body);
}

}  // namespace shoal::loadgen
