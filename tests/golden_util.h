// Helpers for golden tests: llama.cpp reference JSON and teacher-forced runs of a model.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/test_support.h"
#include "gguf/gguf.h"
#include "kvcache/block_allocator.h"
#include "kvcache/kv_store.h"
#include "model/model.h"

namespace shoal::testing {

nlohmann::json LoadJson(const std::string& path);

// A model with a private KV cache, for running token sequences directly.
struct LoadedModel {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<KvStore> kv;
  std::unique_ptr<BlockAllocator> alloc;
  std::unique_ptr<ThreadPool> pool;
  int32_t block_size = 16;
};
std::unique_ptr<LoadedModel> Load(const std::string& path, DType kv_type, int threads = 2,
                                  int32_t n_ctx = 1024);

// Runs `ids` through the model as one sequence in one batch (sequence id `seq`, fresh KV) and
// returns logits for rows [first_row, ids.size()) as [rows][n_vocab]. The first n_prompt ids
// are the prompt (default first_row + 1), which selects attention numerics like the engine.
std::vector<std::vector<float>> RunSequence(LoadedModel& m, const std::vector<int32_t>& ids,
                                            int first_row, int n_prompt = -1);

// Greedy arg-max (lowest id wins ties).
int32_t ArgMax(const std::vector<float>& v);

}  // namespace shoal::testing
