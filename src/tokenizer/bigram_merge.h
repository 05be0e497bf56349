// The pairwise merge loop SPM and BPE share: adjacent symbols are merged best-pair-first (ties:
// the leftmost pair) until no adjacent pair qualifies, as llama.cpp's tokenizers do.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

#include "tokenizer/unicode.h"

namespace shoal::tok {

// A run of bytes of the input; symbols form a linked list in text order.
struct MergeSymbol {
  int prev;
  int next;
  size_t begin;  // byte offset in the input
  size_t n;      // byte length; 0 once merged into its left neighbour
};

// One symbol per UTF-8 character of `text` (a truncated final sequence stays one symbol).
inline std::vector<MergeSymbol> SplitUtf8Symbols(std::string_view text) {
  std::vector<MergeSymbol> symbols;
  for (size_t offs = 0; offs < text.size();) {
    const size_t len = std::min(Utf8SeqLen(text[offs]), text.size() - offs);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offs + len == text.size() ? -1 : index + 1, offs, len});
    offs += len;
  }
  return symbols;
}

// Merges symbols in place. priority(left_index, right_index) returns the pair's merge priority
// (higher merges first) or nullopt when the pair must not merge; it is asked once per candidate
// pair, when the pair forms, so it may record what it saw (SPM keeps its reverse merges).
template <typename Priority>
void MergeBigrams(std::vector<MergeSymbol>& symbols, Priority priority) {
  struct Bigram {
    int left;
    int right;
    double priority;
    size_t size;  // bytes of the pair when it formed: a changed size marks a stale entry
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const std::optional<double> p = priority(left, right);
    if (p) queue.push({left, right, *p, symbols[left].n + symbols[right].n});
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    MergeSymbol& left = symbols[b.left];
    MergeSymbol& right = symbols[b.right];
    // Both alive means right still follows left, so an equal size means the same text.
    if (left.n == 0 || right.n == 0 || left.n + right.n != b.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = b.left;
    try_add(left.prev, b.left);
    try_add(b.left, left.next);
  }
}

}  // namespace shoal::tok
