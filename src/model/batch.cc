// Batch construction helpers.
#include "model/batch.h"

namespace shoal {

void Batch::Add(int64_t seq, std::span<const int32_t> ids, int32_t pos0,
                std::span<const int32_t> blocks, bool want_logits, bool all_logits,
                int32_t tiled_until, int32_t state_slot) {
  SeqChunk c;
  c.seq_id = seq;
  c.row0 = n_rows();
  c.n_tokens = static_cast<int32_t>(ids.size());
  c.pos0 = pos0;
  c.blocks = blocks;
  c.tiled_until = tiled_until;
  c.state_slot = state_slot;
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  chunks.push_back(c);
  if (all_logits) {
    for (int32_t i = 0; i < c.n_tokens; ++i) out_rows.push_back(c.row0 + i);
  } else if (want_logits && c.n_tokens > 0) {
    out_rows.push_back(c.row0 + c.n_tokens - 1);
  }
}

}  // namespace shoal
