// NodeAgent's accept loop under abuse: a link cap (one more is refused with a GOODBYE) and a
// process out of descriptors (a forked child with a low RLIMIT_NOFILE), which must back off
// instead of spinning on EMFILE. Every wait is bounded.
#include "cluster/node_agent.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "net/conn.h"

namespace shoal::cluster {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr int64_t kWaitMs = 5'000;  // bound for steps that are immediate on loopback

net::ClusterKey TestKey() {
  const std::string s = "node-agent-test-key-0123456789";
  return *net::ClusterKey::FromBytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

NodeOptions Options() {
  NodeOptions o;
  o.measure = false;
  return o;
}

// Dials the node and reads its greeting (a link the node then holds open).
Result<std::unique_ptr<net::Conn>> Dial(uint16_t port) {
  SHOAL_ASSIGN_OR_RETURN(auto c, net::ConnectAuthenticated("127.0.0.1", port, TestKey(), kWaitMs));
  SHOAL_ASSIGN_OR_RETURN(auto join, c->Recv(kWaitMs));
  if (!join) return Errorf("no greeting");
  return c;
}

TEST(NodeAgentTest, LinksBeyondTheCapAreRefusedAtOnce) {
  NodeOptions o = Options();
  o.max_links = 2;
  auto agent = NodeAgent::Start(o, TestKey());
  ASSERT_TRUE(agent.ok()) << agent.status().message();
  std::thread run([&] { (void)(*agent)->Run(); });
  auto a = Dial((*agent)->port());
  auto b = Dial((*agent)->port());
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  const auto t0 = Clock::now();
  auto c = Dial((*agent)->port());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("too many links"));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));  // refused at once, not timed out
  // One link closes: the node serves a new one (once its link thread has ended).
  a->reset();
  Result<std::unique_ptr<net::Conn>> d = Errorf("not tried");
  for (const auto t1 = Clock::now(); !d.ok() && Clock::now() - t1 < std::chrono::seconds(5);) {
    d = Dial((*agent)->port());
    if (!d.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(d.ok()) << d.status().message();
  (*agent)->Stop();
  run.join();
}

// Reads `fd` to its end, counting lines that contain `what`.
int CountLines(int fd, const std::string& what) {
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) all.append(buf, static_cast<size_t>(n));
  int count = 0;
  for (size_t p = all.find(what); p != std::string::npos; p = all.find(what, p + 1)) ++count;
  return count;
}

TEST(NodeAgentTest, OutOfDescriptorsBacksOffInsteadOfSpinning) {
  int port_pipe[2], cpu_pipe[2], log_pipe[2];
  ASSERT_EQ(pipe(port_pipe), 0);
  ASSERT_EQ(pipe(cpu_pipe), 0);
  ASSERT_EQ(pipe(log_pipe), 0);
  constexpr int kRunMs = 2'500;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: a node whose process has no descriptor left for the links it is offered.
    dup2(log_pipe[1], STDERR_FILENO);
    auto agent = NodeAgent::Start(Options(), TestKey());
    if (!agent.ok()) _exit(2);
    const uint16_t port = (*agent)->port();
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = 64;  // a few dozen above what the child holds; filled up below
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(3);
    while (open("/dev/null", O_RDONLY | O_CLOEXEC) >= 0) {
    }
    if (write(port_pipe[1], &port, sizeof(port)) != sizeof(port)) _exit(4);
    std::thread stopper([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(kRunMs));
      (*agent)->Stop();
    });
    (void)(*agent)->Run();
    stopper.join();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    if (write(cpu_pipe[1], &cpu, sizeof(cpu)) != sizeof(cpu)) _exit(5);
    _exit(0);
  }
  close(port_pipe[1]);
  close(cpu_pipe[1]);
  close(log_pipe[1]);
  // Drain the child's log meanwhile, so a child that logs every failure is not blocked on a
  // full pipe (which would hide its spinning from the CPU count).
  int lines = 0;
  std::thread logs([&] { lines = CountLines(log_pipe[0], "accept failed"); });
  uint16_t port = 0;
  ASSERT_EQ(read(port_pipe[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  // Three connections the kernel completes into the node's backlog; it cannot accept them.
  std::vector<std::unique_ptr<net::Conn>> pending;
  for (int i = 0; i < 3; ++i) {
    auto c = net::Conn::Connect("127.0.0.1", port, kWaitMs);
    ASSERT_TRUE(c.ok()) << c.status().message();
    pending.push_back(std::move(*c));
  }
  double cpu = -1;
  ASSERT_EQ(read(cpu_pipe[0], &cpu, sizeof(cpu)), static_cast<ssize_t>(sizeof(cpu)));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  logs.join();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // Spinning on EMFILE burns the whole 2.5 s; backing off (100 ms doubling to 1 s) a few ms.
  EXPECT_LT(cpu, 0.5);
  EXPECT_GE(lines, 1);  // the failure is reported...
  EXPECT_LE(lines, 4);  // ...at most once a second
  for (int fd : {port_pipe[0], cpu_pipe[0], log_pipe[0]}) close(fd);
}

}  // namespace
}  // namespace shoal::cluster
