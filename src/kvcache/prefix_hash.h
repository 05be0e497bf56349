// Prefix-cache block hashes: a chain of XXH3 hashes over full blocks of token ids.
#pragma once

#include <cstdint>
#include <span>

namespace shoal {

// The hash every chain starts from. `tiled` separates prompts whose prompt positions use the
// tiled attention numerics (model/batch.h TiledUntil) from all others: their KV rows differ in
// the last bits, and a cache hit must be bit-identical to recomputation.
uint64_t PrefixRootHash(bool tiled);

// Hash of one full block given its parent's hash (the root for block 0) and its token ids.
// 64 bits: two different prefixes collide with probability ~ n^2 / 2^65 for n cached blocks.
uint64_t PrefixBlockHash(uint64_t parent, std::span<const int32_t> tokens);

}  // namespace shoal
