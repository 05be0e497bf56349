// Replays src/net/testdata: every malformed/ file must be rejected with its expected reason,
// in one piece and byte by byte; every valid/ file must decode completely.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "net/frame.h"

namespace shoal::net {
namespace {

using ::testing::HasSubstr;

const std::string kTestdata = SHOAL_NET_TESTDATA;

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Feeds the bytes in `chunk`-sized pieces, then Finish(); the first error.
Status Replay(const std::vector<uint8_t>& bytes, size_t chunk, size_t* frames) {
  FrameDecoder dec;
  std::vector<Frame> out;
  for (size_t pos = 0; pos < bytes.size(); pos += chunk) {
    SHOAL_RETURN_IF_ERROR(
        dec.Feed({bytes.data() + pos, std::min(chunk, bytes.size() - pos)}, &out));
  }
  *frames = out.size();
  return dec.Finish();
}

TEST(CorpusTest, MalformedFramesRejectedWithReason) {
  std::ifstream manifest(kTestdata + "/malformed/EXPECTED");
  ASSERT_TRUE(manifest.good()) << "missing " << kTestdata << "/malformed/EXPECTED";
  std::string line;
  int cases = 0;
  while (std::getline(manifest, line)) {
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    const std::string name = line.substr(0, tab);
    const std::string reason = line.substr(tab + 1);
    const std::vector<uint8_t> bytes = ReadBytes(kTestdata + "/malformed/" + name);
    ASSERT_FALSE(bytes.empty()) << name;
    for (size_t chunk : {bytes.size(), size_t{1}, size_t{5}}) {
      size_t frames = 0;
      const Status s = Replay(bytes, chunk, &frames);
      ASSERT_FALSE(s.ok()) << name << " accepted (chunk " << chunk << ")";
      EXPECT_THAT(s.message(), HasSubstr(reason)) << name;
    }
    ++cases;
  }
  EXPECT_GE(cases, 10);
}

TEST(CorpusTest, ValidStreamsDecode) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kTestdata + "/valid")) {
    const std::vector<uint8_t> bytes = ReadBytes(entry.path());
    for (size_t chunk : {bytes.size(), size_t{1}, size_t{7}}) {
      size_t frames = 0;
      const Status s = Replay(bytes, chunk, &frames);
      EXPECT_TRUE(s.ok()) << entry.path() << ": " << s.message();
      EXPECT_GE(frames, 1u) << entry.path();
    }
    ++files;
  }
  EXPECT_GE(files, 3);
}

}  // namespace
}  // namespace shoal::net
