// Model profile: tensor bytes per layer and per stage, KV and buffer sizes.
#include "planner/model_profile.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "model/arch/arch.h"

namespace shoal::planner {
namespace {

constexpr uint64_t kF32 = sizeof(float);

// Parses "blk.N.rest" into N; -1 for a name that is not a layer tensor.
int64_t LayerIndex(const std::string& name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  const char* begin = name.data() + kPrefix.size();
  const char* end = name.data() + name.size();
  int64_t n = -1;
  auto [p, ec] = std::from_chars(begin, end, n);
  if (ec != std::errc() || p == begin || p == end || *p != '.') return -1;
  return n;
}

bool StartsWith(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Upper bound of the bytes per element of the activations a matmul converts for weights of type
// `w` (kernels::VecDotType): F32 uses rows in place; F16/BF16 convert to 2-byte floats; every
// quantized type converts to Q8_0/Q8_1/Q8_K, at most 292 bytes per 256 (Q8_K), plus the Q8_0
// path's float scale per 32 (4 / 32 bytes per element).
double ActivationBytesPerElement(DType w) {
  if (w == DType::kF32) return 0;
  if (w == DType::kF16 || w == DType::kBF16) return 2;
  return 292.0 / 256.0 + 4.0 / 32.0;
}

}  // namespace

Result<TensorEntry> TensorEntry::FromShape(std::string name, DType type,
                                           const std::vector<int64_t>& ne) {
  if (ne.empty() || ne.size() > 4) return Errorf("tensor {}: {} dimensions", name, ne.size());
  TensorEntry t;
  t.name = std::move(name);
  t.type = type;
  t.n_dims = static_cast<int>(ne.size());
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] <= 0) return Errorf("tensor {}: dimension {} is {}", t.name, i, ne[i]);
    t.ne[i] = ne[i];
  }
  const std::optional<uint64_t> row = RowBytes(type, t.ne[0]);
  if (!row)
    return Errorf("tensor {}: {} elements per row do not fit {}", t.name, t.ne[0], DTypeName(type));
  t.nbytes = *row * static_cast<uint64_t>(t.ne[1] * t.ne[2] * t.ne[3]);
  return t;
}

void TensorCost::Add(const TensorEntry& t) {
  bytes += t.nbytes;
  // Matrices (2-D and up) are matmul weights; vectors (norms, biases) cost bytes only.
  if (t.n_dims < 2) return;
  auto it = std::find_if(matmul.begin(), matmul.end(),
                         [&](const TypedParams& p) { return p.type == t.type; });
  if (it == matmul.end()) {
    matmul.push_back({t.type, t.n_elements()});
  } else {
    it->params += t.n_elements();
  }
}

void TensorCost::Add(const TensorCost& o) {
  bytes += o.bytes;
  for (const TypedParams& p : o.matmul) {
    auto it = std::find_if(matmul.begin(), matmul.end(),
                           [&](const TypedParams& q) { return q.type == p.type; });
    if (it == matmul.end()) {
      matmul.push_back(p);
    } else {
      it->params += p.params;
    }
  }
}

int64_t TensorCost::matmul_params() const {
  int64_t n = 0;
  for (const TypedParams& p : matmul) n += p.params;
  return n;
}

TensorCost ModelProfile::StageExtras(int32_t first, int32_t last) const {
  TensorCost c = other;
  const bool is_first = first == 0, is_last = last == n_layer();
  // The llama family's layers map token_embd on the first stage, and on the last stage when the
  // embeddings are tied (it is the output matrix there); one mapping serves both.
  if (is_first || (is_last && hp.tied_embeddings)) c.Add(token_embd);
  if (is_last) c.Add(head);
  return c;
}

std::string_view AttnKindName(AttnKind k) {
  switch (k) {
    case AttnKind::kGqa:
      return "gqa";
    case AttnKind::kMla:
      return "mla";
    case AttnKind::kKda:
      return "kda";
  }
  return "?";
}

LayerAttn ModelProfile::Attn(int32_t l) const {
  if (!attn.empty()) return attn[static_cast<size_t>(l)];
  LayerAttn a;
  a.kind = AttnKind::kGqa;
  a.kv_width = hp.k_dim() + hp.v_dim();
  // q.k and the weighted sum of v over every cached position, 2 flops per multiply-add.
  a.flops_per_ctx = 2.0 * static_cast<double>(hp.n_head * (hp.head_dim_k + hp.head_dim_v));
  return a;
}

uint64_t ModelProfile::KvBytesPerToken(int32_t l, uint64_t elt) const {
  return static_cast<uint64_t>(Attn(l).kv_width) * elt;
}

double ModelProfile::ExpertsTouched(double tokens) const {
  if (moe.n_expert <= 0 || moe.n_expert_used <= 0) return 1.0;
  const double miss = 1.0 - static_cast<double>(moe.n_expert_used) / moe.n_expert;
  return 1.0 - std::pow(miss, std::max(tokens, 0.0));
}

double ModelProfile::ActiveBytes(int32_t l) const {
  const TensorCost& L = layers[static_cast<size_t>(l)];
  if (moe.n_expert <= 0 || experts.empty()) return static_cast<double>(L.bytes);
  const double x = static_cast<double>(experts[static_cast<size_t>(l)].bytes);
  return static_cast<double>(L.bytes) - x +
         x * static_cast<double>(moe.n_expert_used) / moe.n_expert;
}

double ModelProfile::ActiveParams(int32_t l) const {
  const TensorCost& L = layers[static_cast<size_t>(l)];
  if (moe.n_expert <= 0 || experts.empty()) return static_cast<double>(L.matmul_params());
  const double x = static_cast<double>(experts[static_cast<size_t>(l)].matmul_params());
  return static_cast<double>(L.matmul_params()) - x +
         x * static_cast<double>(moe.n_expert_used) / moe.n_expert;
}

uint64_t ModelProfile::StageWeightBytes(int32_t first, int32_t last) const {
  uint64_t b = StageExtras(first, last).bytes;
  for (int32_t l = first; l < last; ++l) b += layers[static_cast<size_t>(l)].bytes;
  return b;
}

Result<uint64_t> KvBytesPerTokenPerLayer(const HParams& hp, DType kv_dtype) {
  if (kv_dtype != DType::kF16 && kv_dtype != DType::kF32)
    return Errorf("KV cache type {} not supported (use f16 or f32)", DTypeName(kv_dtype));
  const uint64_t elt = kv_dtype == DType::kF16 ? 2 : 4;
  // MLA caches only the latent row (V is a view of it): HParams::cache_{k,v}_dim.
  return static_cast<uint64_t>(hp.cache_k_dim() + hp.cache_v_dim()) * elt;
}

BufferBytes StageBufferBytes(const ModelProfile& p, bool first_stage, bool last_stage,
                             const BufferInputs& in) {
  const HParams& hp = p.hp;
  const uint64_t T = static_cast<uint64_t>(std::max<int64_t>(in.max_tokens, 1));
  const int64_t E = hp.n_embd, ad = hp.n_head * hp.head_dim_v;
  BufferBytes b;
  // The llama family's workspace (model/arch/llama/llama_family.cc), grown to [T, width] f32 each:
  // x, xn, tmp [E]; q; k; v; att; gate, up [n_ff]; rope [n_rot]. The last stage adds `rows`
  // [out_rows, E].
  const int64_t ws_width =
      3 * E + hp.q_dim() + hp.k_dim() + hp.v_dim() + ad + 2 * hp.n_ff + hp.n_rot;
  b.workspace = T * static_cast<uint64_t>(ws_width) * kF32;
  const uint64_t out_rows = static_cast<uint64_t>(std::max<int64_t>(in.max_out_rows, 1));
  if (last_stage) b.workspace += out_rows * static_cast<uint64_t>(E) * kF32;

  // MatMulScratch holds one matmul's converted activations: [T, in-dim] of the widest input
  // (E for q/k/v/gate/up/output, ad for attn_output, n_ff for ffn_down).
  double act_bpe = 0;
  for (const TensorCost& l : p.layers)
    for (const TypedParams& t : l.matmul)
      act_bpe = std::max(act_bpe, ActivationBytesPerElement(t.type));
  if (last_stage)
    for (const TypedParams& t : p.StageExtras(0, p.n_layer()).matmul)
      act_bpe = std::max(act_bpe, ActivationBytesPerElement(t.type));
  const int64_t max_in = std::max({E, ad, hp.n_ff});
  b.matmul_scratch = static_cast<uint64_t>(static_cast<double>(T) * max_in * act_bpe + 0.5);

  // Attention scratch: per thread kernels::AttendHeadsScratch floats: a tile (kAttnTile, 64 keys)
  // of converted keys and values plus the state of a GQA group's heads, or max(n_kv, head_dim_v
  // + 64) when that is more.
  constexpr int64_t kAttnTile = 64;
  const int64_t group = hp.n_head_kv > 0 ? std::max<int64_t>(1, hp.n_head / hp.n_head_kv) : 1;
  const int64_t per_thread =
      std::max((hp.head_dim_k + 1 + hp.head_dim_v) * kAttnTile + group * (hp.head_dim_v + 2) + 8,
               std::max(in.max_context, hp.head_dim_v + kAttnTile));
  b.attention =
      static_cast<uint64_t>(std::max(in.n_threads, 1)) * static_cast<uint64_t>(per_thread) * kF32;

  // Stage input and output: token ids on the first stage; received hidden rows (wire copy and
  // f32, planes_in planes) on later stages; ForwardOutput::hidden (f32 and wire copy,
  // planes_out planes) on all but the last; ForwardOutput::logits [out_rows, n_vocab] on the
  // last; the banked attention-residual planes (f32) of the forward.
  const uint64_t hidden = T * static_cast<uint64_t>(E) * kF32;
  const uint64_t wire = T * in.link_row_bytes;
  if (first_stage) b.io += T * sizeof(int32_t);
  if (!first_stage) b.io += static_cast<uint64_t>(std::max(in.planes_in, 1)) * (hidden + wire);
  if (!last_stage) b.io += static_cast<uint64_t>(std::max(in.planes_out, 1)) * (hidden + wire);
  b.io += static_cast<uint64_t>(std::max(in.banked, 0)) * hidden;
  if (last_stage) b.io += out_rows * static_cast<uint64_t>(hp.n_vocab) * kF32;
  return b;
}

Result<ModelProfile> ProfileFromTensors(const HParams& hp,
                                        const std::vector<TensorEntry>& tensors) {
  if (hp.n_layer <= 0 || hp.n_embd <= 0) return Errorf("profile: hyper-parameters not set");
  ModelProfile p;
  p.hp = hp;
  p.layers.resize(static_cast<size_t>(hp.n_layer));
  p.experts.resize(static_cast<size_t>(hp.n_layer));
  std::vector<int> seen(static_cast<size_t>(hp.n_layer), 0);
  bool have_embd = false;
  for (const TensorEntry& t : tensors) {
    p.total_bytes += t.nbytes;
    ++p.n_tensors;
    const int64_t l = LayerIndex(t.name);
    if (l >= 0) {
      if (l >= hp.n_layer)
        return Errorf("tensor {} names layer {} of a {}-layer model", t.name, l, hp.n_layer);
      p.layers[static_cast<size_t>(l)].Add(t);
      // Routed experts are stacked 3-D tensors named ffn_{gate,up,down}_exps (llama.cpp).
      if (t.name.find("_exps.") != std::string::npos) p.experts[static_cast<size_t>(l)].Add(t);
      seen[static_cast<size_t>(l)] = 1;
    } else if (StartsWith(t.name, "blk.")) {
      return Errorf("tensor {}: malformed layer tensor name", t.name);
    } else if (t.name == "token_embd.weight") {
      p.token_embd.Add(t);
      have_embd = true;
    } else if (StartsWith(t.name, "output_norm.") || StartsWith(t.name, "output.")) {
      p.head.Add(t);
    } else {
      p.other.Add(t);
    }
  }
  if (!have_embd) return Errorf("profile: the model has no token_embd.weight");
  for (size_t l = 0; l < seen.size(); ++l)
    if (!seen[l]) return Errorf("profile: layer {} has no tensors", l);
  return p;
}

void ReadMoeAndAttention(const gguf::File& f, ModelProfile* p) {
  const std::string a = p->hp.arch + ".";
  p->moe.n_expert = static_cast<int64_t>(f.GetUintOr(a + "expert_count", 0));
  p->moe.n_expert_used = static_cast<int64_t>(f.GetUintOr(a + "expert_used_count", 0));
  p->moe.n_expert_shared = static_cast<int64_t>(f.GetUintOr(a + "expert_shared_count", 0));
  const int64_t lora = static_cast<int64_t>(f.GetUintOr(a + "attention.kv_lora_rank", 0));
  if (lora <= 0) return;
  // MLA (DeepSeek-V2/V3 layout): the cache holds the latent and the shared rope key per token;
  // with the up-projections absorbed each head scores against lora + rope elements and sums
  // lora elements.
  const int64_t rope = static_cast<int64_t>(f.GetUintOr(a + "rope.dimension_count", 64));
  LayerAttn m;
  m.kind = AttnKind::kMla;
  m.kv_width = lora + rope;
  m.flops_per_ctx = 2.0 * static_cast<double>(p->hp.n_head * (2 * lora + rope));
  p->attn.assign(static_cast<size_t>(p->n_layer()), m);
}

Result<ModelProfile> ProfileFromGguf(const gguf::File& f) {
  Result<HParams> loaded = LoadHParams(f);
  HParams hp;
  if (loaded.ok()) {
    hp = *loaded;
  } else {
    // An architecture the engine cannot run can still be priced: the shared keys suffice.
    SHOAL_RETURN_IF_ERROR(ReadCommonHParams(f, &hp));
  }
  std::vector<TensorEntry> entries;
  entries.reserve(f.tensors().size());
  for (const gguf::TensorInfo& ti : f.tensors()) {
    TensorEntry e;
    e.name = ti.name;
    e.type = ti.type;
    e.ne = ti.ne;
    e.n_dims = ti.n_dims;
    e.nbytes = ti.nbytes;
    entries.push_back(std::move(e));
  }
  if (hp.n_vocab == 0)  // set by the architecture's loader; else the embedding's rows
    for (const TensorEntry& e : entries)
      if (e.name == "token_embd.weight") hp.n_vocab = e.ne[1];
  Result<ModelProfile> p = ProfileFromTensors(hp, entries);
  if (!p.ok()) return p.status().Annotate(f.path());
  ReadMoeAndAttention(f, &*p);
  return p;
}

}  // namespace shoal::planner
