// Model profile: what a model costs per layer (weight bytes, flops, KV bytes) and per stage
// (extra tensors, activation buffers), read from a GGUF tensor table without loading weights.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"
#include "model/hparams.h"
#include "tensor/dtype.h"

namespace shoal::planner {

// Fixed memory of one `shoal node` process beyond its weights, KV pool and the buffers counted
// below: code and shared libraries (file-backed), heaps, per-thread malloc arenas and stacks,
// frame buffers of the links and allocator slack. Measured (tools/bench/ps3_test.sh: 1.1B Q4_0 over
// 4 nodes, peak RSS from /proc/PID/status VmHWM after a 4 x 540-token load, x86-64 Debian 12,
// Release): peak - (weights + KV + buffers) = 31.3 / 33.1 / 32.4 / 29.7 MiB per stage, of which
// ~10 MiB is file-backed code and libraries (RssFile - weights). 34 MiB covers the largest with
// ~1 MiB to spare, so a plan that fits its limit stays under it.
inline constexpr uint64_t kProcessOverheadBytes = uint64_t{34} << 20;

// One tensor as the planner sees it.
struct TensorEntry {
  std::string name;
  DType type = DType::kF32;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ggml order
  int n_dims = 1;
  uint64_t nbytes = 0;

  // Shape-only entry (bytes from the type's row size), e.g. for models never written to disk.
  static Result<TensorEntry> FromShape(std::string name, DType type,
                                       const std::vector<int64_t>& ne);
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

// Matrix parameters (multiply-adds per token) of one weight type.
struct TypedParams {
  DType type = DType::kF32;
  int64_t params = 0;
};

// Cost of a group of tensors: bytes, and the matmul parameters by weight type.
struct TensorCost {
  uint64_t bytes = 0;
  std::vector<TypedParams> matmul;  // one entry per type, types in first-seen order

  void Add(const TensorEntry& t);
  void Add(const TensorCost& o);
  int64_t matmul_params() const;
};

// Mixture-of-experts shape from "<arch>.expert_count" etc. (n_expert 0: a dense model).
struct MoeShape {
  int64_t n_expert = 0;         // routed experts per MoE layer
  int64_t n_expert_used = 0;    // routed experts each token visits
  int64_t n_expert_shared = 0;  // experts every token visits (counted in the dense part)
};

// How a layer remembers the past: GQA caches K and V rows per token, MLA one compressed latent
// (kv_lora_rank + rope dims) per token, KDA (Kimi Delta Attention, linear attention) a fixed
// state per sequence and nothing per token.
enum class AttnKind { kGqa, kMla, kKda };
std::string_view AttnKindName(AttnKind k);
struct LayerAttn {
  AttnKind kind = AttnKind::kGqa;
  int64_t kv_width = 0;      // cached elements per token (GQA: k_dim + v_dim; MLA: lora + rope)
  uint64_t state_bytes = 0;  // fixed bytes per sequence (KDA: f32 state matrices + conv state)
  // Attention flops per query token: `flops_per_ctx` per cached position plus `flops_fixed`.
  double flops_per_ctx = 0;
  double flops_fixed = 0;
};

struct ModelProfile {
  HParams hp;
  MoeShape moe;
  std::vector<TensorCost> layers;   // [n_layer]: tensors "blk.N.*"
  std::vector<TensorCost> experts;  // [n_layer]: the routed-expert part of each ("*_exps")
  std::vector<LayerAttn> attn;      // [n_layer]: empty = GQA from hp for every layer
  TensorCost token_embd;            // first stage (and last stage when embeddings are tied)
  TensorCost head;                  // output_norm.* + output.* (last stage)
  TensorCost other;                 // any other non-layer tensor: counted on every stage
  uint64_t total_bytes = 0;         // sum of every tensor's bytes
  int64_t n_tensors = 0;

  int32_t n_layer() const { return static_cast<int32_t>(layers.size()); }
  // The layer's attention (GQA from hp when `attn` is empty).
  LayerAttn Attn(int32_t l) const;
  // Cache bytes per token of layer l at kv element size `elt` (2 = f16, 4 = f32).
  uint64_t KvBytesPerToken(int32_t l, uint64_t elt) const;
  // Fraction of the layer's routed experts a step of `tokens` tokens reads: 1 - (1 - k/n)^tokens
  // (uniform routing; 1 for a dense layer).
  double ExpertsTouched(double tokens) const;
  // Bytes and matmul parameters of layer l one token uses (dense part + k of n experts).
  double ActiveBytes(int32_t l) const;
  double ActiveParams(int32_t l) const;
  // Bytes of the tensors a stage serving layers [first, last) maps.
  uint64_t StageWeightBytes(int32_t first, int32_t last) const;
  // Tensors other than layers that the stage needs (embeddings, head, others).
  TensorCost StageExtras(int32_t first, int32_t last) const;
};

// Fills moe and attn from the hyper-parameters and metadata of MoE / MLA architectures
// (deepseek2: "<arch>.expert_count", "<arch>.attention.kv_lora_rank", ...); a no-op for others.
void ReadMoeAndAttention(const gguf::File& f, ModelProfile* p);

// K + V bytes one token takes in one layer's cache: (k_dim + v_dim) * element size, as
// KvLayout::BytesPerBlock counts them. kv_dtype must be F16 or F32.
Result<uint64_t> KvBytesPerTokenPerLayer(const HParams& hp, DType kv_dtype);

// Activation and scratch buffers of one stage for batches of up to `max_tokens` rows.
struct BufferInputs {
  int64_t max_tokens = 512;     // max_num_batched_tokens
  int64_t max_out_rows = 1;     // rows that produce logits per step (<= sequences per step)
  int64_t max_context = 2048;   // longest sequence (attention scratch per thread)
  int32_t n_threads = 1;        // compute threads of the node
  uint64_t link_row_bytes = 0;  // bytes of one activation row on the wire
  // Planes of hidden rows received / sent (HParams::hidden_planes at the stage's ends) and the
  // [T, n_embd] f32 planes the forward banks (kimi-k3's attention-residual stack).
  int32_t planes_in = 1, planes_out = 1, banked = 0;
};
struct BufferBytes {
  uint64_t workspace =
      0;  // the llama family's workspace (x, xn, q, k, v, att, tmp, gate, up, rope)
  uint64_t matmul_scratch = 0;  // activations converted to the weights' dot type
  uint64_t attention = 0;       // per-thread attention scratch
  uint64_t io = 0;              // hidden in/out, wire copies, logits, banked planes
  uint64_t total() const { return workspace + matmul_scratch + attention + io; }
};
BufferBytes StageBufferBytes(const ModelProfile& p, bool first_stage, bool last_stage,
                             const BufferInputs& in);

// Builds a profile from a tensor list. Errors on layer tensors outside [0, n_layer), a layer with
// no tensor, or a missing token_embd.
Result<ModelProfile> ProfileFromTensors(const HParams& hp, const std::vector<TensorEntry>& tensors);
// Reads the hyper-parameters (arch::LoadHParams) and the tensor table of an open GGUF file.
Result<ModelProfile> ProfileFromGguf(const gguf::File& f);

}  // namespace shoal::planner
