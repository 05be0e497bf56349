// `shoal serve`'s options and entry point, shared with `shoal cluster up` (which starts the
// nodes and then serves in the foreground).
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace shoal::cli {

struct ServeArgs {
  std::string model, host = "127.0.0.1", api_key, api_key_file, served_name, chat_template;
  // The cluster's admin credential (drain, join, rebalance); without it those endpoints are off.
  std::string admin_key_file;
  std::string kv_mem, swap_space, kv_type = "f16";
  int port = 8080, threads = 0, block_size = 16, max_num_seqs = 64, max_batched = 2048;
  int pipeline_groups = 0;  // with --nodes: sequence groups in flight (0: one per stage)
  int max_model_len = 0, drain_timeout = 30;
  int64_t max_queued = 4096, max_queued_seqs = 4096;
  uint64_t stream_buffer = 1 << 20;  // see server::ServerConfig
  int stream_stall_timeout = 30;
  // The HTTP listener (server::HttpServerOptions): caps, timeouts and TLS.
  int max_connections = 1024, header_timeout = 10, keep_alive_timeout = 15;
  std::string ssl_certfile, ssl_keyfile;
  uint64_t max_body = 8 << 20;
  bool no_prefix_caching = false;
  // Pipeline over `shoal node` workers: --nodes, or a --cluster TOML file (docs/CLUSTER.md).
  std::string nodes, cluster_file, cluster_key_file, link_dtype = "f32";
  std::string link_cipher = "aes-256-gcm";  // every node link after the handshake
  bool link_dtype_set = false;              // --link-dtype given: it overrides the cluster file's
  bool dry_run = false;
  // A forced layout (planner/parallel.h): "tp=2,pp=2"; empty: the planner's choice. The split
  // mode: exact (bit-identical to one process) or fast (partial sums added in member order).
  std::string parallel, tp_mode = "exact";
  // Failover (docs/CLUSTER.md): spare nodes, and the failure detection thresholds.
  std::string standby;
  int64_t heartbeat_ms = 100, suspect_ms = 300, dead_ms = 1000;
};

// --parallel and --tp-mode (serve and cluster up).
void AddParallelOptions(CLI::App* cmd, ServeArgs* a);

// Runs the server until SIGTERM/SIGINT; returns the process exit code.
int Serve(const ServeArgs& a);

}  // namespace shoal::cli
