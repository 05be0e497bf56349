// The forwarding client: an Asio coroutine on Beast's tcp_stream with a buffer_body parser, so
// that a streamed answer's chunks are relayed as they are read (see upstream.h).
#include "router/upstream.h"

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <utility>

namespace shoal::router {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

constexpr auto kToken = asio::use_awaitable;
// 16 KiB a read: dozens of SSE events; 1,000 streams hold 16 MiB.
constexpr size_t kReadBuffer = 16384;
// An answer's headers: 64 KiB is far past what `shoal serve` sends (a few hundred bytes).
constexpr uint32_t kMaxHeader = 64 << 10;

class Call final : public UpstreamCall {
 public:
  explicit Call(asio::io_context& io) : stream(io) {}
  void Cancel() override {
    asio::post(stream.get_executor(), [self = weak_from_this()] {
      if (auto s = self.lock()) {
        s->cancelled = true;
        s->stream.close();
      }
    });
  }
  std::weak_ptr<Call> weak_from_this() { return self; }
  beast::tcp_stream stream;
  bool cancelled = false;
  std::weak_ptr<Call> self;
};

asio::awaitable<Status> Forward(std::shared_ptr<Call> call,
                                std::shared_ptr<const loadgen::HttpTarget> target,
                                UpstreamRequest req, const UpstreamHandlers& h) {
  beast::tcp_stream& stream = call->stream;
  const auto idle = std::chrono::seconds(req.idle_timeout_s);
  beast::error_code ec;
  stream.expires_after(idle);
  co_await stream.async_connect(target->endpoints, asio::redirect_error(kToken, ec));
  if (ec) co_return Errorf("connect: {}", ec.message());
  http::request<http::string_body> hreq{req.method == "GET" ? http::verb::get : http::verb::post,
                                        target->path_prefix + req.path, 11};
  hreq.set(http::field::host, target->host_header);
  hreq.set(http::field::user_agent, "shoal-router");
  hreq.set(http::field::connection, "close");
  if (!req.api_key.empty()) hreq.set(http::field::authorization, "Bearer " + req.api_key);
  if (req.method != "GET") {
    hreq.set(http::field::content_type, req.content_type);
    hreq.body() = std::move(req.body);
    hreq.prepare_payload();
  }
  stream.expires_after(idle);
  co_await http::async_write(stream, hreq, asio::redirect_error(kToken, ec));
  if (ec) co_return Errorf("send: {}", ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.header_limit(kMaxHeader);
  // A stream's length is the generation's (idle time bounds it); 1 TiB is no limit in practice.
  parser.body_limit(std::uint64_t{1} << 40);
  stream.expires_after(idle);
  co_await http::async_read_header(stream, buffer, parser, asio::redirect_error(kToken, ec));
  if (ec) co_return Errorf("answer: {}", ec.message());
  h.on_head(static_cast<int>(parser.get().result_int()),
            std::string(parser.get()[http::field::content_type]));
  std::array<char, kReadBuffer> buf;
  while (!parser.is_done()) {
    parser.get().body().data = buf.data();
    parser.get().body().size = buf.size();
    stream.expires_after(idle);
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(kToken, ec));
    if (ec == http::error::need_buffer) ec = {};
    const size_t n = buf.size() - parser.get().body().size;
    if (n > 0) h.on_data(std::string(buf.data(), n));
    if (ec) co_return Errorf("answer body: {}", ec.message());
  }
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  co_return Status::Ok();
}

}  // namespace

std::shared_ptr<UpstreamCall> StartUpstream(asio::io_context& io,
                                            std::shared_ptr<const loadgen::HttpTarget> target,
                                            UpstreamRequest req, UpstreamHandlers h) {
  auto call = std::make_shared<Call>(io);
  call->self = call;
  auto handlers = std::make_shared<UpstreamHandlers>(std::move(h));
  asio::co_spawn(io, Forward(call, std::move(target), std::move(req), *handlers),
                 [call, handlers](std::exception_ptr e, Status s) {
                   if (e) s = Status::Error("router: internal error forwarding the request");
                   if (call->cancelled && s.ok()) s = Status::Error("cancelled");
                   handlers->on_done(std::move(s));
                 });
  return call;
}

}  // namespace shoal::router
