// SynthesizeModel: random weights (llama or a MoE preset), quantized row by row in parallel,
// written as GGUF v3.
#include "modelgen/synth.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "gguf/gguf.h"
#include "io/mapped_file.h"
#include "kernels/quant.h"
#include "threading/thread_pool.h"

namespace shoal {
namespace {

// Elements generated per ParallelFor call: ~16 MB of f32 scratch over all threads, small enough
// that progress advances every few ms and large enough that the fork-join cost (~10 us) is lost.
constexpr int64_t kSliceElements = int64_t{4} << 20;
// Fraction of the progress bar spent generating; the final Writer::Write takes the rest.
constexpr double kGenerateShare = 0.95;

uint64_t Mix64(uint64_t z) {  // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// Fills x[0..n) with approximately N(0, 1) values from the stream of (seed, tensor, row): the
// Irwin-Hall sum of four 16-bit uniforms of one splitmix64 output (variance matched exactly,
// kurtosis 2.7 instead of 3, tails cut at 3.46 sigma). About 3 ns per value, several times cheaper
// than Box-Muller with libm, which matters for the 1.1e9 values of the 1b preset; random weights
// need no better. Each row has its own stream, so the result does not depend on the thread count.
void FillNormal(uint64_t stream, float* x, int64_t n) {
  constexpr double kMean = 4 * 32767.5;
  const float inv_sd = static_cast<float>(1.0 / std::sqrt(4.0 * (65536.0 * 65536.0 - 1) / 12.0));
  uint64_t s = stream;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t z = Mix64(s += 0x9e3779b97f4a7c15ULL);
    const uint64_t sum = (z & 0xffff) + ((z >> 16) & 0xffff) + ((z >> 32) & 0xffff) + (z >> 48);
    x[i] = static_cast<float>(static_cast<double>(sum) - kMean) * inv_sd;
  }
}

// Tensor bytes in anonymous memory aligned to 2 MB and marked for transparent huge pages: no
// zero-fill pass (std::vector's memset was 14% of the time) and one page fault per 2 MB instead
// of per 4 KB (a fault costs ~20 us in a VM; the 1b f16 model took 550k of them).
class Buffer {
 public:
  static Result<Buffer> Allocate(uint64_t n) {
    Buffer b;
    b.size_ = n;
    b.len_ = n + kHugePage;
    void* p = mmap(nullptr, b.len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return Errorf("synth: cannot allocate {} bytes: {}", n, std::strerror(errno));
    b.base_ = static_cast<uint8_t*>(p);
    const uintptr_t a = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
    b.data_ = reinterpret_cast<uint8_t*>(a);
    madvise(b.data_, n, MADV_HUGEPAGE);  // advisory: failure only costs speed
    return b;
  }
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(len_, o.len_);
    return *this;
  }
  ~Buffer() {
    if (base_) munmap(base_, len_);
  }
  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  static constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0, len_ = 0;
};

// Generated tensor bytes go either into memory (handed to the writer) or into a staging file
// that is mmapped once complete.
class TensorSink {
 public:
  TensorSink(gguf::Writer* w, std::string staging_path)
      : writer_(w), staging_path_(std::move(staging_path)) {}
  ~TensorSink() {
    if (file_) std::fclose(file_);
    if (!staging_path_.empty()) std::remove(staging_path_.c_str());
  }
  Status Add(const SynthTensor& t, Buffer bytes) {
    if (staging_path_.empty()) {
      SHOAL_RETURN_IF_ERROR(writer_->AddTensor(t.name, t.type, t.ne, bytes.data(), bytes.size()));
      held_.push_back(std::move(bytes));
      return Status::Ok();
    }
    if (!file_) {
      file_ = std::fopen(staging_path_.c_str(), "wb");
      if (!file_) return Errorf("{}: cannot create: {}", staging_path_, std::strerror(errno));
    }
    if (std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size()) {
      return Errorf("{}: write failed: {}", staging_path_, std::strerror(errno));
    }
    staged_.push_back({t, staged_bytes_, bytes.size()});
    staged_bytes_ += bytes.size();
    return Status::Ok();
  }
  // Hands the staged tensors to the writer (they point into the mapping, which lives as long as
  // this sink).
  Status Finish() {
    if (!file_) return Status::Ok();
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!closed) return Errorf("{}: close failed: {}", staging_path_, std::strerror(errno));
    SHOAL_ASSIGN_OR_RETURN(map_, MappedFile::Open(staging_path_));
    for (const Staged& s : staged_) {
      SHOAL_RETURN_IF_ERROR(
          writer_->AddTensor(s.t.name, s.t.type, s.t.ne, map_->data() + s.offset, s.nbytes));
    }
    return Status::Ok();
  }

 private:
  struct Staged {
    SynthTensor t;
    uint64_t offset, nbytes;
  };
  gguf::Writer* writer_;
  std::string staging_path_;  // empty: keep in memory
  std::vector<Buffer> held_;  // in memory: the bytes the writer points to
  std::FILE* file_ = nullptr;
  std::vector<Staged> staged_;
  uint64_t staged_bytes_ = 0;
  std::unique_ptr<MappedFile> map_;
};

uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                               : uint64_t{8} << 30;
}

// Uniform in [0, 1) from the same per-row stream as FillNormal.
void FillUniform(uint64_t stream, float* x, int64_t n) {
  uint64_t s = stream;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>((Mix64(s += 0x9e3779b97f4a7c15ULL) >> 40) * 0x1.0p-24);
  }
}

void SetGeneralMetadata(const SynthOptions& opt, const std::string& preset, uint32_t file_type,
                        gguf::Writer* w) {
  w->SetString("general.architecture", opt.arch);
  w->SetString("general.name",
               fmt::format("shoal-synth-{}-{}-{}", opt.arch, preset, DTypeName(opt.type)));
  w->SetU32("general.file_type", file_type);
  w->SetU32("general.quantization_version", 2);  // GGML_QNT_VERSION
}

void SetTokenizerMetadata(SynthVocab vocab, gguf::Writer* w) {
  w->SetString("tokenizer.ggml.model", "llama");
  w->SetStringArray("tokenizer.ggml.tokens", vocab.tokens);
  w->SetF32Array("tokenizer.ggml.scores", vocab.scores);
  w->SetI32Array("tokenizer.ggml.token_type", vocab.types);
  w->SetU32("tokenizer.ggml.bos_token_id", 1);
  w->SetU32("tokenizer.ggml.eos_token_id", 2);
  w->SetU32("tokenizer.ggml.unknown_token_id", 0);
  w->SetBool("tokenizer.ggml.add_bos_token", true);
  w->SetBool("tokenizer.ggml.add_eos_token", false);
}

void SetLlamaMetadata(const SynthPreset& p, gguf::Writer* w) {
  w->SetU32("llama.vocab_size", static_cast<uint32_t>(p.n_vocab));
  w->SetU32("llama.context_length", static_cast<uint32_t>(p.n_ctx));
  w->SetU32("llama.embedding_length", static_cast<uint32_t>(p.n_embd));
  w->SetU32("llama.block_count", static_cast<uint32_t>(p.n_layer));
  w->SetU32("llama.feed_forward_length", static_cast<uint32_t>(p.n_ff));
  w->SetU32("llama.rope.dimension_count", static_cast<uint32_t>(p.n_embd / p.n_head));
  w->SetU32("llama.attention.head_count", static_cast<uint32_t>(p.n_head));
  w->SetU32("llama.attention.head_count_kv", static_cast<uint32_t>(p.n_head_kv));
  w->SetF32("llama.attention.layer_norm_rms_epsilon", p.rms_eps);
  w->SetF32("llama.rope.freq_base", p.rope_freq_base);
}

}  // namespace

int64_t SynthTensorElements(const SynthTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.ne) n *= d;
  return n;
}

const std::vector<SynthPreset>& SynthPresets() {
  static const std::vector<SynthPreset> kPresets = {
      // name, n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx
      {"tiny", 256, 4, 8, 4, 768, 4096, 2048},
      {"1b", 2048, 22, 32, 4, 5632, 32000, 2048},    // TinyLlama-1.1B
      {"7b", 4096, 32, 32, 32, 11008, 32000, 4096},  // Llama-2-7B
  };
  return kPresets;
}

Result<SynthPreset> FindSynthPreset(const std::string& name) {
  std::string names;
  for (const SynthPreset& p : SynthPresets()) {
    if (p.name == name) return p;
    names += names.empty() ? p.name : ", " + p.name;
  }
  return Errorf("unknown synth preset '{}' (known: {})", name, names);
}

Result<uint32_t> SynthFileType(DType type) {
  switch (type) {
    case DType::kF32:
      return 0u;  // LLAMA_FTYPE_ALL_F32
    case DType::kF16:
      return 1u;  // LLAMA_FTYPE_MOSTLY_F16
    case DType::kQ4_0:
      return 2u;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case DType::kQ8_0:
      return 7u;  // LLAMA_FTYPE_MOSTLY_Q8_0
    default:
      return Errorf("synth: unsupported type {} (use f32, f16, q8_0 or q4_0)", DTypeName(type));
  }
}

Result<std::vector<SynthTensor>> SynthTensorList(const SynthPreset& p, DType type) {
  SHOAL_RETURN_IF_ERROR(SynthFileType(type).status());
  if (p.n_embd <= 0 || p.n_layer <= 0 || p.n_head <= 0 || p.n_head_kv <= 0 || p.n_ff <= 0 ||
      p.n_vocab <= 0 || p.n_ctx <= 0 || p.n_embd % p.n_head != 0 || p.n_head % p.n_head_kv != 0) {
    return Errorf("synth preset '{}': inconsistent shape", p.name);
  }
  const int64_t block = Info(type).block_size;
  if (p.n_embd % block != 0 || p.n_ff % block != 0) {
    return Errorf("synth preset '{}': n_embd {} and n_ff {} must be multiples of {} for {}", p.name,
                  p.n_embd, p.n_ff, block, DTypeName(type));
  }
  // llama-quantize's Q4_0 mix keeps output.weight at Q6_K, falling back to Q8_0 when a row is
  // not whole 256-element super-blocks (or Shoal cannot quantize Q6_K).
  DType out_type = type;
  if (type == DType::kQ4_0) {
    const bool q6k = p.n_embd % 256 == 0 && kernels::QuantizeSupported(DType::kQ6_K) &&
                     kernels::IsSupportedWeightType(DType::kQ6_K);
    out_type = q6k ? DType::kQ6_K : DType::kQ8_0;
  }
  using Init = SynthTensor::Init;
  const int64_t kv_dim = p.n_embd / p.n_head * p.n_head_kv;
  std::vector<SynthTensor> t;
  t.push_back({"token_embd.weight", type, {p.n_embd, p.n_vocab}, Init::kEmbedding});
  for (int64_t l = 0; l < p.n_layer; ++l) {
    auto add = [&](const char* name, DType dt, std::vector<int64_t> ne, Init init) {
      t.push_back({fmt::format("blk.{}.{}.weight", l, name), dt, std::move(ne), init});
    };
    add("attn_norm", DType::kF32, {p.n_embd}, Init::kNorm);
    add("attn_q", type, {p.n_embd, p.n_embd}, Init::kMatrix);
    add("attn_k", type, {p.n_embd, kv_dim}, Init::kMatrix);
    add("attn_v", type, {p.n_embd, kv_dim}, Init::kMatrix);
    add("attn_output", type, {p.n_embd, p.n_embd}, Init::kMatrix);
    add("ffn_norm", DType::kF32, {p.n_embd}, Init::kNorm);
    add("ffn_gate", type, {p.n_embd, p.n_ff}, Init::kMatrix);
    add("ffn_up", type, {p.n_embd, p.n_ff}, Init::kMatrix);
    add("ffn_down", type, {p.n_ff, p.n_embd}, Init::kMatrix);
  }
  t.push_back({"output_norm.weight", DType::kF32, {p.n_embd}, Init::kNorm});
  t.push_back({"output.weight", out_type, {p.n_embd, p.n_vocab}, Init::kMatrix});
  return t;
}

Status SynthesizeModel(const SynthOptions& opt, const std::string& out_path) {
  SHOAL_ASSIGN_OR_RETURN(const uint32_t file_type, SynthFileType(opt.type));
  gguf::Writer writer;
  std::vector<SynthTensor> tensors;
  int64_t n_vocab = 0;
  if (opt.arch == "llama") {
    SHOAL_ASSIGN_OR_RETURN(SynthPreset p, FindSynthPreset(opt.preset));
    if (opt.n_layer > 0) p.n_layer = opt.n_layer;
    SHOAL_ASSIGN_OR_RETURN(tensors, SynthTensorList(p, opt.type));
    SetGeneralMetadata(opt, p.name, file_type, &writer);
    SetLlamaMetadata(p, &writer);
    n_vocab = p.n_vocab;
  } else if (IsMoeSynthArch(opt.arch)) {
    SHOAL_ASSIGN_OR_RETURN(MoeSynthPreset p, FindMoeSynthPreset(opt.arch, opt.preset));
    if (opt.n_layer > 0) p.n_layer = opt.n_layer;
    SHOAL_ASSIGN_OR_RETURN(tensors, MoeSynthTensorList(p, opt.type));
    SetGeneralMetadata(opt, p.name, file_type, &writer);
    SetMoeSynthMetadata(p, &writer);
    n_vocab = p.n_vocab;
  } else {
    return Errorf(
        "synth: unsupported architecture '{}' (known: llama, qwen3moe, deepseek2, kimi-k3)",
        opt.arch);
  }
  SHOAL_ASSIGN_OR_RETURN(SynthVocab vocab, BuildSynthVocab(n_vocab));
  SetTokenizerMetadata(std::move(vocab), &writer);
  for (const SynthTensor& t : tensors) {
    if (!kernels::QuantizeSupported(t.type)) {
      return Errorf("synth: cannot quantize to {} in this build", DTypeName(t.type));
    }
  }

  int64_t total_elements = 0;
  uint64_t total_bytes = 0;
  for (const SynthTensor& t : tensors) {
    const int64_t rows = SynthTensorElements(t) / t.ne[0];
    total_elements += t.ne[0] * rows;
    total_bytes += *RowBytes(t.type, t.ne[0]) * static_cast<uint64_t>(rows);
  }
  const uint64_t limit =
      opt.memory_limit_bytes > 0 ? opt.memory_limit_bytes : PhysicalMemoryBytes() / 2;

  TensorSink sink(&writer, total_bytes > limit ? out_path + ".staging" : "");
  ThreadPool pool(opt.n_threads > 0 ? opt.n_threads : HardwareThreads());
  const uint64_t seed_mix = Mix64(opt.seed ^ 0x5348'4f41'4c53'594eULL);  // "SHOALSYN"

  int64_t done_elements = 0;
  for (const SynthTensor& t : tensors) {
    const int64_t n = t.ne[0];
    const int64_t rows = SynthTensorElements(t) / n;
    const uint64_t row_bytes = *RowBytes(t.type, n);
    const uint64_t tensor_stream = Mix64(seed_mix + Fnv1a(t.name));
    // Scale and offset of N(0, 1): fan-in scaling keeps activations O(1) through every layer.
    // kNegUniform: -(1 + 15 u) with u uniform in [0, 1).
    using Init = SynthTensor::Init;
    const float scale = t.init == Init::kMatrix       ? 1.0f / std::sqrt(static_cast<float>(n))
                        : t.init == Init::kNorm       ? 0.1f
                        : t.init == Init::kScaled     ? t.sd
                        : t.init == Init::kNegUniform ? -15.0f
                                                      : 1.0f;
    const float offset = t.init == Init::kNorm ? 1.0f : t.init == Init::kNegUniform ? -1.0f : 0.0f;
    SHOAL_ASSIGN_OR_RETURN(Buffer bytes, Buffer::Allocate(row_bytes * rows));
    const int64_t slice_rows = std::max<int64_t>(1, kSliceElements / n);
    for (int64_t r0 = 0; r0 < rows; r0 += slice_rows) {
      const int64_t r1 = std::min(rows, r0 + slice_rows);
      pool.ParallelFor(r1 - r0, 1, [&](int64_t b, int64_t e) {
        std::vector<float> x(n);
        for (int64_t r = r0 + b; r < r0 + e; ++r) {
          const uint64_t row_stream = Mix64(tensor_stream + static_cast<uint64_t>(r));
          if (t.init == Init::kNegUniform) {
            FillUniform(row_stream, x.data(), n);
          } else {
            FillNormal(row_stream, x.data(), n);
          }
          for (float& v : x) v = v * scale + offset;
          kernels::QuantizeWeights(t.type, x.data(), bytes.data() + r * row_bytes, n);
        }
      });
      done_elements += (r1 - r0) * n;
      if (opt.progress) opt.progress(kGenerateShare * done_elements / total_elements);
    }
    SHOAL_RETURN_IF_ERROR(sink.Add(t, std::move(bytes)));
  }
  SHOAL_RETURN_IF_ERROR(sink.Finish());
  SHOAL_RETURN_IF_ERROR(writer.Write(out_path));
  if (opt.progress) opt.progress(1.0);
  return Status::Ok();
}

}  // namespace shoal
