// Requantizing a GGUF model: llama.cpp's per-tensor type rules for each mix, then row-parallel
// dequantize-to-F32 and reference quantization.
#include "modelgen/quantize.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "threading/thread_pool.h"

namespace shoal {
namespace {

// A mix: its name, llama.cpp's llama_ftype number and the default type of its weights.
struct Mix {
  const char* name;
  uint32_t ftype;
  DType base;
};

// llama_ftype numbers from llama.h (LLAMA_FTYPE_MOSTLY_*); "MXFP4" is MXFP4_MOE.
constexpr Mix kMixes[] = {
    {"F32", 0, DType::kF32},      {"F16", 1, DType::kF16},      {"BF16", 32, DType::kBF16},
    {"Q8_0", 7, DType::kQ8_0},    {"Q4_0", 2, DType::kQ4_0},    {"Q4_1", 3, DType::kQ4_1},
    {"Q5_0", 8, DType::kQ5_0},    {"Q5_1", 9, DType::kQ5_1},    {"Q2_K", 10, DType::kQ2_K},
    {"Q3_K_M", 12, DType::kQ3_K}, {"Q4_K_S", 14, DType::kQ4_K}, {"Q4_K_M", 15, DType::kQ4_K},
    {"Q5_K_S", 16, DType::kQ5_K}, {"Q5_K_M", 17, DType::kQ5_K}, {"Q6_K", 18, DType::kQ6_K},
    {"MXFP4", 38, DType::kMXFP4},
};

enum FType : uint32_t {
  kQ2_K = 10,
  kQ3_K_M = 12,
  kQ4_K_S = 14,
  kQ4_K_M = 15,
  kQ5_K_M = 17,
  kMxfp4 = 38,
};

const Mix* FindMix(const std::string& name) {
  std::string up = name;
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (up == "MXFP4_MOE") up = "MXFP4";
  for (const Mix& m : kMixes)
    if (up == m.name) return &m;
  return nullptr;
}

bool Has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// ggml_n_dims: dimensions up to the last one that is not 1 (at least 1).
int EffectiveDims(const gguf::TensorInfo& t) {
  for (int i = 3; i > 0; --i)
    if (t.ne[i] > 1) return i + 1;
  return 1;
}

// The layer number of "blk.N....", or -1.
int LayerOf(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

// llama-quantize's tensor filter: which tensors get the mix's type at all.
bool IsQuantizable(const gguf::TensorInfo& t) {
  const std::string& n = t.name;
  if (!n.ends_with("weight") || EffectiveDims(t) < 2) return false;
  static const char* const kNever[] = {
      "_norm.weight",
      "ffn_gate_inp.weight",
      "altup",
      "laurel",
      "per_layer_model_proj",
      "ssm_conv1d",  // also Kimi's ssm_conv1d_{q,k,v}
      "shortconv.conv.weight",
      "time_mix_first.weight",
      "time_mix_w0.weight",
      "time_mix_w1.weight",
      "time_mix_w2.weight",
      "time_mix_v0.weight",
      "time_mix_v1.weight",
      "time_mix_v2.weight",
      "time_mix_a0.weight",
      "time_mix_a1.weight",
      "time_mix_a2.weight",
      "time_mix_g1.weight",
      "time_mix_g2.weight",
      "time_mix_decay_w1.weight",
      "time_mix_decay_w2.weight",
      "time_mix_lerp_fused.weight",
      "attn_rel_b.weight",
  };
  for (const char* p : kNever)
    if (Has(n, p)) return false;
  return n != "position_embd.weight" && n != "token_types.weight";
}

// The counters and model facts llama_tensor_get_type consults (quantize_state_impl).
struct RuleState {
  uint32_t ftype = 0;
  std::string arch;
  int n_expert = 0;
  int n_gqa = 1;
  int n_attention_wv = 0, i_attention_wv = 0;
  int n_ffn_down = 0, i_ffn_down = 0;
  bool has_output = false;
  bool is_70b = false;  // llama.cpp's LLM_TYPE_70B: a Llama with 80 layers and GQA
  int n_fallback = 0;
};

bool UseMoreBits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

int64_t BlockSize(DType t) { return Info(t).block_size; }

// llama_tensor_get_type for the mixes Shoal offers (no importance matrix, no overrides).
Result<DType> ChooseType(RuleState& qs, DType type, const gguf::TensorInfo& t) {
  const std::string& name = t.name;
  const uint32_t ft = qs.ftype;
  const bool falcon = qs.arch == "falcon";
  if (name == "output.weight" || (!qs.has_output && name == "token_embd.weight")) {
    if (ft == kMxfp4 || falcon || t.ne[0] % BlockSize(type) != 0) {
      type = DType::kQ8_0;
    } else if (type != DType::kQ8_0) {
      type = DType::kQ6_K;
    }
  } else if (ft == kMxfp4) {
    type = t.ne[2] > 1 ? DType::kMXFP4 : DType::kQ8_0;  // experts MXFP4, the rest Q8_0
  } else if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") {
    // The mix's type (llama.cpp changes it only for IQ and TQ mixes).
  } else if (Has(name, "attn_v.weight")) {
    if (ft == kQ2_K) {
      type = qs.n_gqa >= 4 ? DType::kQ4_K : DType::kQ3_K;
    } else if (ft == kQ3_K_M) {
      type = qs.i_attention_wv < 2 ? DType::kQ5_K : DType::kQ4_K;
    } else if ((ft == kQ4_K_M || ft == kQ5_K_M) &&
               UseMoreBits(qs.i_attention_wv, qs.n_attention_wv)) {
      type = DType::kQ6_K;
    } else if (ft == kQ4_K_S && qs.i_attention_wv < 4) {
      type = DType::kQ5_K;
    }
    // llama.cpp's LLM_TYPE_70B: 8 heads share each V row, so attn_v is 8x smaller than attn_q
    // and more bits cost almost nothing.
    if (qs.is_70b && (type == DType::kQ3_K || type == DType::kQ4_K)) type = DType::kQ5_K;
    if (qs.n_expert == 8) type = DType::kQ8_0;  // cheap for 8-expert models
    ++qs.i_attention_wv;
  } else if (Has(name, "attn_k.weight")) {
    if (qs.n_expert == 8) type = DType::kQ8_0;
  } else if (Has(name, "ffn_down")) {
    int i_layer = qs.i_ffn_down;
    const int n_layer = qs.n_ffn_down;
    if (qs.n_expert > 1) {  // expert tensors are not in layer order: read the layer from the name
      i_layer = LayerOf(name);
      if (i_layer < 0 || i_layer >= n_layer) {
        return Errorf("cannot tell the layer of tensor '{}' (block_count {})", name, n_layer);
      }
    }
    if (ft == kQ2_K) {
      type = DType::kQ3_K;
    } else if (ft == kQ3_K_M) {
      type = i_layer < n_layer / 16                     ? DType::kQ5_K
             : !falcon || UseMoreBits(i_layer, n_layer) ? DType::kQ4_K
                                                        : DType::kQ3_K;
    } else if (ft == kQ4_K_M) {
      if (falcon) {
        type = i_layer < n_layer / 16          ? DType::kQ6_K
               : UseMoreBits(i_layer, n_layer) ? DType::kQ5_K
                                               : DType::kQ4_K;
      } else if (UseMoreBits(i_layer, n_layer)) {
        type = DType::kQ6_K;
      }
    } else if (ft == kQ5_K_M && UseMoreBits(i_layer, n_layer)) {
      type = DType::kQ6_K;
    } else if (ft == kQ4_K_S && !falcon && i_layer < n_layer / 8) {
      type = DType::kQ5_K;
    }
    ++qs.i_ffn_down;
  } else if (Has(name, "attn_output.weight")) {
    if (!falcon) {
      if (qs.n_expert == 8) {
        if (ft == kQ2_K || ft == kQ3_K_M || ft == kQ4_K_S || ft == kQ4_K_M) type = DType::kQ5_K;
      } else if (ft == kQ2_K) {
        type = DType::kQ3_K;
      } else if (ft == kQ3_K_M) {
        type = DType::kQ4_K;
      }
    }
  } else if (Has(name, "attn_qkv.weight")) {
    if (ft == kQ3_K_M) type = DType::kQ4_K;
    if (ft == kQ4_K_M) type = DType::kQ5_K;
    if (ft == kQ5_K_M) type = DType::kQ6_K;
  }

  // Rows that do not split into whole blocks: llama.cpp's fallback types.
  if (t.ne[0] % BlockSize(type) != 0) {
    switch (type) {
      case DType::kQ2_K:
      case DType::kQ3_K:
        type = DType::kQ4_0;  // llama.cpp uses IQ4_NL, which Shoal cannot write; same 4.5 bpw
        break;
      case DType::kQ4_K:
        type = DType::kQ5_0;
        break;
      case DType::kQ5_K:
        type = DType::kQ5_1;
        break;
      case DType::kQ6_K:
        type = DType::kQ8_0;
        break;
      default:
        return Errorf("tensor '{}': row length {} is not a multiple of {}'s block size {}", name,
                      t.ne[0], DTypeName(type), BlockSize(type));
    }
    if (t.ne[0] % BlockSize(type) != 0) type = DType::kF16;
    ++qs.n_fallback;
  }
  return type;
}

// llama-model-loader's weight order: by layer (non-layer tensors first), then by name.
bool WeightOrder(const gguf::TensorInfo* a, const gguf::TensorInfo* b) {
  const int la = LayerOf(a->name), lb = LayerOf(b->name);
  if (la != lb) return la < lb;
  return a->name < b->name;
}

// An integer hyper-parameter "{arch}.{key}" (first element if it is a per-layer array), or dflt.
int64_t ArchInt(const gguf::File& f, const std::string& arch, const std::string& key,
                int64_t dflt) {
  const gguf::Value* v = f.Find(arch + "." + key);
  if (v == nullptr) return dflt;
  if (v->type == gguf::ValueType::kArray) {
    if (v->arr.empty() || !v->arr[0].IsInteger()) return dflt;
    return v->arr[0].AsInt();
  }
  return v->IsInteger() ? v->AsInt() : dflt;
}

// Converts all rows of `t` to `type` in parallel: each row is dequantized to F32 and quantized.
Status ConvertTensor(const gguf::TensorInfo& t, DType type, ThreadPool& pool,
                     std::vector<uint8_t>& out) {
  const int64_t n_per_row = t.ne[0], n_rows = t.rows();
  const auto in_row = RowBytes(t.type, n_per_row);
  const auto out_row = RowBytes(type, n_per_row);
  if (!in_row || !out_row) return Errorf("tensor '{}': bad row length {}", t.name, n_per_row);
  if (!kernels::IsSupportedWeightType(t.type)) {
    return Errorf("tensor '{}': cannot read type {}", t.name, DTypeName(t.type));
  }
  if (!kernels::QuantizeSupported(type)) {
    return Errorf("tensor '{}': cannot write type {}", t.name, DTypeName(type));
  }
  out.resize(static_cast<size_t>(*out_row * n_rows));
  pool.ParallelFor(n_rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(n_per_row));  // one F32 row per thread
    for (int64_t r = begin; r < end; ++r) {
      kernels::Dequantize(t.type, t.data + r * *in_row, row.data(), n_per_row);
      kernels::QuantizeWeights(type, row.data(), out.data() + r * *out_row, n_per_row);
    }
  });
  return Status::Ok();
}

}  // namespace

std::vector<std::string> QuantizeMixNames() {
  std::vector<std::string> names;
  for (const Mix& m : kMixes) names.emplace_back(m.name);
  return names;
}

std::optional<uint32_t> QuantizeMixFileType(const std::string& mix) {
  const Mix* m = FindMix(mix);
  if (m == nullptr) return std::nullopt;
  return m->ftype;
}

Status QuantizeModel(const std::string& in, const std::string& out, const QuantizeOptions& opts) {
  const Mix* mix = FindMix(opts.mix);
  if (mix == nullptr) {
    std::string list;
    for (const Mix& m : kMixes) list += std::string(list.empty() ? "" : ", ") + m.name;
    return Errorf("unknown quantization type '{}' (known: {})", opts.mix, list);
  }
  if (in == out) return Errorf("input and output are the same file '{}'", in);
  SHOAL_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> src, gguf::File::Open(in));

  RuleState qs;
  qs.ftype = mix->ftype;
  qs.arch = src->GetStringOr("general.architecture", "");
  qs.n_expert = static_cast<int>(ArchInt(*src, qs.arch, "expert_count", 0));
  const int64_t n_head = ArchInt(*src, qs.arch, "attention.head_count", 0);
  const int64_t n_head_kv = ArchInt(*src, qs.arch, "attention.head_count_kv", n_head);
  qs.n_gqa = n_head_kv > 0 ? static_cast<int>(n_head / n_head_kv) : 1;
  qs.n_ffn_down = static_cast<int>(ArchInt(*src, qs.arch, "block_count", 0));
  qs.is_70b = qs.arch == "llama" && qs.n_ffn_down == 80 && n_head != n_head_kv;

  std::vector<const gguf::TensorInfo*> order;
  for (const auto& t : src->tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), WeightOrder);
  int64_t total_elements = 0;
  for (const auto* t : order) {
    if (Has(t->name, "attn_v.weight") || Has(t->name, "attn_qkv.weight") ||
        Has(t->name, "attn_kv_b.weight")) {
      ++qs.n_attention_wv;
    } else if (t->name == "output.weight") {
      qs.has_output = true;
    }
    total_elements += t->n_elements();
  }

  gguf::Writer writer;
  writer.CopyMetadata(*src, "");
  writer.SetU32("general.quantization_version", 2);  // GGML_QNT_VERSION
  writer.SetU32("general.file_type", mix->ftype);

  const bool mix_quantized = BlockSize(mix->base) > 1;
  ThreadPool pool(opts.n_threads > 0
                      ? opts.n_threads
                      : std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  int64_t done = 0;
  QuantizeStats stats;
  for (const gguf::TensorInfo* t : order) {
    DType type = t->type;
    if (IsQuantizable(*t)) {
      type = mix->base;
      if (mix_quantized) {
        auto chosen = ChooseType(qs, type, *t);
        if (!chosen.ok()) return chosen.status().Annotate(in);
        type = *chosen;
      }
    }
    std::vector<int64_t> ne(t->ne.begin(), t->ne.begin() + EffectiveDims(*t));
    stats.in_bytes += t->nbytes;
    stats.n_elements += t->n_elements();
    if (type == t->type) {
      stats.out_bytes += t->nbytes;
      SHOAL_RETURN_IF_ERROR(writer.AddTensor(t->name, type, ne, t->data, t->nbytes));
    } else {
      std::vector<uint8_t> bytes;
      SHOAL_RETURN_IF_ERROR(ConvertTensor(*t, type, pool, bytes).Annotate(in));
      stats.out_bytes += bytes.size();
      ++stats.n_converted;
      SHOAL_RETURN_IF_ERROR(writer.AddTensorCopy(t->name, type, ne, std::move(bytes)));
    }
    done += t->n_elements();
    if (opts.progress)
      opts.progress(static_cast<double>(done) / std::max<int64_t>(1, total_elements));
  }
  stats.n_fallback = qs.n_fallback;
  if (opts.stats != nullptr) *opts.stats = stats;
  return writer.Write(out);
}

}  // namespace shoal
