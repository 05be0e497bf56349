// Multi-head latent attention (DeepSeek-V2/V3, Kimi K2 and K3's MLA layers), run absorbed as
// llama.cpp does: MQA over the cached latent, one K row [c | k_pe] per token shared by all heads.
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kvcache/kv_store.h"
#include "model/batch.h"
#include "model/hparams.h"
#include "model/tensor_parallel.h"
#include "threading/thread_pool.h"

namespace shoal {

struct MlaWeights {
  kernels::MatrixView wq;          // attn_q [n_head * hk, n_embd] when q_lora_rank == 0
  kernels::MatrixView wq_a, wq_b;  // attn_q_a [q_lora, n_embd], attn_q_b [n_head * hk, q_lora]
  std::vector<float> q_a_norm;     // [q_lora]
  kernels::MatrixView wkv_a;       // attn_kv_a_mqa [kv_lora + n_rot, n_embd]
  std::vector<float> kv_a_norm;    // [kv_lora]
  std::vector<kernels::MatrixView> wk_b;  // per head attn_k_b [kv_lora, nope]
  std::vector<kernels::MatrixView> wv_b;  // per head attn_v_b [v_mla, kv_lora]
  kernels::MatrixView wo;                 // attn_output [n_embd, n_head * v_mla]
  kernels::MatrixView gate;               // attn_gate [n_head * v_mla, n_embd] (K3) or empty
};

// hk = key_length_mla (nope + rope), v_mla = value_length_mla.
Result<MlaWeights> LoadMlaWeights(const gguf::File& f, const HParams& hp, int il);

struct MlaOptions {
  bool rope = true;  // false: q_pe / k_pe are used raw (Kimi K3)
  kernels::RopeParams rope_params;
  float kq_scale = 1.f;
};

struct MlaScratch {
  std::vector<float> q, qa, kv, qabs, att, o, gate, scratch;
  kernels::MatMulScratch mm;
};

// out[n, n_embd] = attention of the batch rows xn [n, n_embd] (normed input). Writes each row's
// K row into the layer's cache (k_base: KvStore::KBase of the layer). rope: [n, n_rot] cos/sin
// tables per row (used when opt.rope).
void RunMla(const HParams& hp, const MlaWeights& w, const MlaOptions& opt, const float* xn,
            const float* rope, const Batch& b, KvStore& kv, int32_t local_layer, float* out,
            ThreadPool* pool, MlaScratch* s);
// RunMla without the output projection: the heads' outputs [n, heads x v_mla] (in s->o), for
// the heads w holds (all, or a tensor-parallel member's: SliceMlaHeads).
const float* RunMlaHeads(const HParams& hp, const MlaWeights& w, const MlaOptions& opt,
                         const float* xn, const float* rope, const Batch& b, KvStore& kv,
                         int32_t local_layer, ThreadPool* pool, MlaScratch* s);
// A tensor-parallel member's part of w: the query rows, k_b/v_b and gate rows of `heads`, the
// output projection's rows `emb` (embedding columns); the latent path whole (every member caches
// the whole latent row: it is shared by all heads).
MlaWeights SliceMlaHeads(const MlaWeights& w, const HParams& hp, Slice heads, Slice emb);

}  // namespace shoal
