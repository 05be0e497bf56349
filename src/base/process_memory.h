// The memory a process holds now and at its peak, as the kernel counts it (what `ps` and
// `/usr/bin/time -v` report): the figures a node reports so that /v1/cluster shows measured RSS
// beside the planner's prediction.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace shoal {

struct ProcessMemory {
  uint64_t rss_bytes = 0;       // resident now (VmRSS)
  uint64_t peak_rss_bytes = 0;  // the most ever resident (VmHWM)
};

// This process's memory (Linux: /proc/self/status); an error elsewhere or when unreadable.
Result<ProcessMemory> ReadProcessMemory();
// Parses the text of a /proc/PID/status file (fields "VmRSS:" and "VmHWM:", in kB).
Result<ProcessMemory> ParseProcStatus(std::string_view text);

}  // namespace shoal
