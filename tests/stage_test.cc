// engine/stage: the checks every step from a socket passes before it touches the KV.
#include "engine/stage.h"

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "golden_util.h"

namespace shoal::testing {
namespace {

const char kModel[] = "models/stories260K.gguf";

// A step from a socket is untrusted: Stage::Apply refuses every id outside the stage's pool, swap
// space or state slots before copying anything, and a valid step runs.
TEST(StageTest, RefusesIdsOutsideItsPool) {
  if (!Exists(SharedPath(kModel))) GTEST_SKIP() << "no " << kModel;
  std::unique_ptr<LoadedModel> m = Load(SharedPath(kModel), DType::kF16, 1);
  Model* model = m->model.get();
  auto st = Stage::Create(model, {8, 16, DType::kF32, 0, 4}, 1);
  ASSERT_TRUE(st.ok()) << st.status().message();
  Stage& stage = **st;
  const std::vector<int32_t> ids = {1, 2, 3};
  const std::vector<int32_t> ok_table = {0}, past = {8}, negative = {-1};
  auto with_table = [&](const std::vector<int32_t>& table) {
    StepInput in;
    in.batch.Add(1, ids, 0, table, true);
    return in;
  };
  EXPECT_TRUE(stage.Apply(with_table(ok_table)).ok());
  EXPECT_FALSE(stage.Apply(with_table(past)).ok());  // the pool holds 8 blocks
  EXPECT_FALSE(stage.Apply(with_table(negative)).ok());
  StepInput in = with_table(ok_table);
  in.copies = {{0, 8}};
  EXPECT_FALSE(stage.Apply(in).ok());
  in.copies = {{0, 1}};
  in.swap_out = {{1, 4}};  // the swap space holds 4 blocks
  EXPECT_FALSE(stage.Apply(in).ok());
  in.swap_out = {{1, 3}};
  in.swap_in = {{-1, 2}};
  EXPECT_FALSE(stage.Apply(in).ok());
  in.swap_in = {{3, 2}};
  in.state_copies = {{0, 99}};  // a model without recurrent layers keeps no state: ignored
  EXPECT_TRUE(stage.Apply(in).ok());
  ForwardOutput out;
  ASSERT_TRUE(stage.Run(with_table(ok_table), nullptr, &out).ok());
  EXPECT_EQ(out.logits.size(), static_cast<size_t>(model->hparams().n_vocab));
  auto no_swap = Stage::Create(model, {8, 16, DType::kF32, 0, 0}, 1);
  ASSERT_TRUE(no_swap.ok());
  StepInput s = with_table(ok_table);
  s.swap_out = {{0, 0}};
  EXPECT_FALSE((*no_swap)->Apply(s).ok());
}

}  // namespace
}  // namespace shoal::testing
