// ChildGroup: child processes of `shoal cluster up` in one process group that die with it.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"

namespace shoal::cli {

// Every child runs in one process group of its own (so a terminal's Ctrl-C reaches only the
// parent, which stops them in order) and gets SIGKILL if the parent dies first
// (PR_SET_PDEATHSIG), so no exit path leaves orphans. Spawn from the thread that lives longest
// (the main thread): the death signal follows the thread that forked. Reap and StopAll may be
// called from any thread.
class ChildGroup {
 public:
  ChildGroup() = default;
  ChildGroup(const ChildGroup&) = delete;
  ChildGroup& operator=(const ChildGroup&) = delete;
  ~ChildGroup() { StopAll(); }

  // Starts argv (argv[0] is the program path) with stdin from /dev/null and stdout and stderr
  // appended to log_path.
  Result<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_path);
  // A child that has exited since the last call (reaped), or 0; *status as from waitpid.
  pid_t Reap(int* status);
  // SIGTERM to the group, up to grace_ms for every child to exit, then SIGKILL; reaps all.
  void StopAll(int grace_ms = 5000);
  size_t size() const {
    std::lock_guard<std::mutex> lk(mu_);
    return pids_.size();
  }

 private:
  mutable std::mutex mu_;
  pid_t pgid_ = 0;
  std::vector<pid_t> pids_;  // not yet reaped
};

// The running program's own path (/proc/self/exe), to start more of itself.
Result<std::string> SelfExePath();

}  // namespace shoal::cli
