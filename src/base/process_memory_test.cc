// Tests for ReadProcessMemory and the /proc/PID/status parser.
#include "base/process_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace shoal {
namespace {

TEST(ProcessMemory, ParsesKilobyteFields) {
  auto m =
      ParseProcStatus("Name:\tshoal\nVmPeak:\t  9999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1024 kB\n");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->rss_bytes, 1024u * 1024);
  EXPECT_EQ(m->peak_rss_bytes, 2048u * 1024);
  // A key must start a line: "XVmRSS:" is not VmRSS.
  EXPECT_FALSE(ParseProcStatus("XVmRSS: 5 kB\nVmHWM: 6 kB\n").ok());
  EXPECT_FALSE(ParseProcStatus("VmRSS: kB\nVmHWM: 6 kB\n").ok());
}

TEST(ProcessMemory, SeesItsOwnGrowth) {
  auto before = ReadProcessMemory();
  ASSERT_TRUE(before.ok()) << before.status().message();
  EXPECT_GT(before->rss_bytes, 0u);
  EXPECT_GE(before->peak_rss_bytes, before->rss_bytes);
  // Touch 64 MiB: the resident and peak figures grow by most of it.
  std::vector<char> big(64u << 20);
  std::memset(big.data(), 1, big.size());
  auto after = ReadProcessMemory();
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->rss_bytes, before->rss_bytes + (48u << 20)) << big[12345];
  EXPECT_GE(after->peak_rss_bytes, after->rss_bytes);
}

}  // namespace
}  // namespace shoal
