// Split GGUF tests on shards written here: merging, and every inconsistency between shards.
#include <gtest/gtest.h>

#include <cstring>

#include "gguf/gguf.h"
#include "gguf/test_util.h"

namespace shoal::gguf {
namespace {

using testing::TempDir;

struct ShardSpec {
  std::vector<std::string> tensors;
  std::optional<uint32_t> split_no, split_count;
  std::optional<int32_t> tensors_count;
};

// Writes shard files PREFIX-0000i-of-0000N.gguf; shard 1 also gets ordinary metadata.
void WriteShards(const std::string& prefix, const std::vector<ShardSpec>& specs) {
  const int n = static_cast<int>(specs.size());
  for (int i = 0; i < n; ++i) {
    const ShardSpec& s = specs[i];
    Writer w;
    if (i == 0) w.SetString("general.architecture", "llama");
    if (s.split_no) w.SetValue("split.no", Value::U16(static_cast<uint16_t>(*s.split_no)));
    if (s.split_count) w.SetValue("split.count", Value::U16(static_cast<uint16_t>(*s.split_count)));
    if (s.tensors_count) w.SetI32("split.tensors.count", *s.tensors_count);
    for (const std::string& t : s.tensors) {
      std::vector<uint8_t> bytes(8);
      for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(t.size() + k + i);
      ASSERT_TRUE(w.AddTensorCopy(t, DType::kF32, {2}, bytes).ok());
    }
    const Status st = w.Write(SplitPath(prefix, i + 1, n));
    ASSERT_TRUE(st.ok()) << st.message();
  }
}

std::vector<ShardSpec> GoodSpecs() {
  return {{{"a", "b"}, 0, 3, 5}, {{"c", "d"}, 1, 3, 5}, {{"e"}, 2, 3, 5}};
}

// Opening shard 1 fails with a message containing every needle.
void ExpectOpenFails(const std::string& prefix, int n, const std::vector<std::string>& needles) {
  auto f = File::Open(SplitPath(prefix, 1, n));
  ASSERT_FALSE(f.ok());
  for (const std::string& needle : needles) {
    EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status().message();
  }
}

TEST(SplitTest, MergesShards) {
  TempDir dir;
  const std::string prefix = dir.File("m");
  WriteShards(prefix, GoodSpecs());
  auto f = File::Open(SplitPath(prefix, 1, 3));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->num_files(), 3u);
  ASSERT_EQ((*f)->tensors().size(), 5u);
  const int want_file[] = {0, 0, 1, 1, 2};
  for (size_t k = 0; k < 5; ++k) {
    const TensorInfo& t = (*f)->tensors()[k];
    EXPECT_EQ(t.name, std::string(1, static_cast<char>('a' + k)));
    EXPECT_EQ(t.file_index, want_file[k]);
    EXPECT_EQ(t.data[0], static_cast<uint8_t>(1 + t.file_index));
  }
  EXPECT_EQ((*f)->GetString("general.architecture").value(), "llama");
  EXPECT_EQ((*f)->GetUint("split.no").value(), 0u);
  EXPECT_GT((*f)->file_bytes(), 0u);
}

TEST(SplitTest, SplitTensorsCountIsOptional) {
  TempDir dir;
  auto specs = GoodSpecs();
  for (auto& s : specs) s.tensors_count.reset();
  WriteShards(dir.File("m"), specs);
  auto f = File::Open(SplitPath(dir.File("m"), 1, 3));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->tensors().size(), 5u);
}

TEST(SplitTest, SingleShardNameIsAPlainFile) {
  TempDir dir;
  WriteShards(dir.File("m"), {{{"a"}, 0, 1, 1}});
  auto f = File::Open(SplitPath(dir.File("m"), 1, 1));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->num_files(), 1u);
}

TEST(SplitTest, MissingShard) {
  TempDir dir;
  auto specs = GoodSpecs();
  WriteShards(dir.File("m"), specs);
  std::remove(SplitPath(dir.File("m"), 3, 3).c_str());
  ExpectOpenFails(dir.File("m"), 3, {"m-00003-of-00003.gguf"});
}

TEST(SplitTest, CorruptLaterShardNamesThatShard) {
  TempDir dir;
  WriteShards(dir.File("m"), GoodSpecs());
  const std::string shard2 = SplitPath(dir.File("m"), 2, 3);
  auto bytes = testing::ReadBytes(shard2);
  bytes.resize(bytes.size() - 32);  // into tensor 'd' (the last 24 bytes are its padding)
  testing::WriteBytes(shard2, bytes);
  ExpectOpenFails(dir.File("m"), 3, {"m-00002-of-00003.gguf", "'d'", "past end of file"});
}

TEST(SplitTest, CountMismatch) {
  TempDir dir;
  auto specs = GoodSpecs();
  specs[1].split_count = 4;
  WriteShards(dir.File("m"), specs);
  ExpectOpenFails(dir.File("m"), 3, {"m-00002-of-00003.gguf", "split.count is 4"});
}

TEST(SplitTest, CountMissing) {
  TempDir dir;
  auto specs = GoodSpecs();
  specs[0].split_count.reset();
  WriteShards(dir.File("m"), specs);
  ExpectOpenFails(dir.File("m"), 3, {"m-00001-of-00003.gguf", "split.count is missing"});
}

TEST(SplitTest, NoMismatch) {
  TempDir dir;
  auto specs = GoodSpecs();
  specs[2].split_no = 1;
  WriteShards(dir.File("m"), specs);
  ExpectOpenFails(dir.File("m"), 3, {"m-00003-of-00003.gguf", "split.no is 1"});
}

TEST(SplitTest, TensorsCountMismatch) {
  TempDir dir;
  auto specs = GoodSpecs();
  for (auto& s : specs) s.tensors_count = 6;
  WriteShards(dir.File("m"), specs);
  ExpectOpenFails(dir.File("m"), 3, {"split.tensors.count is 6", "hold 5 tensors"});
  specs = GoodSpecs();
  specs[2].tensors_count = 4;
  WriteShards(dir.File("m"), specs);
  ExpectOpenFails(dir.File("m"), 3, {"m-00003-of-00003.gguf", "split.tensors.count is 4"});
}

TEST(SplitTest, SplitKeyOfWrongType) {
  TempDir dir;
  WriteShards(dir.File("m"), GoodSpecs());
  Writer w;
  w.SetString("split.no", "one");
  w.SetValue("split.count", Value::U16(3));
  ASSERT_TRUE(w.Write(SplitPath(dir.File("m"), 2, 3)).ok());
  ExpectOpenFails(dir.File("m"), 3, {"m-00002-of-00003.gguf", "split.no", "integer"});
}

TEST(SplitTest, DuplicateTensorAcrossShards) {
  TempDir dir;
  auto specs = GoodSpecs();
  specs[2].tensors = {"a"};
  WriteShards(dir.File("m"), specs);
  ExpectOpenFails(dir.File("m"), 3, {"m-00003-of-00003.gguf", "'a'", "shard 1"});
}

TEST(SplitTest, SplitMetadataWithoutSplitName) {
  TempDir dir;
  Writer w;
  w.SetValue("split.count", Value::U16(3));
  ASSERT_TRUE(w.Write(dir.File("plain.gguf")).ok());
  auto f = File::Open(dir.File("plain.gguf"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("plain.gguf"), std::string::npos);
  EXPECT_NE(f.status().message().find("split.count = 3"), std::string::npos);
  EXPECT_TRUE(File::OpenSingle(dir.File("plain.gguf")).ok());
  // A single file whose split.tensors.count disagrees with its tensors.
  Writer w2;
  w2.SetI32("split.tensors.count", 2);
  ASSERT_TRUE(w2.Write(dir.File("plain2.gguf")).ok());
  EXPECT_FALSE(File::Open(dir.File("plain2.gguf")).ok());
}

TEST(SplitTest, LaterShardOpenedDirectly) {
  TempDir dir;
  WriteShards(dir.File("m"), GoodSpecs());
  auto f = File::Open(SplitPath(dir.File("m"), 3, 3));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("shard 3 of 3"), std::string::npos);
}

TEST(SplitTest, NamesThatAreNotSplits) {
  TempDir dir;
  // Too few digits, or no "-of-": plain files even though they look similar.
  for (const char* name : {"m-0001-of-0003.gguf", "m-00001-00003.gguf", "00001-of-00003.gguf",
                           "m-00001-of-00003.bin.gguf", "m-00001-of-00003x.gguf"}) {
    Writer w;
    ASSERT_TRUE(w.Write(dir.File(name)).ok());
    auto f = File::Open(dir.File(name));
    EXPECT_TRUE(f.ok()) << name << ": " << f.status().message();
  }
}

}  // namespace
}  // namespace shoal::gguf
