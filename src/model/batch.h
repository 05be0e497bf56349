// A forward batch: token chunks of several sequences, each against its own paged KV blocks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace shoal {

// Rows [row0, row0 + n_tokens) of the batch belong to sequence `seq_id` at positions
// pos0, pos0+1, ...; its KV rows live in `blocks` (block table, position order).
struct SeqChunk {
  int64_t seq_id = 0;
  int32_t row0 = 0;
  int32_t n_tokens = 0;
  int32_t pos0 = 0;
  std::span<const int32_t> blocks;
  // Positions below this use llama.cpp's prompt-batch attention numerics (see kernels::
  // AttendOneHead). A property of the request (its prompt length), never of the batch.
  int32_t tiled_until = 0;
  // Models with a recurrent state (kimi-k3): the sequence's slot in KvStore::State, allotted by
  // the scheduler beside the block table (-1: none).
  int32_t state_slot = -1;
};

// The attention numerics rule: prompt tokens of prompts with at least this many tokens use the
// tiled path, as llama.cpp does when such a prompt arrives in one batch (GGML_FA_TILE_Q = 64).
inline constexpr int32_t kTiledPromptMin = 64;
inline int32_t TiledUntil(int32_t n_prompt) { return n_prompt >= kTiledPromptMin ? n_prompt : 0; }

struct Batch {
  std::vector<int32_t> tokens;    // [n_rows]; used when the range starts at layer 0
  std::vector<SeqChunk> chunks;   // disjoint, covering rows in order; one chunk per sequence
  std::vector<int32_t> out_rows;  // rows whose logits (last stage) are wanted, ascending

  int32_t n_rows() const {
    return chunks.empty() ? 0 : chunks.back().row0 + chunks.back().n_tokens;
  }
  void Clear() {
    tokens.clear();
    chunks.clear();
    out_rows.clear();
  }
  // Appends a chunk of `ids` for `seq` starting at `pos0`; if want_logits, its last row is
  // added to out_rows (all rows when all_logits).
  void Add(int64_t seq, std::span<const int32_t> ids, int32_t pos0, std::span<const int32_t> blocks,
           bool want_logits, bool all_logits = false, int32_t tiled_until = 0,
           int32_t state_slot = -1);
};

}  // namespace shoal
