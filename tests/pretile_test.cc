// Q4_0 matrices laid out once at load for the tiled kernels (LoadOptions::pretile) against the
// same model read from its mapping: identical logits bit for bit, prefill and decode, and the
// file's pages of the laid-out matrices leave the process (each weight held once).
#include <gtest/gtest.h>

#include <span>

#include "base/process_memory.h"
#include "base/test_support.h"
#include "golden_util.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "modelgen/synth.h"

namespace shoal::testing {
namespace {

TEST(Pretile, SameLogitsAsTheMappedWeights) {
  const kernels::MatrixView probe{DType::kQ4_0, 4, 512, nullptr, 288};
  if (!kernels::CanPretile(probe)) GTEST_SKIP() << "no tiled Q4_0 kernels on this machine";
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  // TinyLlama widths (2048, FFN 5632: whole 512-column groups) with 2 layers, ~120 MB.
  SynthOptions so;
  so.preset = "1b";
  so.type = DType::kQ4_0;
  so.n_layer = 2;
  const std::string path = dir.File("m.gguf");
  ASSERT_TRUE(SynthesizeModel(so, path).ok());
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();

  // The layers' matrices (Q4_0, laid out) and the output head (Q6_K, copied as it is): what the
  // arena holds. The token embedding stays in the mapping (EmbedTokens reads a row per token).
  uint64_t matrices = 0;
  for (const gguf::TensorInfo& t : (*file)->tensors())
    if (t.n_dims == 2 && (t.name.rfind("blk.", 0) == 0 || t.name == "output.weight"))
      matrices += t.nbytes;
  ASSERT_GT(matrices, uint64_t{40} << 20);

  auto before = ReadProcessMemory();
  auto b = Model::Load(**file, LoadOptions{});
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto after = ReadProcessMemory();
  ASSERT_TRUE(before.ok() && after.ok());
  // Load read every matrix from the mapping and wrote its layout: had the mapping's pages
  // stayed, RSS would have grown by twice the matrices.
  const double grown = static_cast<double>(after->rss_bytes - before->rss_bytes);
  EXPECT_LT(grown, 1.25 * static_cast<double>(matrices)) << "RSS grew " << grown << " bytes";
  EXPECT_GT(grown, 0.9 * static_cast<double>(matrices)) << "RSS grew " << grown << " bytes";

  LoadOptions mapped;
  mapped.pretile = false;
  auto a = Model::Load(**file, mapped);
  ASSERT_TRUE(a.ok()) << a.status().message();

  ThreadPool pool(2);
  const int64_t V = (*a)->hparams().n_vocab;
  std::vector<int32_t> ids = {1, 450, 4996, 17354, 1701, 432, 17204, 975, 278};
  const size_t prompt = ids.size();
  std::vector<int32_t> blocks = {0, 1};
  auto kva = KvStore::Create((*a)->MakeKvLayout(4, 16, DType::kF16, 1));
  auto kvb = KvStore::Create((*b)->MakeKvLayout(4, 16, DType::kF16, 1));
  ASSERT_TRUE(kva.ok() && kvb.ok());
  for (int step = 0; step < 4; ++step) {
    Batch batch;
    if (step == 0) {
      batch.Add(1, ids, 0, blocks, false, true);  // every prompt row's logits
    } else {
      batch.Add(1, std::span<const int32_t>(&ids.back(), 1), static_cast<int32_t>(ids.size()) - 1,
                blocks, true);
    }
    ForwardOutput oa, ob;
    ASSERT_TRUE((*a)->Forward(batch, nullptr, *kva, &pool, &oa).ok());
    ASSERT_TRUE((*b)->Forward(batch, nullptr, *kvb, step == 2 ? nullptr : &pool, &ob).ok());
    ASSERT_EQ(oa.logits.size(), static_cast<size_t>(V) * (step == 0 ? prompt : 1));
    EXPECT_TRUE(oa.logits == ob.logits) << "step " << step;
    ids.push_back(ArgMax(std::vector<float>(oa.logits.end() - V, oa.logits.end())));
  }
}

}  // namespace
}  // namespace shoal::testing
