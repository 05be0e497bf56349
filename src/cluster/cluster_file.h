// The coordinator's cluster file (`shoal serve --cluster FILE.toml`): nodes in pipeline order
// with per-node planning options, the cluster key file and the link type (docs/CLUSTER.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace shoal::cluster {

// What the coordinator knows of a node beyond what the node reports; 0 / "" = not set.
struct NodeOverride {
  std::string name;           // shown in plans, /v1/cluster and `shoal status`
  uint64_t mem_limit = 0;     // plan the node with at most this many bytes
  double link_bw = 0;         // its link to the next stage, bytes/s
  double link_latency_s = 0;  // one way
};

struct ClusterFile {
  std::vector<std::string> nodes;       // "host:port", pipeline order
  std::vector<NodeOverride> overrides;  // [node]
  // Nodes with `standby = true`: spares that take a failed node's place (docs/CLUSTER.md).
  std::vector<std::string> standby;
  std::vector<NodeOverride> standby_overrides;  // [standby]
  std::string key_file;                         // resolved against the file's folder; "" = not set
  std::string link_dtype;                       // "" = not set
};

// Parses the TOML text; `base_dir` resolves a relative key_file, `origin` names the source
// in errors. Unknown keys are errors (a typo never silently drops a setting).
Result<ClusterFile> ParseClusterFile(std::string_view text, const std::string& base_dir,
                                     const std::string& origin);
Result<ClusterFile> LoadClusterFile(const std::string& path);

// "256M", "1.5G", "512MiB", "1073741824" -> bytes.
Result<uint64_t> ParseByteSize(std::string_view s);

}  // namespace shoal::cluster
