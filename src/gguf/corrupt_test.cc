// Corrupt-file corpus: crafted bad headers, truncations, byte flips and absurd field values on a
// written file and on stories260K. Every case must fail with a message naming the file, and
// nothing may crash or read out of bounds (run under ASan/UBSan).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "gguf/gguf.h"
#include "gguf/reader.h"
#include "gguf/test_util.h"

namespace shoal::gguf {
namespace {

using testing::RawGguf;
using testing::TempDir;

constexpr uint64_t kHuge[] = {uint64_t{1} << 31, uint64_t{1} << 32, uint64_t{1} << 60,
                              uint64_t{1} << 63, ~uint64_t{0},      ~uint64_t{0} - 31};

// Parses `size` bytes at `data`, where the caller's allocation holds exactly those bytes (so that
// ASan flags any read past the end).
Status ParseExact(const uint8_t* data, size_t size, const std::string& name,
                  SingleFile* out = nullptr, uint64_t max_values = kMaxMetadataValues) {
  SingleFile sf;
  Status st = Parser(name, data, size, max_values).Parse(out ? out : &sf);
  if (out) out->tensors.clear();  // their data pointers die with the caller's buffer
  return st;
}

// Parses `bytes` from an exact-size heap copy.
Status ParseBytes(const std::vector<uint8_t>& bytes, const std::string& name,
                  SingleFile* out = nullptr, uint64_t max_values = kMaxMetadataValues) {
  std::unique_ptr<uint8_t[]> copy(bytes.empty() ? nullptr : new uint8_t[bytes.size()]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  return ParseExact(copy.get(), bytes.size(), name, out, max_values);
}

// The parse fails and the message names the file (and contains `needle`).
void ExpectBad(const std::vector<uint8_t>& bytes, const std::string& needle = "") {
  const std::string name = "corrupt.gguf";
  const Status st = ParseBytes(bytes, name);
  ASSERT_FALSE(st.ok()) << "accepted; expected an error containing '" << needle << "'";
  EXPECT_TRUE(st.message().starts_with(name + ": ")) << st.message();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

// The parse may succeed or fail, but a failure names the file.
void ExpectNoCrash(const std::vector<uint8_t>& bytes, const std::string& name) {
  const Status st = ParseBytes(bytes, name);
  if (!st.ok()) {
    EXPECT_TRUE(st.message().starts_with(name + ": ")) << st.message();
  }
}

// A small valid file with field offsets recorded for targeted corruption.
struct Crafted {
  RawGguf r;
  size_t n_tensors, n_kv, str_len, arr_type, arr_elem_type, arr_len, nested_len, bool_val;
  size_t align_val, t_name, t_ndims, t_ne0, t_ne1, t_type, t_offset, t2_offset;
};

Crafted MakeCrafted(uint64_t alignment_value = 32) {
  Crafted c;
  RawGguf& r = c.r;
  r.Header(3, 2, 5);
  c.n_tensors = 8;
  c.n_kv = 16;
  r.Str("general.name");
  r.U32(8);
  c.str_len = r.Str("tiny");
  r.Str("a.arr");
  c.arr_type = r.U32(9);
  c.arr_elem_type = r.U32(8);
  c.arr_len = r.U64(2);
  r.Str("x");
  r.Str("yz");
  r.Str("a.nested");
  r.U32(9);
  r.U32(9);
  c.nested_len = r.U64(1);
  r.U32(4);
  r.U64(1);
  r.U32(7);
  r.Str("a.flag");
  r.U32(7);
  c.bool_val = r.bytes.size();
  r.Pod<uint8_t>(1);
  r.Str("general.alignment");
  r.U32(10);  // u64, so that absurd values can be stored
  c.align_val = r.U64(alignment_value);
  c.t_name = r.Str("w");
  c.t_ndims = r.U32(2);
  c.t_ne0 = r.U64(4);
  c.t_ne1 = r.U64(2);
  c.t_type = r.U32(0);
  c.t_offset = r.U64(0);
  r.Str("v");
  r.U32(1);
  r.U64(32);
  r.U32(8);  // q8_0: one 34-byte block
  c.t2_offset = r.U64(32);
  r.PadTo(32);
  r.bytes.resize(r.bytes.size() + 32 + 34, 0x5a);
  return c;
}

TEST(CorruptTest, CraftedFileIsValid) {
  Crafted c = MakeCrafted();
  SingleFile sf;
  const Status st = ParseBytes(c.r.bytes, "ok.gguf", &sf);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(sf.kv.size(), 5u);
  EXPECT_EQ(sf.kv[2].second.ToString(), "[[7]]");
}

TEST(CorruptTest, HeaderErrors) {
  ExpectBad({}, "too small");
  ExpectBad({'G', 'G', 'U'}, "too small");
  ExpectBad({'G', 'G', 'U', 'F'}, "version");
  ExpectBad({'G', 'G', 'M', 'L', 3, 0, 0, 0}, "not a GGUF file");
  RawGguf v1;
  v1.Header(1, 0, 0);
  ExpectBad(v1.bytes, "version 1 is not supported");
  RawGguf v4;
  v4.Header(4, 0, 0);
  ExpectBad(v4.bytes, "unsupported GGUF version 4");
  RawGguf be;
  be.Header(0x03000000, 0, 0);
  ExpectBad(be.bytes, "big-endian");
  RawGguf shortcount;
  shortcount.Header(3, 0, 0);
  shortcount.bytes.resize(20);
  ExpectBad(shortcount.bytes, "metadata count");
  RawGguf ok2, ok3;
  ok2.Header(2, 0, 0);
  ok3.Header(3, 0, 0);
  EXPECT_TRUE(ParseBytes(ok2.bytes, "v2.gguf").ok());
  EXPECT_TRUE(ParseBytes(ok3.bytes, "v3.gguf").ok());
}

TEST(CorruptTest, AbsurdFieldValues) {
  // Each (field, value) must be rejected.
  const auto bad = [](size_t Crafted::*field, uint64_t value, const std::string& needle,
                      int width = 8) {
    Crafted c = MakeCrafted();
    if (width == 8) c.r.Set<uint64_t>(c.*field, value);
    if (width == 4) c.r.Set<uint32_t>(c.*field, static_cast<uint32_t>(value));
    if (width == 1) c.r.Set<uint8_t>(c.*field, static_cast<uint8_t>(value));
    SCOPED_TRACE(needle + " " + std::to_string(value));
    ExpectBad(c.r.bytes, needle);
  };
  for (uint64_t h : kHuge) {
    bad(&Crafted::n_tensors, h, "tensor count");
    bad(&Crafted::n_kv, h, "metadata count");
    bad(&Crafted::str_len, h, "length");
    bad(&Crafted::arr_len, h, "array length");
    bad(&Crafted::nested_len, h, "array length");
    bad(&Crafted::t_ne0, h, "tensor 'w'");
    bad(&Crafted::t_ne1, h, "tensor 'w'");
    bad(&Crafted::t_offset, h, "tensor 'w'");
    bad(&Crafted::t2_offset, h, "tensor 'v'");
    bad(&Crafted::t_name, h, "tensor #0");
    // 2^31 is a valid alignment, but then the data section starts past the end of the file.
    bad(&Crafted::align_val, h, h == uint64_t{1} << 31 ? "extends past end of file" : "alignment");
  }
  bad(&Crafted::n_tensors, 3, "");  // more tensors than present: runs into the data
  bad(&Crafted::n_kv, 6, "");
  bad(&Crafted::str_len, 200, "only");
  bad(&Crafted::arr_type, 13, "unknown value type 13", 4);
  bad(&Crafted::arr_type, 0xffffffff, "unknown value type", 4);
  bad(&Crafted::arr_elem_type, 13, "array element type", 4);
  bad(&Crafted::bool_val, 2, "must be 0 or 1", 1);
  bad(&Crafted::align_val, 0, "alignment");
  bad(&Crafted::align_val, 3, "alignment");
  bad(&Crafted::align_val, 48, "alignment");
  bad(&Crafted::align_val, 64, "not a multiple of the alignment");  // tensor 'v' at 32
  bad(&Crafted::t_ndims, 0, "0 dimensions", 4);
  bad(&Crafted::t_ndims, 5, "5 dimensions", 4);
  bad(&Crafted::t_ndims, 0xffffffff, "dimensions", 4);
  bad(&Crafted::t_ndims, 4, "", 4);  // shifts the following fields
  bad(&Crafted::t_type, 5, "q4_3 (removed from ggml)", 4);
  bad(&Crafted::t_type, 16, "tensor type iq2_xxs (ggml type id 16) is not supported", 4);
  bad(&Crafted::t_type, 99, "unknown tensor type id 99", 4);
  bad(&Crafted::t_type, 2, "not a multiple of the q4_0 block size 32", 4);
  bad(&Crafted::t_offset, 1, "not a multiple of the alignment 32");
  bad(&Crafted::t_offset, 64, "extends past end of file");
  bad(&Crafted::t2_offset, 64, "extends past end of file");
  bad(&Crafted::t2_offset, 0, "overlaps tensor 'w'");
  bad(&Crafted::t_ne1, uint64_t{1} << 40, "extends past end of file");
  // ne products that overflow int64, and byte sizes that overflow uint64.
  {
    Crafted c = MakeCrafted();
    c.r.Set<uint64_t>(c.t_ne0, uint64_t{1} << 32);
    c.r.Set<uint64_t>(c.t_ne1, uint64_t{1} << 32);
    ExpectBad(c.r.bytes, "overflows the element count");
    c.r.Set<uint64_t>(c.t_ne0, uint64_t{1} << 62);
    c.r.Set<uint64_t>(c.t_ne1, 1);
    ExpectBad(c.r.bytes, "byte size");
  }
  // Alignment stored as another type.
  {
    Crafted c = MakeCrafted();
    c.r.Set<uint32_t>(c.align_val - 4, 8);  // now a string of length 32 -> runs into tensors
    ExpectBad(c.r.bytes, "");
  }
}

TEST(CorruptTest, StructuralErrors) {
  const auto one_kv = [](const std::string& key, auto add_value) {
    RawGguf r;
    r.Header(3, 0, 1);
    r.Str(key);
    add_value(r);
    return r.bytes;
  };
  ExpectBad(one_kv("", [](RawGguf& r) { r.U32(4), r.U32(1); }), "empty key");
  ExpectBad(one_kv("general.alignment", [](RawGguf& r) { r.U32(8), r.Str("32"); }),
            "must be an unsigned integer");
  ExpectBad(one_kv("general.alignment", [](RawGguf& r) { r.U32(5), r.U32(-32); }), "alignment");
  // An array of 2^60 u8 in a tiny file fails before allocating anything.
  ExpectBad(one_kv("a", [](RawGguf& r) { r.U32(9), r.U32(0), r.U64(uint64_t{1} << 60); }),
            "cannot fit");
  // Arrays nested deeper than the limit; the limit itself is fine.
  for (int depth : {kMaxArrayDepth, kMaxArrayDepth + 1, 1000}) {
    auto bytes = one_kv("deep", [depth](RawGguf& r) {
      r.U32(9);
      for (int d = 1; d < depth; ++d) r.U32(9), r.U64(1);
      r.U32(0), r.U64(1), r.Pod<uint8_t>(7);
    });
    if (depth <= kMaxArrayDepth) {
      EXPECT_TRUE(ParseBytes(bytes, "deep.gguf").ok()) << depth;
    } else {
      ExpectBad(bytes, "nested deeper");
    }
  }
  // Duplicate key, duplicate tensor, empty tensor name.
  RawGguf dup;
  dup.Header(3, 0, 2);
  dup.Str("k"), dup.U32(0), dup.Pod<uint8_t>(1);
  dup.Str("k"), dup.U32(0), dup.Pod<uint8_t>(2);
  ExpectBad(dup.bytes, "duplicate key");
  for (const char* second : {"w", ""}) {
    RawGguf t;
    t.Header(3, 2, 0);
    t.Tensor("w", {8}, 0, 0);
    t.Tensor(second, {8}, 0, 32);
    t.PadTo(32);
    t.bytes.resize(t.bytes.size() + 64);
    ExpectBad(t.bytes, *second ? "duplicate tensor name" : "empty tensor name");
  }
  // Names from the file appear escaped and shortened in messages: one line, bounded length.
  RawGguf ctl;
  ctl.Header(3, 1, 0);
  ctl.Tensor("bad\nname" + std::string(1000, 'x'), {8}, 99, 0);
  {
    const Status st = ParseBytes(ctl.bytes, "ctl.gguf");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("bad\\x0aname"), std::string::npos) << st.message();
    EXPECT_LT(st.message().size(), 300u) << st.message();
  }
  // A tensor with a zero dimension is valid and holds no bytes, even at the end of the file.
  RawGguf z;
  z.Header(3, 1, 0);
  z.Tensor("z", {0, 3}, 0, 0);
  z.PadTo(32);
  SingleFile sf;
  EXPECT_TRUE(ParseBytes(z.bytes, "zero.gguf", &sf).ok());
  // Too many metadata values in total (each array fits on its own); a small limit keeps the test
  // light, the real one (kMaxMetadataValues) works the same way.
  RawGguf many;
  many.Header(3, 0, 3);
  many.Str("s"), many.U32(4), many.U32(1);
  for (const char* key : {"a", "b"}) {
    many.Str(key), many.U32(9), many.U32(0), many.U64(50);
    many.bytes.resize(many.bytes.size() + 50, 1);
  }
  EXPECT_TRUE(ParseBytes(many.bytes, "many.gguf", nullptr, 103).ok());
  for (uint64_t limit : {0, 1, 50, 51, 52, 101, 102}) {
    const Status st = ParseBytes(many.bytes, "many.gguf", nullptr, limit);
    ASSERT_FALSE(st.ok()) << limit;
    EXPECT_NE(st.message().find("limit"), std::string::npos) << st.message();
  }
}

// Data must end no later than this for the file to be valid.
uint64_t DataEnd(const File& f) {
  uint64_t end = f.data_offset();
  for (const TensorInfo& t : f.tensors())
    end = std::max(end, f.data_offset() + t.offset + t.nbytes);
  return end;
}

std::vector<uint8_t> WriteSmallFile(const std::string& path) {
  Writer w;
  w.SetString("general.architecture", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "bc"});
  w.SetF32Array("tokenizer.ggml.scores", {0, -1, -2.5f});
  w.SetValue("n",
             Value::Array(ValueType::kArray, {Value::Array(ValueType::kU16, {Value::U16(1)})}));
  w.SetValue("u64", Value::U64(1));
  w.SetBool("b", true);
  std::vector<uint8_t> q(34 * 2, 3), f(4 * 3, 4);
  EXPECT_TRUE(w.AddTensorCopy("q", DType::kQ8_0, {64}, q).ok());
  EXPECT_TRUE(w.AddTensorCopy("f", DType::kF32, {3, 1, 1}, f).ok());
  EXPECT_TRUE(w.Write(path).ok());
  return testing::ReadBytes(path);
}

// Truncating the written file anywhere before the end of its data fails, through File::Open.
TEST(CorruptTest, TruncatedWrittenFileEveryByte) {
  TempDir dir;
  const auto bytes = WriteSmallFile(dir.File("small.gguf"));
  auto good = File::Open(dir.File("small.gguf"));
  ASSERT_TRUE(good.ok()) << good.status().message();
  const uint64_t end = DataEnd(**good);
  const std::string cut_path = dir.File("cut.gguf");
  for (size_t n = 0; n < bytes.size(); ++n) {
    testing::WriteBytes(cut_path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + n));
    auto f = File::Open(cut_path);
    if (n < end) {
      ASSERT_FALSE(f.ok()) << "cut at " << n;
      EXPECT_NE(f.status().message().find("cut.gguf"), std::string::npos) << f.status().message();
    } else {
      EXPECT_TRUE(f.ok()) << "cut in the final padding at " << n << ": " << f.status().message();
    }
  }
}

TEST(CorruptTest, MutatedWrittenFile) {
  TempDir dir;
  auto bytes = WriteSmallFile(dir.File("small.gguf"));
  const size_t header = File::Open(dir.File("small.gguf")).value()->data_offset();
  // Every header byte set to a few values.
  for (size_t k = 0; k < header; ++k) {
    const uint8_t saved = bytes[k];
    for (uint8_t v : {uint8_t(saved ^ 0xff), uint8_t(0), uint8_t(0x80), uint8_t(saved + 1)}) {
      bytes[k] = v;
      ExpectNoCrash(bytes, "mutated.gguf");
    }
    bytes[k] = saved;
  }
  // Every 4- and 8-byte window of the header set to absurd values.
  for (size_t k = 0; k + 8 <= header; ++k) {
    std::vector<uint8_t> m = bytes;
    for (uint64_t h : kHuge) {
      std::memcpy(m.data() + k, &h, 8);
      ExpectNoCrash(m, "mutated.gguf");
      std::memcpy(m.data() + k, &h, 4);
      std::memcpy(m.data() + k + 4, bytes.data() + k + 4, 4);
      ExpectNoCrash(m, "mutated.gguf");
    }
  }
  // Random multi-byte mutations and truncations (deterministic).
  std::mt19937_64 rng(1234);
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> m = bytes;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) m[rng() % header] = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) m.resize(rng() % m.size());
    ExpectNoCrash(m, "random.gguf");
  }
}

// stories260K: truncations through the header and spread over the data; header byte flips;
// absurd counts at the real fields.
TEST(CorruptTest, Stories260K) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (!testing::Exists(path)) GTEST_SKIP() << path;
  auto good = File::Open(path);
  ASSERT_TRUE(good.ok()) << good.status().message();
  const uint64_t header = (*good)->data_offset(), end = DataEnd(**good);
  auto bytes = testing::ReadBytes(path);
  ASSERT_EQ(bytes.size(), (*good)->file_bytes());
  std::vector<size_t> cuts;
  for (size_t n = 0; n <= header + 64; ++n) cuts.push_back(n);
  for (size_t n = header; n < bytes.size(); n += 4099) cuts.push_back(n);
  cuts.push_back(end - 1);
  for (size_t n : cuts) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    const Status st = ParseBytes(cut, "stories-cut.gguf");
    if (n < end) {
      ASSERT_FALSE(st.ok()) << n;
      EXPECT_TRUE(st.message().starts_with("stories-cut.gguf: ")) << st.message();
    }
  }
  // Flipped in place in one exact-size buffer (copying 1 MB per flip would dominate the test):
  // every byte of the first 1 KB (counts, first keys) and of the last 3 KB (tensor infos), every
  // 13th byte of the ~10 KB of vocabulary between (each parse takes ~1 ms in a Debug build).
  std::unique_ptr<uint8_t[]> exact(new uint8_t[bytes.size()]);
  std::memcpy(exact.get(), bytes.data(), bytes.size());
  for (size_t k = 0; k < header; k += (k < 1024 || k + 3072 >= header) ? 1 : 13) {
    exact[k] ^= 0xff;
    const Status st = ParseExact(exact.get(), bytes.size(), "stories-flip.gguf");
    if (!st.ok()) {
      EXPECT_TRUE(st.message().starts_with("stories-flip.gguf: ")) << st.message();
    }
    exact[k] ^= 0xff;
  }
  // The tokens array length and the first tensor's dims, set absurd in place.
  const std::string key = "tokenizer.ggml.tokens";
  auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end()) - bytes.begin();
  const size_t len_at = at + key.size() + 4 + 4;  // after value type and element type
  ASSERT_EQ(bytes[at + key.size()], 9);
  for (uint64_t h : kHuge) {
    std::vector<uint8_t> m = bytes;
    std::memcpy(m.data() + len_at, &h, 8);
    const Status st = ParseBytes(m, "stories-len.gguf");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("tokenizer.ggml.tokens"), std::string::npos) << st.message();
  }
  const std::string tname = "token_embd.weight";
  at = std::search(bytes.begin(), bytes.end(), tname.begin(), tname.end()) - bytes.begin();
  for (uint64_t h : kHuge) {
    std::vector<uint8_t> m = bytes;
    std::memcpy(m.data() + at + tname.size() + 4, &h, 8);  // ne[0]
    const Status st = ParseBytes(m, "stories-ne.gguf");
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("token_embd.weight"), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace shoal::gguf
