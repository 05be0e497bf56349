// Random-weight model synthesizer: llama-architecture GGUF files with a working SPM vocabulary.
//
// `shoal synth` uses it to make models of real shapes (TinyLlama 1.1B, Llama-2 7B) for
// benchmarks, memory planning and end-to-end tests without downloading weights. The files follow
// llama.cpp's llama layout and metadata exactly, so llama.cpp loads them too.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace shoal {

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
  std::string arch = "llama";   // only "llama" so far
  std::string preset = "tiny";  // a SynthPresets() name
  // Matrix type: kF32, kF16, kQ8_0 or kQ4_0 (norms are always F32). With kQ4_0, output.weight is
  // Q6_K as llama-quantize makes it (Q8_0 when n_embd is not a multiple of 256).
  DType type = DType::kF32;
  uint64_t seed = 1;  // same seed, preset and type -> byte-identical file
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
  enum class Init { kMatrix, kEmbedding, kNorm };
  std::string name;
  DType type = DType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous (fan-in) dimension
  Init init = Init::kMatrix;
};
// The tensors of `preset` with matrices of `type`, in file order (token_embd, then each block,
// then output_norm and output). Errors on an unsupported type or inconsistent shape.
Result<std::vector<SynthTensor>> SynthTensorList(const SynthPreset& preset, DType type);
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
