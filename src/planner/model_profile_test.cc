// Tests of the model profile: tensor bytes per layer and stage, KV bytes, buffers.
#include "planner/model_profile.h"

#include <gtest/gtest.h>

#include <map>

#include "base/test_support.h"
#include "kernels/ops.h"
#include "kvcache/kv_store.h"
#include "planner/test_models.h"

namespace shoal::planner {
namespace {

using shoal::testing::SharedPath;
using shoal::testing::TempDir;
using testing::HParamsOf;
using testing::SynthProfile;

// Bytes of each layer straight from the tensor table, for comparison with the profile.
std::map<int, uint64_t> LayerBytes(const gguf::File& f) {
  std::map<int, uint64_t> m;
  for (const gguf::TensorInfo& t : f.tensors()) {
    int l = -1;
    if (std::sscanf(t.name.c_str(), "blk.%d.", &l) == 1) m[l] += t.nbytes;
  }
  return m;
}

void CheckAgainstFile(const gguf::File& f, const ModelProfile& p) {
  const std::map<int, uint64_t> layers = LayerBytes(f);
  ASSERT_EQ(static_cast<size_t>(p.n_layer()), layers.size());
  uint64_t sum = 0, table = 0;
  for (int l = 0; l < p.n_layer(); ++l) {
    EXPECT_EQ(p.layers[static_cast<size_t>(l)].bytes, layers.at(l)) << "layer " << l;
    sum += p.layers[static_cast<size_t>(l)].bytes;
  }
  sum += p.token_embd.bytes + p.head.bytes + p.other.bytes;
  for (const gguf::TensorInfo& t : f.tensors()) table += t.nbytes;
  EXPECT_EQ(sum, table);
  EXPECT_EQ(sum, p.total_bytes);
  // The data section holds exactly these bytes plus at most one alignment pad per tensor.
  const uint64_t data_section = f.file_bytes() - f.data_offset(0);
  EXPECT_LE(sum, data_section);
  EXPECT_GE(sum + f.tensors().size() * f.alignment(), data_section);
  EXPECT_EQ(p.StageWeightBytes(0, p.n_layer()), sum);  // one stage maps every tensor once
}

TEST(ModelProfileTest, Stories260KLayersSumToTheFile) {
  auto f = gguf::File::Open(SharedPath("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto p = ProfileFromGguf(**f);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->n_layer(), 5);
  CheckAgainstFile(**f, *p);
  EXPECT_GT(p->token_embd.bytes, 0u);
  EXPECT_EQ(p->token_embd.bytes, (*f)->FindTensor("token_embd.weight")->nbytes);
  // Stage split: the first stage maps token_embd, the last the head; a middle stage neither.
  const uint64_t l2 = p->layers[2].bytes;
  EXPECT_EQ(p->StageWeightBytes(2, 3), l2 + p->other.bytes);
  EXPECT_EQ(p->StageWeightBytes(0, 1), p->layers[0].bytes + p->token_embd.bytes + p->other.bytes);
  uint64_t last = p->layers[4].bytes + p->head.bytes + p->other.bytes;
  if (p->hp.tied_embeddings) last += p->token_embd.bytes;
  EXPECT_EQ(p->StageWeightBytes(4, 5), last);
}

TEST(ModelProfileTest, TiedEmbeddingsGoToTheLastStageToo) {
  auto f = gguf::File::Open(SharedPath("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok());
  auto p = ProfileFromGguf(**f);
  ASSERT_TRUE(p.ok());
  ModelProfile tied = *p;
  tied.hp.tied_embeddings = true;
  tied.head = TensorCost{};
  EXPECT_EQ(tied.StageWeightBytes(4, 5),
            tied.layers[4].bytes + tied.token_embd.bytes + tied.other.bytes);
  // One stage serving everything maps token_embd once.
  EXPECT_EQ(tied.StageWeightBytes(0, 5), tied.total_bytes - p->head.bytes);
}

TEST(ModelProfileTest, SynthesizedFileMatchesItsShapeList) {
  // A real file written by the synthesizer and the profile computed from shapes alone agree.
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  SynthOptions opt;
  opt.preset = "tiny";
  opt.type = DType::kQ8_0;
  opt.n_threads = 1;
  ASSERT_TRUE(SynthesizeModel(opt, dir.File("tiny.gguf")).ok());
  auto f = gguf::File::Open(dir.File("tiny.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().message();
  auto from_file = ProfileFromGguf(**f);
  ASSERT_TRUE(from_file.ok()) << from_file.status().message();
  CheckAgainstFile(**f, *from_file);
  auto preset = FindSynthPreset("tiny");
  ASSERT_TRUE(preset.ok());
  auto from_shapes = SynthProfile(*preset, DType::kQ8_0);
  ASSERT_TRUE(from_shapes.ok()) << from_shapes.status().message();
  ASSERT_EQ(from_shapes->n_layer(), from_file->n_layer());
  for (int l = 0; l < from_file->n_layer(); ++l)
    EXPECT_EQ(from_shapes->layers[static_cast<size_t>(l)].bytes,
              from_file->layers[static_cast<size_t>(l)].bytes);
  EXPECT_EQ(from_shapes->total_bytes, from_file->total_bytes);
  EXPECT_EQ(from_shapes->layers[0].matmul_params(), from_file->layers[0].matmul_params());
  EXPECT_EQ(from_file->hp.k_dim(), HParamsOf(*preset).k_dim());
}

TEST(ModelProfileTest, TinyModelsInSharedFolderProfile) {
  for (const char* name : {"models/tiny/llama-q4_0.gguf", "models/tiny/qwen3-q8_0.gguf",
                           "models/tiny-dense256-random-q4_k_m.gguf"}) {
    SCOPED_TRACE(name);
    auto f = gguf::File::Open(SharedPath(name));
    ASSERT_TRUE(f.ok()) << f.status().message();
    auto p = ProfileFromGguf(**f);
    ASSERT_TRUE(p.ok()) << p.status().message();
    CheckAgainstFile(**f, *p);
  }
}

TEST(ModelProfileTest, KvBytesMatchKvLayout) {
  auto f = gguf::File::Open(SharedPath("models/stories260K.gguf"));
  ASSERT_TRUE(f.ok());
  auto p = ProfileFromGguf(**f);
  ASSERT_TRUE(p.ok());
  auto preset = FindSynthPreset("1b");
  ASSERT_TRUE(preset.ok());
  for (const HParams& hp : {p->hp, HParamsOf(*preset)}) {
    for (DType dt : {DType::kF16, DType::kF32}) {
      KvLayout lay;
      lay.n_layers = 3;
      lay.k_dim = hp.k_dim();
      lay.v_dim = hp.v_dim();
      lay.dtype = dt;
      lay.block_size = 16;
      lay.n_blocks = 1;
      auto per = KvBytesPerTokenPerLayer(hp, dt);
      ASSERT_TRUE(per.ok());
      EXPECT_EQ(*per * 3 * 16, lay.BytesPerBlock());
    }
  }
  // TinyLlama: 4 KV heads of 64, F16: (256 + 256) * 2 bytes per token and layer.
  EXPECT_EQ(*KvBytesPerTokenPerLayer(HParamsOf(*preset), DType::kF16), 1024u);
  EXPECT_FALSE(KvBytesPerTokenPerLayer(p->hp, DType::kQ8_0).ok());
}

TEST(ModelProfileTest, BuffersFollowTheWorkspace) {
  auto preset = FindSynthPreset("1b");
  ASSERT_TRUE(preset.ok());
  auto p = SynthProfile(*preset, DType::kQ4_0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  BufferInputs in;
  in.max_tokens = 100;
  in.max_out_rows = 4;
  in.max_context = 2048;
  in.n_threads = 2;
  in.link_row_bytes = 2 * 2048;
  const BufferBytes mid = StageBufferBytes(*p, false, false, in);
  // x, xn, tmp [E] + q [2048] + k, v [256] + att [2048] + gate, up [5632] + rope [64], f32.
  EXPECT_EQ(mid.workspace, 100u * (3 * 2048 + 2048 + 256 + 256 + 2048 + 2 * 5632 + 64) * 4);
  // Per thread what the forward allocates: AttendHeads' scratch for a group of 8 heads (32 / 4).
  EXPECT_EQ(mid.attention, 2u * kernels::AttendHeadsScratch(8, 64, 64, 2048) * 4);
  EXPECT_EQ(mid.attention, 2u * ((64 + 1 + 64) * 64 + 8 * 66 + 8) * 4);
  EXPECT_EQ(mid.io, 2 * (100u * 2048 * 4 + 100u * 4096));  // hidden in and out, f32 + wire
  // Widest matmul input is ffn_down's 5632 values; Q8_K-sized activations bound it from above.
  EXPECT_GE(mid.matmul_scratch, 100u * 5632 * 34 / 32);
  EXPECT_LE(mid.matmul_scratch, 100u * 5632 * 2);
  const BufferBytes last = StageBufferBytes(*p, false, true, in);
  EXPECT_EQ(last.workspace, mid.workspace + 4u * 2048 * 4);            // normed output rows
  EXPECT_EQ(last.io, 100u * 2048 * 4 + 100u * 4096 + 4u * 32000 * 4);  // logits [4, n_vocab]
  const BufferBytes first = StageBufferBytes(*p, true, false, in);
  EXPECT_EQ(first.io, 100u * 4 + 100u * 2048 * 4 + 100u * 4096);
  // Linear in the batch: twice the tokens, twice the workspace.
  in.max_tokens = 200;
  EXPECT_EQ(StageBufferBytes(*p, false, false, in).workspace, 2 * mid.workspace);
}

// kimi-k3's attention residuals: a stage starting at layer k receives 1 + ceil(k / B) planes of
// hidden rows, sends the planes of its last layer and keeps the banked ones.
TEST(ModelProfileTest, AttentionResidualPlanes) {
  HParams hp;
  hp.attn_res_block_size = 3;
  EXPECT_EQ(hp.hidden_planes(0), 1);
  EXPECT_EQ(hp.hidden_planes(1), 2);  // layer 0 banked
  EXPECT_EQ(hp.hidden_planes(3), 2);
  EXPECT_EQ(hp.hidden_planes(4), 3);  // layers 0 and 3
  EXPECT_EQ(hp.hidden_planes(8), 4);  // 0, 3, 6
  hp.attn_res_block_size = 0;
  EXPECT_EQ(hp.hidden_planes(5), 1);
  auto preset = FindSynthPreset("1b");
  ASSERT_TRUE(preset.ok());
  auto p = SynthProfile(*preset, DType::kQ4_0);
  ASSERT_TRUE(p.ok()) << p.status().message();
  BufferInputs in;
  in.max_tokens = 100;
  in.link_row_bytes = 2 * 2048;
  const uint64_t plane = 100u * 2048 * 4 + 100u * 4096;  // f32 + wire
  const uint64_t one = StageBufferBytes(*p, false, false, in).io;
  in.planes_in = 3;
  in.planes_out = 4;
  in.banked = 3;
  EXPECT_EQ(StageBufferBytes(*p, false, false, in).io, one + 5 * plane + 3u * 100 * 2048 * 4);
}

TEST(ModelProfileTest, RejectsBadTensorTables) {
  auto preset = FindSynthPreset("tiny");
  ASSERT_TRUE(preset.ok());
  auto entries = testing::SynthEntries(*preset, DType::kF32);
  ASSERT_TRUE(entries.ok());
  HParams hp = HParamsOf(*preset);
  hp.n_layer = 3;  // the table has blk.3.*
  EXPECT_FALSE(ProfileFromTensors(hp, *entries).ok());
  hp.n_layer = 5;  // blk.4.* missing
  auto r = ProfileFromTensors(hp, *entries);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("layer 4 has no tensors"), std::string::npos);
  EXPECT_FALSE(TensorEntry::FromShape("x", DType::kQ4_0, {33, 2}).ok());
}

}  // namespace
}  // namespace shoal::planner
