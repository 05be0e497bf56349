// Continuous-batching scheduler: pure logic that decides, each step, which sequences advance
// by how many tokens and which KV blocks they own. It touches no tensor (DESIGN.md principle 3).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "base/status.h"
#include "kvcache/block_allocator.h"

namespace shoal {

struct SchedConfig {
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;              // sequences in one step
  int32_t max_num_batched_tokens = 2048;  // rows in one step (decodes + prefill chunks)
  int32_t max_model_len = 4096;           // prompt + generated tokens per sequence
};

// One sequence's part of a step: compute tokens [start, start + n) of its token list.
struct ScheduledChunk {
  int64_t seq_id = 0;
  int32_t start = 0;
  int32_t n = 0;
  bool samples = false;  // the chunk reaches the newest token: a next token is sampled
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  int32_t n_tokens() const {
    int32_t s = 0;
    for (const auto& c : chunks) s += c.n;
    return s;
  }
};

class Scheduler {
 public:
  Scheduler(const SchedConfig& cfg, BlockAllocator* alloc);

  // Queues a sequence whose first n_prompt tokens are known. Fails if it can never fit.
  Status Add(int64_t seq_id, int32_t n_prompt);
  // Records a sampled token: the sequence now has one more token to compute.
  void AppendToken(int64_t seq_id);
  // Removes a sequence and frees its blocks at once.
  void Finish(int64_t seq_id);

  // Plans the next step: running decodes first (oldest first), then prefill chunks of waiting
  // sequences in arrival order, within max_num_batched_tokens and max_num_seqs, reserving KV
  // blocks for everything planned. Marks planned tokens as computed.
  StepPlan Schedule();

  const BlockTable& Table(int64_t seq_id) const;
  bool Has(int64_t seq_id) const { return seqs_.count(seq_id) != 0; }
  bool idle() const { return seqs_.empty(); }
  int32_t n_seqs() const { return static_cast<int32_t>(seqs_.size()); }
  int32_t n_tokens(int64_t seq_id) const;
  const SchedConfig& config() const { return cfg_; }

 private:
  struct Seq {
    int64_t id = 0;
    int64_t order = 0;       // arrival order
    int32_t n_tokens = 0;    // known tokens (prompt + sampled)
    int32_t n_computed = 0;  // tokens whose KV rows exist
    BlockTable table;
  };
  SchedConfig cfg_;
  BlockAllocator* alloc_;
  std::map<int64_t, Seq> seqs_;
  int64_t next_order_ = 0;
};

}  // namespace shoal
