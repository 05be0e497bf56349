// The failover pipeline as `shoal serve` shows it: GET /v1/cluster fields and /metrics lines.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/cluster_control.h"
#include "cluster/failover_stats.h"
#include "server/metrics.h"

namespace shoal::server {

// "mode", "link_dtype", "stages", "nodes", "epoch", "failovers", ... (docs/CLUSTER.md).
nlohmann::json ClusterJson(const cluster::FailoverStats& s);
// Prometheus text: shoal_cluster_epoch, shoal_failovers_total, shoal_node_up{...}, ...
std::string FailoverMetrics(const cluster::FailoverStats& s);
// Measured load per stage of the current plan, for /metrics and /v1/cluster.
std::vector<StageMetrics> StageMetricsOf(const cluster::ClusterControl& c);

}  // namespace shoal::server
