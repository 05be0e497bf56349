// An in-process group's links: a full mesh of authenticated loopback connections, for members
// that run as threads of one process (tests, benchmarks, a single box's tensor parallelism).
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "net/auth.h"
#include "net/conn.h"

namespace shoal::collective {

// links[i][j]: member i's link to member j (null at i == j).
using Mesh = std::vector<std::vector<std::shared_ptr<net::Conn>>>;
Result<Mesh> LoopbackMesh(int members, const net::ClusterKey& key, int64_t timeout_ms = 5'000);

}  // namespace shoal::collective
