// Message bodies of the pipeline protocol on top of net frames: control messages (join,
// assignment) and micro-batches of work (batch layout, block copies, activations, logits).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/process_memory.h"
#include "base/status.h"
#include "cluster/model_transfer.h"
#include "cluster/node_load.h"
#include "engine/executor.h"
#include "model/batch.h"
#include "planner/cost_model.h"
#include "sched/scheduler.h"

namespace shoal::cluster {

// First byte of a kControl frame's payload.
enum class ControlType : uint8_t {
  kJoin = 1,          // node -> coordinator: NodeInfo JSON
  kAssign = 2,        // coordinator -> node: the layers to serve
  kAssignResult = 3,  // node -> coordinator: ok, or why not
  kFetch = 4,         // node -> coordinator: send me the header and/or these tensors
  kData = 5,          // coordinator -> node: bytes of the header or of one tensor
  kFetchDone = 6,     // coordinator -> node: the fetch is complete
  kGroupJoin = 7,     // node -> node: this link joins the dialer's tensor-parallel group
};

// What a node is asked to serve. The model is named by file name only: the node resolves it
// inside its --model-dir and refuses any path.
struct Assignment {
  uint32_t epoch = 1;
  std::string model_file;
  int32_t first_layer = 0, last_layer = 0;  // [first, last)
  int32_t n_blocks = 0;                     // KV pool (same block ids on every stage)
  int32_t swap_blocks = 0;
  planner::PlanConfig config;  // sizes the node checks against its memory limit
  // The downstream stage's members ("host:port", member order; empty on the last stage): member
  // 0 of this stage sends each micro-batch's hidden rows to every one of them.
  std::vector<std::string> next_nodes;
  // Tensor parallel (model/tensor_parallel.h): this node is member tp_rank of a stage split over
  // tp_peers.size() nodes ("host:port" in member order; empty for a stage on one node).
  int32_t tp_rank = 0;
  std::vector<std::string> tp_peers;
  bool tp_fast = false;  // TpShard::fast
  int32_t tp_size() const { return tp_peers.empty() ? 1 : static_cast<int32_t>(tp_peers.size()); }
  ModelManifest manifest;  // tensor hashes the node checks (and fetches by) its file
};

// Members of a stage's group, and nodes of the next stage, one assignment may name (the largest
// --parallel tp).
inline constexpr uint32_t kMaxGroupNodes = 64;

// A node's address to dial: HOST:PORT with a real port.
Result<std::pair<std::string, uint16_t>> NodeAddress(const std::string& s);

std::vector<uint8_t> EncodeJoin(const std::string& node_info_json);
// The first frame a member sends on the link it dialed to a peer of its group: the plan epoch and
// its member index (the peer hands the link to the group it builds for that epoch).
std::vector<uint8_t> EncodeGroupJoin(uint32_t epoch, int32_t rank);
Result<std::pair<uint32_t, int32_t>> DecodeGroupJoin(std::span<const uint8_t> payload);
std::vector<uint8_t> EncodeAssign(const Assignment& a);
std::vector<uint8_t> EncodeAssignResult(bool ok, const std::string& message);
Result<ControlType> ControlTypeOf(std::span<const uint8_t> payload);
Result<std::string> DecodeJoin(std::span<const uint8_t> payload);
Result<Assignment> DecodeAssign(std::span<const uint8_t> payload);
// ok=false carries the node's reason in `message`.
Status DecodeAssignResult(std::span<const uint8_t> payload);

struct HeartbeatReply {
  ProcessMemory mem;
  NodeLoad load;
};
// A node's answer to a heartbeat carries its measured memory: u64 RSS, u64 peak RSS (bytes), then
// its load (5 x u64, NodeLoad's order). An answer of the memory alone (16 bytes) decodes with a
// zero load; an empty answer (a node that cannot read its memory) decodes as an error, and so
// does any other size.
std::vector<uint8_t> EncodeHeartbeatReply(const ProcessMemory& m, const NodeLoad& load = {});
Result<HeartbeatReply> DecodeHeartbeatReply(std::span<const uint8_t> payload);

// One micro-batch travelling down the pipeline: the engine's StepInput (its copies ride on the
// step's first micro-batch; the tokens only on the way into stage 0) plus what the wire needs:
// storage for the decoded block tables and the hidden rows between stages.
struct StepWork : StepInput {
  std::vector<std::vector<int32_t>> block_storage;  // backs batch.chunks[i].blocks
  // [planes][n_rows][n_embd] (Model::HiddenPlanes of the receiving stage); empty into stage 0.
  std::vector<float> hidden;
};

// Caps on decoded sizes (a malformed or hostile frame fails instead of allocating).
inline constexpr uint32_t kMaxRows = 1u << 20;    // tokens in one micro-batch
inline constexpr uint32_t kMaxBlocks = 1u << 24;  // block ids per table
inline constexpr uint32_t kMaxCopies = 1u << 20;
inline constexpr uint32_t kMaxStateSlots = 1u << 20;  // recurrent-state slot ids
// Planes of hidden rows: kimi-k3 carries 1 + n_layer / attn_res.block_size (1 + 93/4 for K3's
// 93 layers); 256 leaves room for deeper models with small blocks.
inline constexpr uint32_t kMaxHiddenPlanes = 256;

// Appends the work to `out`; hidden rows are sent as `link` (f32, f16 or q8_0).
Status EncodeStepWork(const StepWork& w, planner::LinkDType link, int64_t n_embd,
                      std::vector<uint8_t>* out);
Status DecodeStepWork(std::span<const uint8_t> payload, int64_t n_embd, StepWork* w);

std::vector<uint8_t> EncodeLogits(std::span<const float> logits);
Status DecodeLogits(std::span<const uint8_t> payload, size_t expected, std::vector<float>* out);

// Stage compute times ride at the end of every step-command, activations and step-result
// payload: each stage appends the microseconds it spent on the micro-batch, so the last
// stage's result tells the coordinator every stage's time. Layout: n x u32, then u32 n.
inline constexpr uint32_t kMaxStageTimes = 4096;
void AppendStageTimes(std::span<const uint32_t> us, std::vector<uint8_t>* out);
// Splits the trailer off: returns the body before it and fills *us.
Result<std::span<const uint8_t>> SplitStageTimes(std::span<const uint8_t> payload,
                                                 std::vector<uint32_t>* us);

}  // namespace shoal::cluster
