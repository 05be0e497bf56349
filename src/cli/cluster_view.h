// The failover pipeline as `shoal serve` shows it: GET /v1/cluster fields and /metrics lines.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cluster/failover_executor.h"

namespace shoal::cli {

// "mode", "link_dtype", "stages", "nodes", "epoch", "failovers", ... (docs/CLUSTER.md).
nlohmann::json ClusterJson(const cluster::FailoverStats& s);
// Prometheus text: shoal_cluster_epoch, shoal_failovers_total, shoal_node_up{...}, ...
std::string FailoverMetrics(const cluster::FailoverStats& s);

}  // namespace shoal::cli
