// Tests for Status/Result and the propagation macros.
#include "base/status.h"

#include <gtest/gtest.h>

namespace shoal {
namespace {

Result<int> Half(int x) {
  if (x % 2) return Errorf("{} is odd", x);
  return x / 2;
}

Result<int> Quarter(int x) {
  SHOAL_ASSIGN_OR_RETURN(int h, Half(x));
  SHOAL_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = Errorf("bad {}", 3);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "bad 3");
  EXPECT_EQ(s.Annotate("file x").message(), "file x: bad 3");
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

}  // namespace
}  // namespace shoal
