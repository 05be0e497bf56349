// Memory bandwidth measurement (STREAM triad) for the decode roofline of `shoal bench`.
#pragma once

#include <cstddef>

#include "threading/thread_pool.h"

namespace shoal {

// Runs the STREAM triad a[i] = b[i] + s * c[i] over three arrays of `bytes_per_array` bytes,
// split over the pool's threads, `reps` times, and returns the best rate in bytes per second
// (STREAM counts 3 arrays x bytes per pass: two reads and one write). Arrays must be well beyond
// the last-level cache for a DRAM figure (the default 256 MiB each is > 10x any L3 here).
double MeasureTriadBandwidth(ThreadPool& pool, size_t bytes_per_array = size_t{256} << 20,
                             int reps = 5);

}  // namespace shoal
