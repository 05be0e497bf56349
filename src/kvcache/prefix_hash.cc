// Prefix-cache block hashes over XXH3.
#include "kvcache/prefix_hash.h"

#include <xxhash.h>

namespace shoal {

uint64_t PrefixRootHash(bool tiled) {
  // A tag (format version 1) so that a future change of what a block's KV depends on can bump it.
  const char tag[] = {'s', 'h', 'o', 'a', 'l', '-', 'k', 'v', '1', tiled ? 'T' : 'O'};
  return XXH3_64bits(tag, sizeof(tag));
}

uint64_t PrefixBlockHash(uint64_t parent, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

}  // namespace shoal
