// GroupLinks holds the links peers announce for their groups, bounded: a peer announcing endless
// epochs gets its oldest links closed, not a pile of open connections.
#include "cluster/group_links.h"

#include <gtest/gtest.h>

namespace shoal::cluster {
namespace {

TEST(GroupLinks, OffersAreBoundedOldestEpochClosedFirst) {
  auto lis = net::Listener::Listen("127.0.0.1", 0);
  ASSERT_TRUE(lis.ok());
  GroupLinks links;
  std::vector<std::shared_ptr<net::Conn>> dialed;
  const size_t n = GroupLinks::kMaxOffered + 10;
  for (size_t i = 0; i < n; ++i) {
    auto d = net::Conn::Connect("127.0.0.1", (*lis)->port(), 5'000);
    ASSERT_TRUE(d.ok()) << d.status().message();
    auto a = (*lis)->Accept(5'000);
    ASSERT_TRUE(a.ok() && *a);
    dialed.push_back(std::move(*d));
    links.Offer(static_cast<uint32_t>(i + 1), 1, std::move(*a));
  }
  EXPECT_EQ(links.offered(), GroupLinks::kMaxOffered);
  // The 10 oldest epochs' links were shut down: their dialers read the end of the stream.
  for (size_t i = 0; i < n; ++i) {
    auto r = dialed[i]->Recv(i < 10 ? 2'000 : 0);
    if (i < 10) {
      EXPECT_FALSE(r.ok()) << "link " << i;
    } else {
      EXPECT_TRUE(r.ok() && !*r) << "link " << i;  // still open, nothing sent
    }
  }
  links.CloseAll();
  EXPECT_EQ(links.offered(), 0u);
}

}  // namespace
}  // namespace shoal::cluster
