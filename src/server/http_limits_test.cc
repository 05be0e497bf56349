// HttpServer under descriptor exhaustion: with RLIMIT_NOFILE reached (in a forked child, so the
// test process keeps its limit) accept errors back off instead of spinning a core and flooding
// the log, and the server answers again once descriptors free up.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "server/http_test_util.h"

namespace shoal::server {
namespace {

using testing::Client;
using testing::StatusOf;
using testing::TestServer;

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Runs in the child; returns its exit code and writes "cpu lines" to `report`.
int EmfileChild(int report) {
  // The server's log goes to a file we count lines of.
  FILE* log = std::tmpfile();
  if (!log || ::dup2(fileno(log), 2) < 0) return 10;
  int open_fds = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    ++open_fds;
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = static_cast<rlim_t>(open_fds + 40);  // room for the server and ~16 connections
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 11;

  HttpServerOptions o;
  o.header_timeout_s = 60;  // idle connections stay: only descriptors run out
  TestServer ts(o, [](const HttpRequest&, std::shared_ptr<HttpExchange> ex) {
    ex->Respond(200, "text/plain", "ok");
  });
  if (!ts.status().ok()) return 12;
  std::vector<std::unique_ptr<Client>> clients;
  while (clients.size() < 100) {  // each loopback connection costs this process two descriptors
    auto c = std::make_unique<Client>(ts.port());
    if (c->fd() < 0) break;
    clients.push_back(std::move(c));
  }
  if (clients.size() >= 100) return 13;  // never ran out
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const off_t bytes0 = ::lseek(fileno(log), 0, SEEK_END);
  const double cpu0 = CpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double cpu = CpuSeconds() - cpu0;
  const off_t bytes1 = ::lseek(fileno(log), 0, SEEK_END);
  // Count the lines written during the 2 s.
  std::string text(static_cast<size_t>(bytes1 - bytes0), '\0');
  if (::pread(fileno(log), text.data(), text.size(), bytes0) < 0) return 14;
  const long lines = std::count(text.begin(), text.end(), '\n');
  const std::string line = std::to_string(cpu) + " " + std::to_string(lines) + "\n";
  if (::write(report, line.data(), line.size()) < 0) return 15;
  if (cpu > 0.4) return 3;   // 20% of a core; a busy loop burns ~100%
  if (lines > 10) return 4;  // one line a second (was ~330,000 a second)
  clients.clear();           // every connection closes; the server must accept again
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (std::chrono::steady_clock::now() < deadline) {  // within the 1 s back-off
    Client c(ts.port());
    if (c.fd() >= 0 && c.Send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") &&
        StatusOf(c.ReadAll(1000)) == "200")
      return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 5;
}

TEST(HttpServerLimitsTest, AcceptBacksOffWhenDescriptorsRunOut) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    ::_exit(EmfileChild(pipefd[1]));
  }
  ::close(pipefd[1]);
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 400 && !exited; ++i) {  // 8 s
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  char buf[128] = {};
  const ssize_t n = ::read(pipefd[0], buf, sizeof buf - 1);
  ::close(pipefd[0]);
  const std::string report = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  std::printf("EMFILE for 2 s: cpu_seconds log_lines = %s", report.c_str());
  ASSERT_TRUE(exited) << "child hung";
  ASSERT_TRUE(WIFEXITED(status)) << "child died by signal " << WTERMSIG(status);
  // 3: CPU over 20% of a core; 4: over 10 log lines; 5: no answer after descriptors freed.
  EXPECT_EQ(WEXITSTATUS(status), 0) << report;
}

}  // namespace
}  // namespace shoal::server
