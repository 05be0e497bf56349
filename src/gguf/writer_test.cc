// gguf::Writer tests: byte layout, round trips of every value type and of a real model, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "gguf/gguf.h"
#include "gguf/test_util.h"

namespace shoal::gguf {
namespace {

using testing::RawGguf;
using testing::ReadBytes;
using testing::TempDir;

// One value of every type, arrays of every element type, nested and empty arrays.
std::vector<std::pair<std::string, Value>> AllTypes() {
  std::vector<std::pair<std::string, Value>> kv = {
      {"t.u8", Value::U8(255)},
      {"t.i8", Value::I8(-128)},
      {"t.u16", Value::U16(65535)},
      {"t.i16", Value::I16(-32768)},
      {"t.u32", Value::U32(4294967295u)},
      {"t.i32", Value::I32(std::numeric_limits<int32_t>::min())},
      {"t.u64", Value::U64(~uint64_t{0})},
      {"t.i64", Value::I64(std::numeric_limits<int64_t>::min())},
      {"t.f32", Value::F32(-1.5e-7f)},
      {"t.f32_inf", Value::F32(std::numeric_limits<float>::infinity())},
      {"t.f32_nan", Value::F32(std::nanf(""))},
      {"t.f64", Value::F64(3.141592653589793)},
      {"t.bool_t", Value::Bool(true)},
      {"t.bool_f", Value::Bool(false)},
      {"t.str", Value::String("h\xc3\xa9llo \"world\"\n")},
      {"t.str_empty", Value::String("")},
      {"t.str_nul", Value::String(std::string("a\0b", 3))},
      {"t.arr_empty", Value::Array(ValueType::kU64, {})},
      {"t.arr_str", Value::Array(ValueType::kString, {Value::String("x"), Value::String("")})},
      {"t.arr_bools", Value::Array(ValueType::kBool, {Value::Bool(true), Value::Bool(false)})},
  };
  const Value scalars[] = {Value::U8(1),  Value::I8(-2),   Value::U16(3),    Value::I16(-4),
                           Value::U32(5), Value::I32(-6),  Value::U64(7),    Value::I64(-8),
                           Value::F32(9), Value::F64(-10), Value::Bool(true)};
  for (const Value& s : scalars) {
    kv.emplace_back(std::string("t.arr_") + ValueTypeName(s.type), Value::Array(s.type, {s, s, s}));
  }
  const Value inner = Value::Array(ValueType::kI32, {Value::I32(1), Value::I32(2)});
  const Value mid = Value::Array(ValueType::kArray, {inner, Value::Array(ValueType::kI32, {})});
  kv.emplace_back("t.nested", Value::Array(ValueType::kArray, {mid, mid}));
  Value deep = Value::String("bottom");  // kMaxArrayDepth levels: the deepest a reader accepts
  for (int d = 0; d < kMaxArrayDepth; ++d) deep = Value::Array(deep.type, {deep});
  kv.emplace_back("t.deep", deep);
  return kv;
}

std::vector<uint8_t> Iota(size_t n, uint8_t start) {
  std::vector<uint8_t> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<uint8_t>(start + k * 7);
  return v;
}

TEST(WriterTest, RoundTripEveryValueTypeAndTensors) {
  for (uint64_t alignment : {1u, 8u, 32u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    TempDir dir;
    const std::string path = dir.File("rt.gguf");
    Writer w(alignment);
    const auto kv = AllTypes();
    for (const auto& [k, v] : kv) w.SetValue(k, v);
    const std::vector<uint8_t> a = Iota(3 * 5 * 4, 1), b = Iota(18 * 2 * 3 * 2 * 2, 9);
    const std::vector<float> c = {1.5f, -2.0f, 3.25f};
    ASSERT_TRUE(w.AddTensor("a", DType::kF32, {3, 5}, a.data(), a.size()).ok());
    ASSERT_TRUE(w.AddTensorCopy("b.q4", DType::kQ4_0, {64, 3, 2, 2}, b).ok());
    ASSERT_TRUE(w.AddTensor("c", DType::kF32, {3}, c.data(), 12).ok());
    ASSERT_TRUE(w.AddTensor("empty", DType::kF16, {0, 4}, nullptr, 0).ok());
    const Status st = w.Write(path);
    ASSERT_TRUE(st.ok()) << st.message();

    auto f = File::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().message();
    EXPECT_EQ((*f)->version(), 3u);
    EXPECT_EQ((*f)->alignment(), alignment);
    // Same keys in the same order with identical values (plus general.alignment if not 32).
    const auto& md = (*f)->metadata();
    ASSERT_EQ(md.size(), kv.size() + (alignment != 32 ? 1 : 0));
    for (size_t k = 0; k < kv.size(); ++k) {
      EXPECT_EQ(md[k].first, kv[k].first);
      EXPECT_EQ(md[k].second, kv[k].second) << kv[k].first << ": " << md[k].second.ToString();
    }
    if (alignment != 32) {
      EXPECT_EQ((*f)->GetUint("general.alignment").value(), alignment);
    }
    // Tensors in order, each aligned, contiguous as llama.cpp requires, with identical bytes.
    const auto& ts = (*f)->tensors();
    ASSERT_EQ(ts.size(), 4u);
    EXPECT_EQ(ts[0].name, "a");
    EXPECT_EQ(ts[1].name, "b.q4");
    EXPECT_EQ(ts[1].type, DType::kQ4_0);
    EXPECT_EQ(ts[1].n_dims, 4);
    EXPECT_EQ(ts[1].ne, (std::array<int64_t, 4>{64, 3, 2, 2}));
    EXPECT_EQ(ts[3].ne, (std::array<int64_t, 4>{0, 4, 1, 1}));
    uint64_t expect_offset = 0;
    for (const TensorInfo& t : ts) {
      EXPECT_EQ(t.offset, expect_offset) << t.name;
      expect_offset = (t.offset + t.nbytes + alignment - 1) / alignment * alignment;
    }
    EXPECT_EQ(std::memcmp(ts[0].data, a.data(), a.size()), 0);
    EXPECT_EQ(std::memcmp(ts[1].data, b.data(), b.size()), 0);
    EXPECT_EQ(std::memcmp(ts[2].data, c.data(), 12), 0);
    EXPECT_EQ(ts[3].nbytes, 0u);
    // The data section is aligned and the file ends with the last tensor's padding.
    EXPECT_EQ((*f)->data_offset() % alignment, 0u);
    EXPECT_EQ((*f)->file_bytes(), (*f)->data_offset() + expect_offset);
  }
}

// The writer's bytes equal a hand-assembled file in the standard layout.
TEST(WriterTest, ExactLayout) {
  TempDir dir;
  Writer w;
  w.SetString("general.architecture", "llama");
  w.SetU32("llama.block_count", 2);
  const float data[2] = {1.0f, 2.0f};
  ASSERT_TRUE(w.AddTensor("w", DType::kF32, {2}, data, 8).ok());
  ASSERT_TRUE(w.AddTensor("v", DType::kF32, {1}, data, 4).ok());
  ASSERT_TRUE(w.Write(dir.File("x.gguf")).ok());

  RawGguf r;
  r.Header(3, 2, 2);
  r.Str("general.architecture");
  r.U32(8);
  r.Str("llama");
  r.Str("llama.block_count");
  r.U32(4);
  r.U32(2);
  r.Tensor("w", {2}, 0, 0);
  r.Tensor("v", {1}, 0, 32);
  r.PadTo(32);
  r.Pod(1.0f);
  r.Pod(2.0f);
  r.PadTo(32);
  r.Pod(1.0f);
  r.PadTo(32);
  EXPECT_EQ(ReadBytes(dir.File("x.gguf")), r.bytes);
}

TEST(WriterTest, SetValueReplacesInPlace) {
  TempDir dir;
  Writer w;
  w.SetU32("a", 1);
  w.SetString("b", "x");
  w.SetI32("a", -1);
  w.SetF32("c", 0.5f);
  w.SetBool("d", true);
  w.SetStringArray("e", {"p", "q"});
  w.SetF32Array("f", {1.0f});
  w.SetI32Array("g", {-1, 2});
  ASSERT_TRUE(w.Write(dir.File("x.gguf")).ok());
  auto f = File::Open(dir.File("x.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ((*f)->metadata().size(), 7u);
  EXPECT_EQ((*f)->metadata()[0].first, "a");
  EXPECT_EQ((*f)->metadata()[0].second, Value::I32(-1));
  EXPECT_EQ((*f)->GetStringArray("e").value(), (std::vector<std::string>{"p", "q"}));
  EXPECT_EQ((*f)->GetNumberArray("g").value(), (std::vector<double>{-1, 2}));
  EXPECT_TRUE((*f)->GetBool("d").value());
  EXPECT_DOUBLE_EQ((*f)->GetFloat("c").value(), 0.5);
}

// Rewriting every shared model (written by llama.cpp's gguf writer, gguf-py and llama-quantize)
// with Writer reproduces the file byte for byte: same header, order, padding and data layout.
TEST(WriterTest, RewriteRealModelsByteIdentical) {
  std::vector<std::string> paths;
  for (const char* dir : {"models", "models/tiny"}) {
    const std::string d = testing::SharedPath(dir);
    if (!testing::Exists(d)) continue;
    for (const auto& e : std::filesystem::directory_iterator(d)) {
      if (e.path().extension() == ".gguf") paths.push_back(e.path().string());
    }
  }
  if (paths.empty()) GTEST_SKIP() << "no shared models";
  TempDir dir;
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    auto src = File::Open(path);
    ASSERT_TRUE(src.ok()) << src.status().message();
    Writer w((*src)->alignment());
    w.CopyMetadata(**src, "");
    w.CopyMetadata(**src, "general.alignment");  // keeps the key where the source has it
    for (const TensorInfo& t : (*src)->tensors()) {
      std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
      ASSERT_TRUE(w.AddTensor(t.name, t.type, ne, t.data, t.nbytes).ok());
    }
    ASSERT_TRUE(w.Write(dir.File("copy.gguf")).ok());
    EXPECT_TRUE(ReadBytes(dir.File("copy.gguf")) == ReadBytes(path));
  }
}

TEST(WriterTest, CopyMetadataPrefix) {
  const std::string src_path = testing::SharedPath("models/stories260K.gguf");
  if (!testing::Exists(src_path)) GTEST_SKIP() << src_path;
  auto src = File::Open(src_path);
  ASSERT_TRUE(src.ok()) << src.status().message();
  TempDir dir;
  Writer w;
  w.CopyMetadata(**src, "tokenizer.");
  ASSERT_TRUE(w.Write(dir.File("tok.gguf")).ok());
  auto tok = File::Open(dir.File("tok.gguf"));
  ASSERT_TRUE(tok.ok());
  for (const auto& [key, v] : (*tok)->metadata()) EXPECT_TRUE(key.starts_with("tokenizer.")) << key;
  EXPECT_EQ((*tok)->GetStringArray("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(*(*tok)->Find("tokenizer.ggml.scores"), *(*src)->Find("tokenizer.ggml.scores"));
  // Layout keys of the source are left out unless asked for by name.
  const std::string split =
      testing::SharedPath("models/split/stories260K-split-00001-of-00003.gguf");
  if (!testing::Exists(split)) return;
  auto sp = File::Open(split);
  ASSERT_TRUE(sp.ok()) << sp.status().message();
  Writer w2;
  w2.CopyMetadata(**sp, "");
  ASSERT_TRUE(w2.Write(dir.File("merged.gguf")).ok());
  auto merged = File::Open(dir.File("merged.gguf"));
  ASSERT_TRUE(merged.ok()) << merged.status().message();
  EXPECT_EQ((*merged)->Find("split.count"), nullptr);
  Writer w3;
  w3.CopyMetadata(**sp, "split.");
  ASSERT_TRUE(w3.Write(dir.File("s.gguf")).ok());
  auto s = File::OpenSingle(dir.File("s.gguf"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->metadata().size(), 3u);
}

TEST(WriterTest, AddTensorErrors) {
  Writer w;
  const std::vector<uint8_t> d(4096);
  EXPECT_FALSE(w.AddTensor("", DType::kF32, {1}, d.data(), 4).ok());
  EXPECT_FALSE(w.AddTensor(std::string(64, 'n'), DType::kF32, {1}, d.data(), 4).ok());
  EXPECT_TRUE(w.AddTensor(std::string(63, 'n'), DType::kF32, {1}, d.data(), 4).ok());
  EXPECT_TRUE(w.AddTensor("x", DType::kF32, {1}, d.data(), 4).ok());
  EXPECT_FALSE(w.AddTensor("x", DType::kF32, {1}, d.data(), 4).ok());  // duplicate
  EXPECT_FALSE(w.AddTensor("y", static_cast<DType>(5), {1}, d.data(), 4).ok());
  EXPECT_FALSE(w.AddTensor("y", DType::kF32, {}, d.data(), 0).ok());
  EXPECT_FALSE(w.AddTensor("y", DType::kF32, {1, 1, 1, 1, 1}, d.data(), 4).ok());
  EXPECT_FALSE(w.AddTensor("y", DType::kF32, {-1}, d.data(), 0).ok());
  EXPECT_FALSE(w.AddTensor("y", DType::kQ4_0, {33}, d.data(), 18).ok());
  EXPECT_FALSE(w.AddTensor("y", DType::kF32, {2}, d.data(), 4).ok());  // wrong byte count
  EXPECT_FALSE(w.AddTensor("y", DType::kF32, {1}, nullptr, 4).ok());
  EXPECT_FALSE(w.AddTensor("y", DType::kF32, {int64_t{1} << 62, 4}, d.data(), 0).ok());
  EXPECT_FALSE(w.AddTensor("y", DType::kF32, {int64_t{1} << 61}, d.data(), 0).ok());
  const Status st = w.AddTensor("yy", DType::kQ8_0, {32, 2}, d.data(), 60);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'yy'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("68"), std::string::npos) << st.message();
}

TEST(WriterTest, WriteErrors) {
  TempDir dir;
  auto fails = [&](const Writer& w, const std::string& needle) {
    const Status st = w.Write(dir.File("bad.gguf"));
    EXPECT_FALSE(st.ok()) << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    EXPECT_FALSE(testing::Exists(dir.File("bad.gguf")));
    EXPECT_FALSE(testing::Exists(dir.File("bad.gguf.tmp")));
  };
  for (uint64_t a : {uint64_t{0}, uint64_t{3}, uint64_t{1} << 32}) fails(Writer(a), "alignment");
  {
    Writer w;
    w.SetValue("k", Value::U8(0));
    Value bad = Value::U8(0);
    bad.u = 256;
    w.SetValue("k", bad);
    fails(w, "'k'");
  }
  {
    Writer w;
    w.SetValue("k", Value::Array(ValueType::kI32, {Value::I32(1), Value::U32(2)}));
    fails(w, "element 1");
  }
  {
    Writer w;
    Value v = Value::I16(0);
    v.i = 40000;
    w.SetValue("k", v);
    fails(w, "does not fit");
  }
  {
    Writer w;
    w.SetValue("k", Value::F32(0));
    Value v = Value::F32(0);
    v.f = 1e300;
    w.SetValue("k", v);
    fails(w, "f32");
  }
  {
    Writer w;
    Value deep = Value::U8(1);
    for (int d = 0; d <= kMaxArrayDepth; ++d) deep = Value::Array(deep.type, {deep});
    w.SetValue("deep", deep);
    fails(w, "nested");
  }
  {
    Writer w;
    Value v;
    v.type = static_cast<ValueType>(13);
    w.SetValue("k", v);
    fails(w, "unknown value type");
  }
  {
    Writer w;
    w.SetValue("", Value::U8(1));
    fails(w, "empty");
  }
  {
    Writer w(64);
    w.SetValue("general.alignment", Value::U32(32));
    fails(w, "general.alignment");
  }
  {
    Writer w(64);
    w.SetValue("general.alignment", Value::U64(64));  // llama.cpp requires u32
    fails(w, "general.alignment");
  }
  EXPECT_FALSE(Writer().Write("/nonexistent/dir/x.gguf").ok());
}

TEST(WriterTest, ExplicitAlignmentKeyIsKept) {
  TempDir dir;
  Writer w(64);
  w.SetU32("general.alignment", 64);
  ASSERT_TRUE(w.Write(dir.File("a.gguf")).ok());
  auto f = File::Open(dir.File("a.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->metadata().size(), 1u);
}

}  // namespace
}  // namespace shoal::gguf
