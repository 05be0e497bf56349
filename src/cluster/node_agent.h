// `shoal node`: a pipeline worker. It measures itself, joins any authenticated coordinator,
// loads the layer range it is assigned (within --mem-limit), and runs micro-batches as they
// arrive, sending hidden states downstream or logits back to the coordinator.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "measure/node_info.h"
#include "net/auth.h"

namespace shoal::cluster {

struct NodeOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;       // 0: ephemeral (see NodeAgent::port)
  uint64_t mem_limit = 0;  // 0: no limit
  int n_threads = 1;
  std::string model_dir = ".";
  std::string cache_dir;  // tensors received from the coordinator; default model_dir/.shoal-cache
  std::string name;       // default: host:port
  bool measure = true;    // probe bandwidth and matmul speed at start
  // Cipher of every link (`--link-cipher`): the coordinator and the other nodes must use the
  // same; a link that does not is refused at its handshake.
  net::LinkCipher link_cipher = net::LinkCipher::kAes256Gcm;
  // Links served at once (`--max-links`); one more is closed at once with a GOODBYE. A node
  // serves a few (its coordinator, its upstream stage, probes during a failover, fetches); 64
  // leaves room for a coordinator's probe bursts while bounding what a flood of connections
  // takes (a thread and ~300 KiB of buffers each).
  int max_links = 64;
};

class NodeAgent {
 public:
  static Result<std::unique_ptr<NodeAgent>> Start(const NodeOptions& opts, net::ClusterKey key);
  ~NodeAgent();
  uint16_t port() const;
  const measure::NodeInfo& info() const;
  // Serves until Stop() (thread-safe; e.g. from a signal watcher).
  Status Run();
  void Stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace shoal::cluster
