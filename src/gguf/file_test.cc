// gguf::File tests on real files: every shared model and vocab opens, known values, getters,
// split models.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "gguf/gguf.h"
#include "gguf/test_util.h"

namespace shoal::gguf {
namespace {

using testing::Exists;
using testing::SharedPath;

const std::string kStories = "models/stories260K.gguf";
const std::string kSplit1 = "models/split/stories260K-split-00001-of-00003.gguf";

std::unique_ptr<File> OpenOrDie(const std::string& path) {
  auto f = File::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? std::move(f).value() : nullptr;
}

// Checks the invariants every successfully opened file must satisfy.
void CheckConsistent(const File& f) {
  EXPECT_TRUE(f.version() == 2 || f.version() == 3);
  EXPECT_GT(f.alignment(), 0u);
  for (const auto& [key, v] : f.metadata()) EXPECT_EQ(f.Find(key), &v);
  for (const TensorInfo& t : f.tensors()) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(f.FindTensor(t.name), &t);
    ASSERT_GE(t.n_dims, 1);
    ASSERT_LE(t.n_dims, 4);
    EXPECT_EQ(t.offset % f.alignment(), 0u);
    EXPECT_EQ(t.nbytes, t.row_bytes() * static_cast<uint64_t>(t.rows()));
    EXPECT_NE(t.data, nullptr);
    ASSERT_LT(static_cast<size_t>(t.file_index), f.num_files());
  }
}

TEST(FileTest, EverySharedModelAndVocabOpens) {
  std::vector<std::string> paths;
  for (const char* dir : {"models", "models/tiny", "testdata/vocab"}) {
    const std::string d = SharedPath(dir);
    if (!Exists(d)) continue;
    for (const auto& e : std::filesystem::directory_iterator(d)) {
      if (e.path().extension() == ".gguf") paths.push_back(e.path().string());
    }
  }
  if (paths.empty()) GTEST_SKIP() << "no shared GGUF files";
  for (const std::string& p : paths) {
    SCOPED_TRACE(p);
    auto f = File::Open(p);
    ASSERT_TRUE(f.ok()) << f.status().message();
    CheckConsistent(**f);
    EXPECT_FALSE((*f)->GetString("general.architecture").value().empty());
  }
}

TEST(FileTest, Stories260KKnownValues) {
  const std::string path = SharedPath(kStories);
  if (!Exists(path)) GTEST_SKIP() << path;
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  CheckConsistent(*f);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->num_files(), 1u);
  EXPECT_EQ(f->file_bytes(), 1185376u);
  EXPECT_EQ(f->GetString("general.architecture").value(), "llama");
  EXPECT_EQ(f->GetUint("llama.block_count").value(), 5u);
  EXPECT_EQ(f->GetUint("llama.embedding_length").value(), 64u);
  EXPECT_EQ(f->tensors().size(), 48u);
  auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status().message();
  EXPECT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  auto scores = f->GetNumberArray("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok()) << scores.status().message();
  EXPECT_EQ(scores->size(), 512u);
  auto types = f->GetNumberArray("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok()) << types.status().message();
  EXPECT_EQ(types->size(), 512u);

  const TensorInfo* emb = f->FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::kF32);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne[0], 64);
  EXPECT_EQ(emb->ne[1], 512);
  EXPECT_EQ(emb->nbytes, 64u * 512u * 4u);
  EXPECT_EQ(emb->row_bytes(), 256u);
  EXPECT_EQ(emb->n_elements(), 64 * 512);
  EXPECT_EQ(f->FindTensor("no.such.tensor"), nullptr);
  // Tensor data lies inside the file, past the header.
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_LE(f->data_offset() + t.offset + t.nbytes, f->file_bytes()) << t.name;
  }
}

TEST(FileTest, Getters) {
  const std::string path = SharedPath(kStories);
  if (!Exists(path)) GTEST_SKIP() << path;
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  // Missing keys and wrong types are errors naming the file and the key.
  auto missing = f->GetUint("no.such.key");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no.such.key"), std::string::npos);
  EXPECT_NE(missing.status().message().find("stories260K.gguf"), std::string::npos);
  auto wrong = f->GetUint("general.architecture");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("general.architecture"), std::string::npos);
  EXPECT_FALSE(f->GetString("llama.block_count").ok());
  EXPECT_FALSE(f->GetBool("llama.block_count").ok());
  EXPECT_FALSE(f->GetStringArray("tokenizer.ggml.scores").ok());
  EXPECT_FALSE(f->GetNumberArray("tokenizer.ggml.tokens").ok());
  EXPECT_FALSE(f->GetNumberArray("general.architecture").ok());
  // Numbers convert: an integer reads as a float.
  EXPECT_DOUBLE_EQ(f->GetFloat("llama.block_count").value(), 5.0);
  EXPECT_GT(f->GetFloat("llama.attention.layer_norm_rms_epsilon").value(), 0.0);
  // Defaults.
  EXPECT_EQ(f->GetUintOr("no.such.key", 7), 7u);
  EXPECT_EQ(f->GetUintOr("llama.block_count", 7), 5u);
  EXPECT_EQ(f->GetStringOr("no.such.key", "x"), "x");
  EXPECT_EQ(f->GetStringOr("general.architecture", "x"), "llama");
  EXPECT_DOUBLE_EQ(f->GetFloatOr("no.such.key", 2.5), 2.5);
  EXPECT_TRUE(f->GetBoolOr("no.such.key", true));
  // Every value renders.
  for (const auto& [key, v] : f->metadata()) {
    EXPECT_FALSE(v.ToString().empty()) << key;
    EXPECT_FALSE(v.TypeString().empty()) << key;
  }
  EXPECT_EQ(f->Find("tokenizer.ggml.tokens")->TypeString(), "array[string, 512]");
}

TEST(FileTest, SplitMatchesSingleFile) {
  const std::string single = SharedPath(kStories), split = SharedPath(kSplit1);
  if (!Exists(single) || !Exists(split)) GTEST_SKIP() << split;
  auto a = OpenOrDie(single);
  auto b = OpenOrDie(split);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  CheckConsistent(*b);
  EXPECT_EQ(b->num_files(), 3u);
  EXPECT_EQ(b->path(), split);
  EXPECT_EQ(b->file_path(2), SharedPath("models/split/stories260K-split-00003-of-00003.gguf"));
  EXPECT_EQ(b->GetUint("split.count").value(), 3u);
  EXPECT_EQ(b->GetUint("split.no").value(), 0u);
  EXPECT_EQ(b->GetUint("split.tensors.count").value(), 48u);
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  std::vector<int> per_file(3, 0);
  for (size_t k = 0; k < a->tensors().size(); ++k) {
    const TensorInfo& x = a->tensors()[k];
    const TensorInfo* y = b->FindTensor(x.name);
    ASSERT_NE(y, nullptr) << x.name;
    EXPECT_EQ(y->type, x.type);
    EXPECT_EQ(y->n_dims, x.n_dims);
    EXPECT_EQ(y->ne, x.ne);
    ASSERT_EQ(y->nbytes, x.nbytes);
    EXPECT_EQ(std::memcmp(x.data, y->data, x.nbytes), 0) << x.name;
    ++per_file[y->file_index];
  }
  EXPECT_EQ(per_file, (std::vector<int>{20, 20, 8}));
  // Metadata comes from shard 1: everything of the single file is there with the same value.
  for (const auto& [key, v] : a->metadata()) {
    const Value* w = b->Find(key);
    ASSERT_NE(w, nullptr) << key;
    EXPECT_EQ(*w, v) << key;
  }
}

TEST(FileTest, SplitShardOpenedAlone) {
  const std::string shard2 = SharedPath("models/split/stories260K-split-00002-of-00003.gguf");
  if (!Exists(shard2)) GTEST_SKIP() << shard2;
  // Open() insists on the first shard and says which one that is.
  auto f = File::Open(shard2);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("stories260K-split-00001-of-00003.gguf"), std::string::npos)
      << f.status().message();
  // OpenSingle() reads just that file.
  auto g = File::OpenSingle(shard2);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ((*g)->tensors().size(), 20u);
  EXPECT_EQ((*g)->GetUint("split.no").value(), 1u);
  EXPECT_EQ((*g)->num_files(), 1u);
}

TEST(FileTest, MissingFile) {
  auto f = File::Open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("/nonexistent/dir/model.gguf"), std::string::npos);
  auto g = File::Open("/nonexistent/dir/model-00001-of-00002.gguf");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("model-00001-of-00002.gguf"), std::string::npos);
}

TEST(FileTest, SplitPath) {
  EXPECT_EQ(SplitPath("/a/m", 1, 3), "/a/m-00001-of-00003.gguf");
  EXPECT_EQ(SplitPath("m", 12, 123456), "m-00012-of-123456.gguf");
}

}  // namespace
}  // namespace shoal::gguf
