// Golden test helpers.
#include "golden_util.h"

#include <fstream>

namespace shoal::testing {

nlohmann::json LoadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::unique_ptr<LoadedModel> Load(const std::string& path, DType kv_type, int threads,
                                  int32_t n_ctx) {
  auto m = std::make_unique<LoadedModel>();
  auto f = gguf::File::Open(path);
  if (!f.ok()) return nullptr;
  m->file = std::move(f).value();
  auto model = Model::Load(*m->file, LoadOptions{});
  if (!model.ok()) {
    fprintf(stderr, "%s\n", model.status().message().c_str());
    return nullptr;
  }
  m->model = std::move(model).value();
  const int32_t blocks = BlockTable::BlocksFor(n_ctx, m->block_size) * 8;
  auto kv = KvStore::Create(m->model->MakeKvLayout(blocks, m->block_size, kv_type, 1));
  if (!kv.ok()) return nullptr;
  m->kv = std::make_unique<KvStore>(std::move(kv).value());
  m->alloc = std::make_unique<BlockAllocator>(blocks);
  m->pool = std::make_unique<ThreadPool>(threads);
  return m;
}

std::vector<std::vector<float>> RunSequence(LoadedModel& m, const std::vector<int32_t>& ids,
                                            int first_row, int n_prompt) {
  BlockTable table;
  Status s = table.Reserve(*m.alloc, static_cast<int32_t>(ids.size()), m.block_size);
  if (!s.ok()) return {};
  Batch b;
  b.Add(1, ids, 0, table.blocks, false, false, TiledUntil(n_prompt < 0 ? first_row + 1 : n_prompt),
        /*state_slot=*/0);
  for (int r = first_row; r < static_cast<int>(ids.size()); ++r) b.out_rows.push_back(r);
  ForwardOutput out;
  s = m.model->Forward(b, nullptr, *m.kv, m.pool.get(), &out);
  table.Clear(*m.alloc);
  if (!s.ok()) {
    fprintf(stderr, "forward failed: %s\n", s.message().c_str());
    return {};
  }
  const int64_t V = m.model->hparams().n_vocab;
  std::vector<std::vector<float>> rows;
  for (size_t i = 0; i < b.out_rows.size(); ++i)
    rows.emplace_back(out.logits.begin() + static_cast<int64_t>(i) * V,
                      out.logits.begin() + static_cast<int64_t>(i + 1) * V);
  return rows;
}

int32_t ArgMax(const std::vector<float>& v) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(v.size()); ++i)
    if (v[static_cast<size_t>(i)] > v[static_cast<size_t>(best)]) best = i;
  return best;
}

}  // namespace shoal::testing
