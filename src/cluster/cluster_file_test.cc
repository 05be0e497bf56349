// Tests of the cluster file parser: the documented format, per-node options, and errors that
// name the line.
#include "cluster/cluster_file.h"

#include <gtest/gtest.h>

namespace shoal::cluster {
namespace {

TEST(ClusterFile, DocumentedExample) {
  const char* text = R"(
# Three machines in pipeline order.
key_file = "cluster.key"
link_dtype = "q8_0"

[[node]]
address = "10.0.0.2:7000"
name = "rack1-a"
mem_limit = "200M"

[[node]]
address = "10.0.0.3:7000"
link_bandwidth_mbit = 1000
link_latency_ms = 0.2

[[node]]
address = "[::1]:7001"
mem_limit = 268435456
)";
  auto cf = ParseClusterFile(text, "/etc/shoal", "c.toml");
  ASSERT_TRUE(cf.ok()) << cf.status().message();
  ASSERT_EQ(cf->nodes.size(), 3u);
  EXPECT_EQ(cf->nodes[0], "10.0.0.2:7000");
  EXPECT_EQ(cf->nodes[2], "[::1]:7001");
  EXPECT_EQ(cf->key_file, "/etc/shoal/cluster.key");
  EXPECT_EQ(cf->link_dtype, "q8_0");
  ASSERT_EQ(cf->overrides.size(), 3u);
  EXPECT_EQ(cf->overrides[0].name, "rack1-a");
  EXPECT_EQ(cf->overrides[0].mem_limit, 200ull << 20);
  EXPECT_EQ(cf->overrides[1].name, "");
  EXPECT_EQ(cf->overrides[1].mem_limit, 0u);
  EXPECT_DOUBLE_EQ(cf->overrides[1].link_bw, 125e6);
  EXPECT_DOUBLE_EQ(cf->overrides[1].link_latency_s, 0.2e-3);
  EXPECT_EQ(cf->overrides[2].mem_limit, 268435456u);
}

TEST(ClusterFile, AbsoluteKeyAndDefaults) {
  auto cf = ParseClusterFile("key_file = \"/k\"\n[[node]]\naddress = \"h:1\"\n", "/x", "c");
  ASSERT_TRUE(cf.ok()) << cf.status().message();
  EXPECT_EQ(cf->key_file, "/k");
  EXPECT_EQ(cf->link_dtype, "");
  auto none = ParseClusterFile("[[node]]\naddress = \"h:1\"\n", "/x", "c");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->key_file, "");
}

void ExpectError(const char* text, const std::string& part) {
  auto cf = ParseClusterFile(text, "/d", "c.toml");
  ASSERT_FALSE(cf.ok()) << text;
  EXPECT_NE(cf.status().message().find(part), std::string::npos)
      << "'" << cf.status().message() << "' lacks '" << part << "'";
}

TEST(ClusterFile, Errors) {
  ExpectError("key_file = \"k\"\n", "no [[node]]");
  ExpectError("[[node]]\nname = \"a\"\n", "without an address");
  ExpectError("[[node]]\naddress = \"h:1\"\nmem_limt = \"1G\"\n", "unknown key 'mem_limt'");
  ExpectError("[[node]]\naddress = \"h:1\"\n[[node]]\naddress = \"h:2\"\nmem_limit = \"1T\"\n",
              "c.toml:5");
  ExpectError("[[node]]\naddress = \"h:1\"\nmem_limit = -5\n", "mem_limit");
  ExpectError("[[node]]\naddress = 7\n", "'address' must be a string");
  ExpectError("[[node]]\naddress = \"h:1\"\nlink_latency_ms = \"fast\"\n", "must be a number");
  ExpectError("node = \"h:1\"\n", "array of tables");
  ExpectError("linkdtype = \"f16\"\n[[node]]\naddress = \"h:1\"\n", "c.toml:1");
  ExpectError("[[node]\naddress = \"h:1\"\n", "c.toml:1");                      // TOML syntax error
  ExpectError("[[node]]\naddress = \"h:1\"\naddress = \"h:2\"\n", "c.toml:3");  // redefined
}

TEST(ClusterFile, StandbyNodes) {
  auto cf = ParseClusterFile(
      "[[node]]\naddress = \"h:1\"\n[[node]]\naddress = \"h:9\"\nstandby = true\n"
      "name = \"spare\"\n[[node]]\naddress = \"h:2\"\nstandby = false\n",
      ".", "c.toml");
  ASSERT_TRUE(cf.ok()) << cf.status().message();
  EXPECT_EQ(cf->nodes, (std::vector<std::string>{"h:1", "h:2"}));
  EXPECT_EQ(cf->standby, (std::vector<std::string>{"h:9"}));
  ASSERT_EQ(cf->standby_overrides.size(), 1u);
  EXPECT_EQ(cf->standby_overrides[0].name, "spare");
  ExpectError("[[node]]\naddress = \"h:1\"\nstandby = 1\n", "'standby' must be true or false");
}

TEST(ClusterFile, ByteSizes) {
  EXPECT_EQ(*ParseByteSize("256M"), 256ull << 20);
  EXPECT_EQ(*ParseByteSize("1.5G"), 3ull << 29);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_FALSE(ParseByteSize("").ok());
  EXPECT_FALSE(ParseByteSize("M").ok());
  EXPECT_FALSE(ParseByteSize("12Q").ok());
  EXPECT_FALSE(ParseByteSize("0").ok());
}

TEST(ClusterFile, MissingFile) {
  auto cf = LoadClusterFile("/nonexistent/cluster.toml");
  ASSERT_FALSE(cf.ok());
  EXPECT_NE(cf.status().message().find("/nonexistent/cluster.toml"), std::string::npos);
}

}  // namespace
}  // namespace shoal::cluster
