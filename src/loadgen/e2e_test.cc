// End-to-end tests of the load generator against a real Boost.Beast SSE server on 127.0.0.1.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include "loadgen/runner.h"
#include "loadgen/stats.h"
#include "loadgen/workload.h"

namespace shoal::loadgen {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using std::chrono::milliseconds;

enum class Mode { kStream, kError500, kNotJson, kNoDone };

struct Behavior {
  Mode mode = Mode::kStream;
  int ttft_ms = 50;             // before the first content chunk
  int itl_ms = 20;              // between content chunks
  int extra_prompt_tokens = 3;  // usage.prompt_tokens = words + this (a BOS and a template)
};

// A small OpenAI-style server: streams max_tokens content chunks (each event split over two
// HTTP chunks), then a usage chunk and [DONE]; answers GET /v1/models. Runs its own thread.
class TestServer {
 public:
  explicit TestServer(Behavior b)
      : b_(b), acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    asio::co_spawn(io_, Accept(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~TestServer() {
    io_.stop();
    thread_.join();
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port());
  }
  int max_active() const { return max_active_; }
  int requests() const { return requests_; }
  std::string last_body() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_body_;
  }

 private:
  asio::awaitable<void> Accept() {
    for (;;) {
      boost::system::error_code ec;
      tcp::socket s =
          co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      asio::co_spawn(io_, Session(std::move(s)), asio::detached);
    }
  }

  asio::awaitable<void> Write(tcp::socket& s, const std::string& bytes) {
    boost::system::error_code ec;
    co_await asio::async_write(s, asio::buffer(bytes),
                               asio::redirect_error(asio::use_awaitable, ec));
  }

  static std::string Chunk(const std::string& bytes) {
    return fmt::format("{:x}\r\n{}\r\n", bytes.size(), bytes);
  }
  // One SSE event as two HTTP chunks cut mid-event.
  static std::string Event(const std::string& data) {
    const std::string e = "data: " + data + "\n\n";
    return Chunk(e.substr(0, e.size() / 2)) + Chunk(e.substr(e.size() / 2));
  }

  asio::awaitable<void> Session(tcp::socket s) {
    boost::system::error_code ec;
    beast::flat_buffer buf;
    http::request<http::string_body> req;
    co_await http::async_read(s, buf, req, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    ++requests_;
    if (req.target() == "/v1/models") {
      const std::string body = R"({"object":"list","data":[{"id":"test-model"}]})";
      co_await Write(
          s, fmt::format("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{}", body.size(), body));
      co_return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_body_ = req.body();
    }
    if (b_.mode == Mode::kError500) {
      const std::string body = R"({"error":{"message":"boom"}})";
      co_await Write(s, fmt::format("HTTP/1.1 500 Internal Server Error\r\nContent-Length: "
                                    "{}\r\nConnection: close\r\n\r\n{}",
                                    body.size(), body));
      co_return;
    }
    const auto j = nlohmann::json::parse(req.body());
    const bool chat = j.contains("messages");
    const std::string prompt =
        chat ? j["messages"][0]["content"].get<std::string>() : j["prompt"].get<std::string>();
    const int n = j["max_tokens"].get<int>();
    const int active = ++active_;
    for (int m = max_active_; active > m && !max_active_.compare_exchange_weak(m, active);) {
    }
    asio::steady_timer timer(io_);
    co_await Write(s,
                   "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                   "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    if (chat)
      co_await Write(s, Event(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})"));
    for (int i = 0; i < n; ++i) {
      timer.expires_after(milliseconds(i == 0 ? b_.ttft_ms : b_.itl_ms));
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (b_.mode == Mode::kNotJson) {
        co_await Write(s, Event("this is not json"));
        break;
      }
      const std::string data = chat ? R"({"choices":[{"delta":{"content":" tok"}}]})"
                                    : R"({"choices":[{"index":0,"text":" tok"}]})";
      co_await Write(s, Event(data));
    }
    int words = 0;
    for (size_t i = 0; i < prompt.size(); ++i)
      words += prompt[i] != ' ' && (i == 0 || prompt[i - 1] == ' ');
    co_await Write(s, Event(fmt::format(R"({{"choices":[],"usage":{{"prompt_tokens":{},)"
                                        R"("completion_tokens":{}}}}})",
                                        words + b_.extra_prompt_tokens, n)));
    if (b_.mode != Mode::kNoDone) co_await Write(s, Event("[DONE]") + "0\r\n\r\n");
    --active_;
    s.shutdown(tcp::socket::shutdown_both, ec);
  }

  Behavior b_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::atomic<int> active_{0}, max_active_{0}, requests_{0};
  std::mutex mu_;
  std::string last_body_;
};

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Outcome {
  ServeBenchRun run;
  BenchReport report;
};

Outcome Bench(ServeBenchOptions o, int n, int input_len, int output_len, double rate = kInf) {
  const auto requests = SyntheticRequests(n, input_len, output_len, 1);
  auto run = RunServeBench(o, requests, ArrivalOffsets(n, rate, 1));
  EXPECT_TRUE(run.ok()) << run.status().message();
  if (!run.ok()) return {};
  std::vector<int64_t> est;
  for (const auto& r : requests) est.push_back(r.prompt_tokens);
  Outcome out{std::move(*run), {}};
  out.report = MakeReport(out.run.results, est, out.run.duration_s);
  return out;
}

std::string FirstError(const BenchReport& r) { return r.errors.empty() ? "" : r.errors[0].first; }

TEST(ServeBench, StreamsCountsAndTimings) {
  TestServer server({});
  ServeBenchOptions o;
  o.url = server.url();
  o.model = "m";
  const Outcome out = Bench(o, 8, 10, 5);
  const BenchReport& r = out.report;
  EXPECT_EQ(r.completed, 8) << FirstError(r);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.total_output_tokens, 40);
  EXPECT_EQ(r.total_input_tokens, 8 * 13);  // the server's usage, not the word estimate
  for (const RequestResult& q : out.run.results) {
    EXPECT_EQ(q.content_chunks, 5);
    EXPECT_EQ(q.itl.size(), 4u);
    EXPECT_GE(q.latency, q.ttft);
  }
  // Server delays: 50 ms to the first chunk, 20 ms between chunks. Upper bounds are loose for
  // loaded test machines; lower bounds hold since timers never fire early.
  EXPECT_GE(r.ttft.mean_ms, 45);
  EXPECT_LT(r.ttft.mean_ms, 1000);
  EXPECT_GE(r.itl.mean_ms, 15);
  EXPECT_LT(r.itl.mean_ms, 500);
  // TPOT spans the 4 gaps plus the wait from the last content chunk to [DONE].
  EXPECT_GE(r.tpot.mean_ms, r.itl.mean_ms - 1e-6);
  EXPECT_NEAR(r.tpot.mean_ms, r.itl.mean_ms, 10);
  EXPECT_GE(r.e2el.mean_ms, 45 + 4 * 15);
  EXPECT_GT(r.request_throughput, 0);
  // All 8 streams ran at once: one client thread, no limit, all sent at t = 0.
  EXPECT_EQ(server.max_active(), 8);
  const auto body = nlohmann::json::parse(server.last_body());
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["max_tokens"], 5);
  EXPECT_EQ(body["stream"], true);
}

TEST(ServeBench, ChatEndpointIgnoresRoleChunkAndFetchesModel) {
  TestServer server({});
  ServeBenchOptions o;
  o.url = server.url();
  o.endpoint = "/v1/chat/completions";  // no model: GET /v1/models names it
  const Outcome out = Bench(o, 3, 4, 3);
  EXPECT_EQ(out.run.model, "test-model");
  EXPECT_EQ(out.report.completed, 3) << FirstError(out.report);
  for (const RequestResult& q : out.run.results) EXPECT_EQ(q.content_chunks, 3);
  EXPECT_GE(out.report.ttft.mean_ms, 45);  // the immediate role-only chunk is not a token
  EXPECT_EQ(nlohmann::json::parse(server.last_body())["model"], "test-model");
}

TEST(ServeBench, MaxConcurrencyAndPoissonArrivals) {
  TestServer server({.mode = Mode::kStream, .ttft_ms = 10, .itl_ms = 10});
  ServeBenchOptions o;
  o.url = server.url();
  o.model = "m";
  o.max_concurrency = 2;
  const Outcome out = Bench(o, 6, 4, 3, /*rate=*/100);
  EXPECT_EQ(out.report.completed, 6) << FirstError(out.report);
  EXPECT_LE(server.max_active(), 2);
  EXPECT_GE(out.run.duration_s, 3 * 0.030);  // 6 requests of >= 30 ms, 2 at a time
}

TEST(ServeBench, ManyConcurrentStreamsOnOneThread) {
  TestServer server({.mode = Mode::kStream, .ttft_ms = 200, .itl_ms = 5});
  ServeBenchOptions o;
  o.url = server.url();
  o.model = "m";
  constexpr int kStreams = 300;  // below the usual 1,024 descriptors: both ends are in-process
  const Outcome out = Bench(o, kStreams, 2, 4);
  EXPECT_EQ(out.report.completed, kStreams) << FirstError(out.report);
  EXPECT_GT(server.max_active(), kStreams / 2);
}

TEST(ServeBench, Http500IsCountedWithItsMessage) {
  TestServer server({.mode = Mode::kError500});
  ServeBenchOptions o;
  o.url = server.url();
  o.model = "m";
  const Outcome out = Bench(o, 4, 4, 3);
  EXPECT_EQ(out.report.completed, 0);
  EXPECT_EQ(out.report.failed, 4);
  ASSERT_EQ(out.report.errors.size(), 1u);
  EXPECT_NE(out.report.errors[0].first.find("HTTP 500"), std::string::npos);
  EXPECT_NE(out.report.errors[0].first.find("boom"), std::string::npos);
  EXPECT_EQ(out.report.errors[0].second, 4);
}

TEST(ServeBench, RefusedConnectionIsCounted) {
  asio::io_context io;
  tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
  const int port = probe.local_endpoint().port();
  probe.close();  // nothing listens there now
  ServeBenchOptions o;
  o.url = "http://127.0.0.1:" + std::to_string(port);
  o.model = "m";
  const Outcome out = Bench(o, 3, 4, 3);
  EXPECT_EQ(out.report.failed, 3);
  EXPECT_NE(FirstError(out.report).find("connect"), std::string::npos) << FirstError(out.report);
}

TEST(ServeBench, MalformedAndUnfinishedStreamsAreCounted) {
  TestServer not_json({.mode = Mode::kNotJson, .ttft_ms = 1, .itl_ms = 1});
  ServeBenchOptions o;
  o.url = not_json.url();
  o.model = "m";
  Outcome out = Bench(o, 2, 4, 3);
  EXPECT_EQ(out.report.failed, 2);
  EXPECT_NE(FirstError(out.report).find("not a JSON object"), std::string::npos);

  TestServer no_done({.mode = Mode::kNoDone, .ttft_ms = 1, .itl_ms = 1});
  o.url = no_done.url();
  out = Bench(o, 2, 4, 3);
  EXPECT_EQ(out.report.failed, 2);
  EXPECT_FALSE(FirstError(out.report).empty());
}

TEST(ServeBench, RequestAndTotalTimeoutsBoundTheRun) {
  TestServer slow({.mode = Mode::kStream, .ttft_ms = 5000, .itl_ms = 1});
  ServeBenchOptions o;
  o.url = slow.url();
  o.model = "m";
  o.request_timeout_s = 0.2;
  Outcome out = Bench(o, 3, 4, 2);
  EXPECT_EQ(out.report.failed, 3);
  EXPECT_NE(FirstError(out.report).find("timed out"), std::string::npos) << FirstError(out.report);
  EXPECT_LT(out.run.duration_s, 3.0);

  o.request_timeout_s = 600;
  o.total_timeout_s = 0.3;
  o.max_concurrency = 1;  // the second and third wait, then are never sent
  out = Bench(o, 3, 4, 2);
  EXPECT_EQ(out.report.failed, 3);
  EXPECT_LT(out.run.duration_s, 3.0);
  ASSERT_EQ(out.report.errors.size(), 2u);
  EXPECT_NE(out.report.errors[0].first.find("total timeout"), std::string::npos);
  EXPECT_NE(out.report.errors[1].first.find("not sent"), std::string::npos);
}

}  // namespace
}  // namespace shoal::loadgen
