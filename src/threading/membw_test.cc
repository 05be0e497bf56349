// MeasureTriadBandwidth returns a finite positive rate on small arrays.
#include "threading/membw.h"

#include <gtest/gtest.h>

#include <cmath>

namespace shoal {
namespace {

TEST(MemBwTest, TriadRateIsPositive) {
  ThreadPool pool(2);
  const double bw = MeasureTriadBandwidth(pool, size_t{1} << 20, 2);
  EXPECT_TRUE(std::isfinite(bw));
  EXPECT_GT(bw, 1e6);  // any machine streams more than 1 MB/s
}

}  // namespace
}  // namespace shoal
