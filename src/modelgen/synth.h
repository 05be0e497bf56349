// Random-weight model synthesizer: llama, qwen3moe, deepseek2 and kimi-k3 GGUF files with a
// working SPM vocabulary.
//
// `shoal synth` uses it to make models of real shapes (TinyLlama 1.1B, Llama-2 7B, MoE models
// with many experts) for benchmarks, memory planning and end-to-end tests without downloading
// weights. The files follow llama.cpp's layout and metadata key names exactly (the MoE tiny
// presets have the shapes and keys of ../shared/models/tiny), so llama.cpp loads them too.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace shoal {
namespace gguf {
class Writer;
}

// Shape of a synthesized model (llama hyper-parameters).
struct SynthPreset {
  std::string name;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
};

// All presets: "tiny" (256-dim, 4 layers, 4096 tokens: ~3.2M parameters, for tests), "1b"
// (TinyLlama-1.1B), "7b" (Llama-2-7B).
const std::vector<SynthPreset>& SynthPresets();
// The preset called `name`, or an error listing the known names.
Result<SynthPreset> FindSynthPreset(const std::string& name);

struct SynthOptions {
  std::string arch = "llama";   // "llama", or a MoeSynthPresets() arch
  std::string preset = "tiny";  // a SynthPresets() name (llama) or MoeSynthPresets() name
  // Matrix type: kF32, kF16, kQ8_0 or kQ4_0 (norms are always F32). With kQ4_0, output.weight is
  // Q6_K as llama-quantize makes it (Q8_0 when n_embd is not a multiple of 256).
  DType type = DType::kF32;
  uint64_t seed = 1;    // same seed, preset and type -> byte-identical file
  int64_t n_layer = 0;  // > 0: overrides the preset's layer count (e.g. deep pipelines in tests)
  // Called on the calling thread with the fraction done in [0, 1] (generation is 0..0.95, the
  // final write 0.95..1).
  std::function<void(double)> progress;
  int n_threads = 0;  // 0: every hardware thread
  // The GGUF writer needs all tensor data at once. Up to this many bytes it is held in memory
  // (1b: f32 4.4 GB, f16 2.2 GB, q8_0 1.2 GB, q4_0 0.64 GB); above it, it is staged in a
  // temporary mmapped file beside the output (the page cache can then evict it). 0: half of the
  // physical memory.
  uint64_t memory_limit_bytes = 0;
};

// Writes a random-weight model as a GGUF v3 file at `out_path` (replaced atomically). Matrices
// ~ N(0, 1/fan_in), token embeddings ~ N(0, 1), norm weights 1 + 0.1 N(0, 1); the vocabulary is
// BuildSynthVocab(n_vocab).
Status SynthesizeModel(const SynthOptions& opt, const std::string& out_path);

// One tensor of a synthesized model.
struct SynthTensor {
  // kMatrix N(0, 1/ne[0]); kEmbedding N(0, 1); kNorm 1 + 0.1 N(0, 1); kScaled N(0, sd^2);
  // kNegUniform -U(1, 16) (kimi-k3 ssm_a = -exp(A_log), as the converter stores it).
  enum class Init { kMatrix, kEmbedding, kNorm, kScaled, kNegUniform };
  std::string name;
  DType type = DType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous (fan-in) dimension
  Init init = Init::kMatrix;
  float sd = 0;  // kScaled only
};
// Elements and rows (ne[1] * ne[2] * ne[3]) of a tensor.
int64_t SynthTensorElements(const SynthTensor& t);
// The tensors of `preset` with matrices of `type`, in file order (token_embd, then each block,
// then output_norm and output). Errors on an unsupported type or inconsistent shape.
Result<std::vector<SynthTensor>> SynthTensorList(const SynthPreset& preset, DType type);
// Shape of a synthesized MoE model. Fields an architecture does not use are 0.
struct MoeSynthPreset {
  std::string arch;  // "qwen3moe", "deepseek2" or "kimi-k3"
  std::string name;  // "tiny" (the shapes of ../shared/models/tiny) or "small"
  int64_t n_embd = 0, n_layer = 0, n_head = 0;
  int64_t n_head_kv = 0;  // qwen3moe (MLA: 1)
  int64_t head_dim = 0;   // qwen3moe key/value length
  int64_t n_ff = 0;       // dense FFN width (leading dense layers)
  int64_t n_vocab = 0, n_ctx = 0;
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0, n_expert_shared = 0, n_dense_lead = 0;
  int64_t q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_head = 0;        // MLA
  int64_t kda_head_dim = 0, d_conv = 0, expert_latent = 0, attn_res_block = 0;  // kimi-k3
  int64_t mla_period = 0;  // kimi-k3: layer l is MLA when (l + 1) % mla_period == 0, else KDA
  float rope_freq_base = 10000.0f, rms_eps = 1e-6f;
};
// qwen3moe, deepseek2 and kimi-k3, each "tiny" and "small" (64 experts top-8 in a few hundred MB).
const std::vector<MoeSynthPreset>& MoeSynthPresets();
bool IsMoeSynthArch(const std::string& arch);
// The preset of `arch` called `name`, or an error listing the known names.
Result<MoeSynthPreset> FindMoeSynthPreset(const std::string& arch, const std::string& name);
// Tensors in llama.cpp's names and shapes, matrices of `type` (routers, convolutions, norms and
// 1-D tensors F32; with Q4_0 output.weight is Q6_K, or Q8_0 when n_embd % 256 != 0).
Result<std::vector<SynthTensor>> MoeSynthTensorList(const MoeSynthPreset& p, DType type);
// The "<arch>.*" metadata keys llama.cpp reads for `p`.
void SetMoeSynthMetadata(const MoeSynthPreset& p, gguf::Writer* w);

// ggml's llama_ftype for a matrix type (general.file_type): F32 0, F16 1, Q4_0 2, Q8_0 7.
Result<uint32_t> SynthFileType(DType type);

// llama.cpp token types (tokenizer.ggml.token_type).
inline constexpr int32_t kTokenNormal = 1;
inline constexpr int32_t kTokenUnknown = 2;
inline constexpr int32_t kTokenControl = 3;
inline constexpr int32_t kTokenByte = 6;

// An SPM ("llama") vocabulary: "<unk>" 0, "<s>" 1, "</s>" 2, the byte tokens "<0x00>".."<0xFF>",
// the single characters "▁" and printable ASCII, then multi-character pieces (common English
// words with and without "▁", capitalized, and their prefixes; then letter n-grams) with
// strictly decreasing scores. The vocabulary is prefix-closed: every multi-character piece minus
// its last character is a token, so SentencePiece bigram merging can build every piece.
struct SynthVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};
inline constexpr int64_t kSynthVocabMin = 3 + 256 + 95;  // specials, bytes, single characters
// Exactly n_vocab tokens (error below kSynthVocabMin or above what the generator can fill).
Result<SynthVocab> BuildSynthVocab(int64_t n_vocab);

}  // namespace shoal
