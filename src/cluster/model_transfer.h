// Model files across the cluster: per-tensor content hashes (XXH3-64) that a node checks its own
// copy against, and the transfer of just a stage's tensors to a node that lacks the file (cached
// by content hash as a sparse GGUF under the node's cache folder).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"
#include "net/bytes.h"
#include "net/conn.h"

namespace shoal::cluster {

// Hash of one tensor: XXH3-64 over (type, ne[0..3], data bytes).
struct TensorHash {
  std::string name;
  uint64_t hash = 0;
};

// What identifies a model file: every tensor's hash and, for a single-file model, the header
// (bytes before the data section) so that a node can rebuild the file from its tensors.
struct ModelManifest {
  uint64_t file_bytes = 0;          // 0: the model cannot be sent (split files)
  uint64_t data_offset = 0;         // header bytes
  uint64_t header_hash = 0;         // XXH3-64 of bytes [0, data_offset)
  std::vector<TensorHash> tensors;  // file order
  // 16 hex digits: XXH3-64 of the header hash and every (name, hash); the cache file's name.
  std::string Id() const;
};

// With `drop` (the file of t), the pages read go again as the hash moves on (16 MiB at a time):
// a node that keeps only slices of its tensors never holds them all at once.
uint64_t HashTensor(const gguf::TensorInfo& t, const gguf::File* drop = nullptr);
// Hashes every tensor of an open file (reads it all once: ~0.1 s per GB).
Result<ModelManifest> BuildManifest(const gguf::File& f);
void PutManifest(net::ByteWriter& w, const ModelManifest& m);
Status GetManifest(net::ByteReader& r, ModelManifest* m);

// Tensors a stage serving layers [first, last) of an n_layer model reads: blk.first..last-1,
// token_embd on the first stage (and the last when there is no output.weight), output_norm and
// output on the last, any other non-layer tensor everywhere (the planner's rule).
std::vector<const gguf::TensorInfo*> StageTensors(const gguf::File& f, int32_t first, int32_t last,
                                                  int32_t n_layer);

// Checks the stage's tensors of `f` against the manifest; the error names the first tensor
// that is missing or differs, and the file.
// drop_pages: hash each tensor without keeping its pages (HashTensor's `drop`).
Status VerifyStageTensors(const gguf::File& f, const ModelManifest& m, int32_t first, int32_t last,
                          int32_t n_layer, bool drop_pages = false);

// A node's link to the coordinator for fetches: requests go out on `conn`; answers come from
// `recv` when set (a node whose link thread keeps reading the link, to answer heartbeats while
// it loads, passes them on), else from conn->Recv.
struct FetchLink {
  net::Conn* conn = nullptr;
  std::function<Result<std::optional<net::Frame>>(int64_t timeout_ms)> recv;
};

// Node side, for a node without the model file: makes sure `cache_dir` holds
// <manifest id>.gguf (a name derived from hashes, never from a message), a sparse file of the
// model's size with the header fetched from the coordinator over `coord` and checked against
// the manifest; returns its path. Tensors are fetched by FetchStageTensors.
Result<std::string> EnsureCachedFile(const ModelManifest& m, const std::string& cache_dir,
                                     const FetchLink& coord);
// Fetches the stage's tensors that are missing or wrong in the cached file (holes read as
// zeros), then verifies every stage tensor against the manifest.
Status FetchStageTensors(const ModelManifest& m, const std::string& path, int32_t first,
                         int32_t last, const FetchLink& coord);

// Coordinator side: answers one fetch request (a kFetch control payload) with data frames and
// a done frame.
Status ServeFetch(const gguf::File& f, const std::string& path, std::span<const uint8_t> payload,
                  net::Conn& node);

}  // namespace shoal::cluster
