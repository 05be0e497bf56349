// ChildGroup: fork/exec into one process group, death signal, ordered stop.
#include "cli/child_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace shoal::cli {

Result<pid_t> ChildGroup::Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return Errorf("no program to start");
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) return Errorf("{}: {}", log_path, std::strerror(errno));
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) {
    ::close(log);
    return Errorf("/dev/null: {}", std::strerror(errno));
  }
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  std::lock_guard<std::mutex> lk(mu_);
  const pid_t parent = ::getpid();
  const pid_t group = pgid_;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    ::close(null);
    return Errorf("fork: {}", std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, group);  // group 0: a new group led by this child
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::dup2(null, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  // Also here, so the group exists before the next Spawn or a StopAll, whoever runs first.
  ::setpgid(pid, group == 0 ? pid : group);
  if (pgid_ == 0) pgid_ = pid;
  ::close(log);
  ::close(null);
  pids_.push_back(pid);
  return pid;
}

pid_t ChildGroup::Reap(int* status) {
  std::lock_guard<std::mutex> lk(mu_);
  for (size_t i = 0; i < pids_.size(); ++i) {
    int st = 0;
    if (::waitpid(pids_[i], &st, WNOHANG) == pids_[i]) {
      const pid_t p = pids_[i];
      pids_.erase(pids_.begin() + static_cast<std::ptrdiff_t>(i));
      if (status) *status = st;
      return p;
    }
  }
  return 0;
}

void ChildGroup::StopAll(int grace_ms) {
  if (size() == 0) return;
  ::kill(-pgid_, SIGTERM);
  // Poll every 20 ms: nodes stop within ~0.5 s (their accept and read loops wake that often).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (size() > 0 && std::chrono::steady_clock::now() < deadline) {
    while (Reap(nullptr) != 0) {
    }
    if (size() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (!pids_.empty()) ::kill(-pgid_, SIGKILL);
  for (pid_t p : pids_) ::waitpid(p, nullptr, 0);
  pids_.clear();
}

Result<std::string> SelfExePath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return Errorf("/proc/self/exe: {}", std::strerror(errno));
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace shoal::cli
