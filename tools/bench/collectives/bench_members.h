// What gloo_bench.cc and group_bench.cc share: the member processes, the message sizes and the
// statistics they print.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace bench {

// The message sizes: bytes every member holds after a call.
inline const std::vector<size_t>& Sizes() {
  static const std::vector<size_t> kSizes = {size_t{4} << 10,   size_t{16} << 10, size_t{64} << 10,
                                             size_t{256} << 10, size_t{1} << 20,  size_t{4} << 20};
  return kSizes;
}

// Calls run back to back, so a member may start call i + 1 before the others finish call i and
// single calls can look shorter than the exchange they wait for: the mean over the timed calls
// (their total time / count) is the sustained cost per call; the median and p90 show the spread.
inline double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

inline double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

inline void Print(const char* op, int members, size_t bytes, const std::vector<double>& us) {
  std::printf("%-9s members %d  %5zu KiB  mean %9.1f us  median %9.1f  p90 %9.1f\n", op, members,
              bytes >> 10, Mean(us), Percentile(us, 0.5), Percentile(us, 0.9));
}

// Runs member(rank, dir) in `members` processes (rank 0 in this one) over a fresh temporary
// folder for their rendezvous; 0 when every member returned 0.
inline int ForkMembers(int members, const std::function<int(int, const std::string&)>& member) {
  char dir[] = "/tmp/collective_bench_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  std::vector<pid_t> kids;
  for (int r = 1; r < members; ++r) {
    const pid_t p = fork();
    if (p == 0) _exit(member(r, dir));
    kids.push_back(p);
  }
  const int rc = member(0, dir);
  int bad = 0;
  for (pid_t p : kids) {
    int st = 0;
    waitpid(p, &st, 0);
    bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  const std::string rm = std::string("rm -rf ") + dir;
  if (std::system(rm.c_str()) != 0) return 1;
  return rc != 0 || bad != 0 ? 1 : 0;
}

}  // namespace bench
