// Splitting n items over m members as evenly as possible: the tensor-parallel ranges of heads,
// columns and experts, and the collectives' slices, all cut this one way.
#pragma once

#include <algorithm>
#include <cstdint>

namespace shoal {

// Slice k of n items split over m members (the first n % m get one more): [first, first+count).
struct Slice {
  int64_t first = 0, count = 0;
  int64_t end() const { return first + count; }
};

inline Slice SliceOf(int64_t n, int m, int k) {
  const int64_t base = n / m, extra = n % m;
  return {k * base + std::min<int64_t>(k, extra), base + (k < extra ? 1 : 0)};
}

}  // namespace shoal
