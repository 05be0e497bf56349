// HttpServer over real loopback sockets: hostile and careless clients (trailer bomb, throwing
// handler, transfer codings, connection cap, slow and idle clients, half-close, a reader that
// stalls a stream) must each get an answer or a close, and the server must go on answering.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>

#include "server/http_test_util.h"

namespace shoal::server {
namespace {

using testing::Client;
using testing::SecondsSince;
using testing::StatusOf;
using testing::TestServer;
using Clock = std::chrono::steady_clock;

// /health answers "ok"; /echo returns the body; /throw throws; /slow answers after 300 ms.
struct Routes {
  HttpServer* server = nullptr;
  std::atomic<int> closes{0};
  HttpHandler Handler() {
    return [this](const HttpRequest& r, std::shared_ptr<HttpExchange> ex) {
      if (r.target == "/throw") throw std::runtime_error("handler bug");
      if (r.target == "/echo") return ex->Respond(200, "text/plain", r.body);
      if (r.target == "/slow") {
        ex->OnClose([this] { ++closes; });
        server->After(300, [ex] { ex->Respond(200, "text/plain", std::string(100000, 's')); });
        return;
      }
      ex->Respond(200, "text/plain", "ok");
    };
  }
};

struct Fixture {
  explicit Fixture(HttpServerOptions opts = {}) : ts(std::move(opts), routes.Handler()) {
    routes.server = &ts.server();
  }
  Routes routes;
  TestServer ts;
};

std::string Get(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
}

// One fresh connection, one request; the whole reply.
std::string Roundtrip(int port, const std::string& request, int ms = 5000) {
  Client c(port);
  if (c.fd() < 0 || !c.Send(request)) return "";
  return c.ReadAll(ms);
}

void ExpectHealthy(TestServer& ts) {
  const std::string r = Roundtrip(ts.port(), Get("/health"));
  EXPECT_EQ(StatusOf(r), "200") << r;
  EXPECT_TRUE(ts.WaitConnections(0)) << ts.server().n_connections();
}

TEST(HttpServerTest, TrailerBombIsRefusedAndServerLives) {
  Fixture f;
  ASSERT_TRUE(f.ts.status().ok()) << f.ts.status().message();
  const std::string head =
      "GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
  // One 70,000-byte trailer field aborted the process (basic_fields threw length_error).
  std::string r = Roundtrip(f.ts.port(), head + "X: " + std::string(70000, 'a') + "\r\n\r\n");
  EXPECT_TRUE(r.empty() || StatusOf(r) == "431" || StatusOf(r) == "400") << r.substr(0, 80);
  // Many small trailer fields over the header limit.
  std::string many;
  for (int i = 0; i < 3000; ++i)
    many += "X-" + std::to_string(i) + ": " + std::string(30, 'b') + "\r\n";
  r = Roundtrip(f.ts.port(), head + many + "\r\n");
  EXPECT_TRUE(r.empty() || StatusOf(r) == "431") << r.substr(0, 80);
  // A small trailer is fine.
  r = Roundtrip(f.ts.port(),
                "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n");
  EXPECT_EQ(StatusOf(r), "200") << r;
  EXPECT_NE(r.find("\r\n\r\nabc"), std::string::npos) << r;
  // One header value of 65,534 bytes (over Beast's 16-bit field size): 431, not an abort.
  r = Roundtrip(f.ts.port(), "GET / HTTP/1.1\r\nX: " + std::string(65534, 'c') + "\r\n\r\n");
  EXPECT_EQ(StatusOf(r), "431") << r.substr(0, 80);
  ExpectHealthy(f.ts);
}

TEST(HttpServerTest, HandlerExceptionBecomes500) {
  Fixture f;
  ASSERT_TRUE(f.ts.status().ok());
  const std::string r = Roundtrip(f.ts.port(), Get("/throw"));
  EXPECT_EQ(StatusOf(r), "500") << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  EXPECT_EQ(f.ts.server().n_handler_exceptions(), 1);
  // An exception from a Post callback reaches the io loop, which logs it and goes on.
  f.ts.server().Post([] { throw std::runtime_error("posted bug"); });
  ExpectHealthy(f.ts);
}

TEST(HttpServerTest, TransferCodingsOtherThanChunkedGet501) {
  Fixture f;
  ASSERT_TRUE(f.ts.status().ok());
  for (const char* te :
       {"identity", "gzip, chunked", "x-unknown", "chunked, chunked", "chunked;q=1"}) {
    const std::string r = Roundtrip(
        f.ts.port(), std::string("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ") + te +
                         "\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    EXPECT_EQ(StatusOf(r), "501") << te << ": " << r;
    EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  }
  // Two fields that together say "gzip, chunked".
  std::string r = Roundtrip(f.ts.port(),
                            "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n"
                            "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_TRUE(StatusOf(r) == "501" || StatusOf(r) == "400") << r;
  // Content-Length with Transfer-Encoding, either order: 400.
  r = Roundtrip(f.ts.port(),
                "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(StatusOf(r), "400") << r;
  r = Roundtrip(f.ts.port(),
                "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                "Content-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(StatusOf(r), "400") << r;
  // Plain chunked (any case) works.
  r = Roundtrip(f.ts.port(),
                "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                "Transfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(StatusOf(r), "200") << r;
  EXPECT_NE(r.find("\r\n\r\nhello"), std::string::npos) << r;
  ExpectHealthy(f.ts);
}

TEST(HttpServerTest, ConnectionsOverTheCapGet503) {
  HttpServerOptions o;
  o.max_connections = 2;
  Fixture f(o);
  ASSERT_TRUE(f.ts.status().ok());
  Client a(f.ts.port()), b(f.ts.port());
  ASSERT_TRUE(f.ts.WaitConnections(2));
  Client c(f.ts.port());
  const std::string r = c.ReadAll(3000);
  EXPECT_EQ(StatusOf(r), "503") << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
  EXPECT_TRUE(c.eof());
  EXPECT_EQ(f.ts.server().n_connections(), 2);
  a.Close();
  ASSERT_TRUE(f.ts.WaitConnections(1));
  EXPECT_EQ(StatusOf(Roundtrip(f.ts.port(), Get("/health"))), "200");
}

TEST(HttpServerTest, SlowRequestTimesOut) {
  HttpServerOptions o;
  o.header_timeout_s = 1;
  Fixture f(o);
  ASSERT_TRUE(f.ts.status().ok());
  {  // Half a request, then nothing: 408 and a close after ~1 s (was 120 s).
    Client c(f.ts.port());
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.Send("GET /health HTTP/1.1\r\nHost: x\r\n"));
    const std::string r = c.ReadAll(5000);
    const double s = SecondsSince(t0);
    EXPECT_TRUE(c.eof());
    EXPECT_EQ(StatusOf(r), "408") << r;
    EXPECT_GT(s, 0.8);
    EXPECT_LT(s, 2.5);
  }
  {  // A trickling body does not extend the deadline.
    Client c(f.ts.port());
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"));
    for (int i = 0; i < 6 && c.Send("x"); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    c.ReadAll(3000);
    EXPECT_TRUE(c.eof());
    EXPECT_LT(SecondsSince(t0), 3.0);
  }
  {  // A connection that sends nothing closes too.
    Client c(f.ts.port());
    const auto t0 = Clock::now();
    EXPECT_EQ(c.ReadAll(5000), "");
    EXPECT_TRUE(c.eof());
    EXPECT_LT(SecondsSince(t0), 2.5);
  }
  ExpectHealthy(f.ts);
}

TEST(HttpServerTest, IdleKeepAliveConnectionCloses) {
  HttpServerOptions o;
  o.keep_alive_timeout_s = 1;
  Fixture f(o);
  ASSERT_TRUE(f.ts.status().ok());
  Client c(f.ts.port());
  for (int i = 0; i < 2; ++i) {  // two requests on one connection: keep-alive works
    ASSERT_TRUE(c.Send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(StatusOf(c.ReadResponse()), "200");
  }
  const auto t0 = Clock::now();
  EXPECT_EQ(c.ReadAll(5000), "");
  EXPECT_TRUE(c.eof());
  EXPECT_GT(SecondsSince(t0), 0.8);
  EXPECT_LT(SecondsSince(t0), 2.5);
  EXPECT_TRUE(f.ts.WaitConnections(0));
}

TEST(HttpServerTest, HalfClosedClientGetsTheWholeAnswer) {
  Fixture f;
  ASSERT_TRUE(f.ts.status().ok());
  {  // Request, FIN, then the handler answers 300 ms later.
    Client c(f.ts.port());
    ASSERT_TRUE(c.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    c.ShutdownWrite();
    const std::string r = c.ReadAll(5000);
    EXPECT_EQ(StatusOf(r), "200") << r.substr(0, 80);
    EXPECT_EQ(r.size() - (r.find("\r\n\r\n") + 4), 100000u);
    EXPECT_NE(r.find("Connection: close"), std::string::npos);
    EXPECT_TRUE(c.eof());
  }
  {  // Pipelined requests, then FIN: both answered.
    Client c(f.ts.port());
    ASSERT_TRUE(
        c.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    c.ShutdownWrite();
    const std::string r = c.ReadAll(5000);
    EXPECT_EQ(StatusOf(r), "200");
    EXPECT_NE(r.find("\r\n\r\nok"), std::string::npos) << r.size();
  }
  EXPECT_EQ(f.routes.closes.load(), 0);
  {  // A reset is still noticed at once: OnClose runs.
    Client c(f.ts.port());
    ASSERT_TRUE(c.Send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    c.Reset();
    for (int i = 0; i < 200 && f.routes.closes.load() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(f.routes.closes.load(), 1);
  }
  ExpectHealthy(f.ts);
}

// A stream of 16 MiB to a client that does not read: the queue grows (buffered_bytes), writes
// stall without blocking the io thread; when the client reads, OnDrained fires and ends it.
TEST(HttpServerTest, StreamBackpressureAndDrain) {
  constexpr size_t kPiece = 64 << 10, kPieces = 256;
  std::shared_ptr<HttpExchange> stream;  // io thread only
  std::atomic<int> drained{0};
  TestServer ts({}, [&](const HttpRequest& r, std::shared_ptr<HttpExchange> ex) {
    if (r.target != "/big") return ex->Respond(200, "text/plain", "ok");
    stream = ex;
    ex->StartStream(200, "text/event-stream");
    for (size_t i = 0; i < kPieces; ++i) ex->Write(std::string(kPiece, 'd'));
    ex->OnDrained([&drained, ex] {
      ++drained;
      ex->EndStream();
    });
  });
  ASSERT_TRUE(ts.status().ok());
  auto buffered = [&] {  // read on the io thread
    auto p = std::make_shared<std::promise<size_t>>();
    auto fut = p->get_future();
    ts.server().Post([&, p] { p->set_value(stream ? stream->buffered_bytes() : 0); });
    return fut.wait_for(std::chrono::seconds(2)) == std::future_status::ready ? fut.get() : 0;
  };
  Client c(ts.port(), 4096);
  ASSERT_TRUE(c.Send(Get("/big")));
  size_t last = 0, now = 0;
  for (int i = 0; i < 50; ++i) {  // until the stalled queue stops shrinking
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    now = buffered();
    if (now > 0 && now == last) break;
    last = now;
  }
  EXPECT_GT(now, kPiece * kPieces / 4) << "the kernel took more than expected";
  EXPECT_EQ(drained.load(), 0);
  // The io thread is free meanwhile.
  EXPECT_EQ(StatusOf(Roundtrip(ts.port(), Get("/health"))), "200");
  const std::string r = c.ReadAll(8000);
  EXPECT_TRUE(c.eof());
  EXPECT_GT(r.size(), kPiece * kPieces);
  EXPECT_EQ(r.substr(r.size() - 5), "0\r\n\r\n");
  EXPECT_EQ(drained.load(), 1);
  EXPECT_EQ(buffered(), 0u);
  EXPECT_TRUE(ts.WaitConnections(0));
}

// send_timeout_s: a client that reads nothing is dropped (OnClose runs); one that reads in
// bursts less than the timeout apart is not, though its stream is pending all along.
TEST(HttpServerTest, SendTimeoutDropsOnlyAStalledClient) {
  constexpr size_t kTotal = size_t{512} << 16;  // 32 MiB in 64 KiB pieces, never ended
  std::atomic<int> closes{0};
  HttpServerOptions o;
  o.send_timeout_s = 1;
  TestServer ts(o, [&](const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    ex->OnClose([&] { ++closes; });
    ex->StartStream(200, "text/event-stream");
    for (size_t i = 0; i < kTotal >> 16; ++i) ex->Write(std::string(64 << 10, 'f'));
  });
  ASSERT_TRUE(ts.status().ok());
  {  // Bursts of up to 4 MiB every 600 ms for 3 s.
    Client c(ts.port());
    ASSERT_TRUE(c.Send(Get("/")));
    size_t got = 0;
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      std::string buf(1 << 16, '\0');
      for (size_t burst = 0; burst < (4u << 20);) {
        const ssize_t n = ::recv(c.fd(), buf.data(), buf.size(), MSG_DONTWAIT);
        if (n <= 0) break;
        burst += static_cast<size_t>(n);
        got += static_cast<size_t>(n);
      }
    }
    EXPECT_GT(got, size_t{4} << 20);
    EXPECT_LT(got, kTotal);  // the stream was still pending at the end
    EXPECT_EQ(closes.load(), 0);
  }  // the client goes: OnClose runs on the failed write
  ASSERT_TRUE(ts.WaitConnections(0));
  closes = 0;
  {  // Stalled: dropped about a second after the socket buffers fill.
    Client c(ts.port(), 4096);
    ASSERT_TRUE(c.Send(Get("/")));
    const auto t0 = Clock::now();
    for (int i = 0; i < 400 && closes.load() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(closes.load(), 1);
    EXPECT_LT(SecondsSince(t0), 2.5);
    EXPECT_TRUE(ts.WaitConnections(0));
  }
}

TEST(HttpServerTest, ClosedExchangeDropsItsQueue) {
  std::shared_ptr<HttpExchange> stream;
  TestServer ts({}, [&](const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    stream = ex;
    ex->StartStream(200, "text/event-stream");
    for (int i = 0; i < 64; ++i) ex->Write(std::string(1 << 16, 'e'));
    ex->Close();
    EXPECT_EQ(ex->buffered_bytes(), 0u);
    EXPECT_TRUE(ex->closed());
    ex->Write("after close");  // ignored
  });
  ASSERT_TRUE(ts.status().ok());
  Client c(ts.port(), 4096);
  ASSERT_TRUE(c.Send(Get("/")));
  c.ReadAll(3000);
  EXPECT_TRUE(c.eof());
  EXPECT_TRUE(ts.WaitConnections(0));
}

}  // namespace
}  // namespace shoal::server
