// Looking up weight tensors in a GGUF file with shape checks.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"

namespace shoal {

// A matrix as ggml stores it: ne = [cols, rows]; a row is one output feature.
Result<kernels::MatrixView> LoadMatrix(const gguf::File& f, const std::string& name, int64_t cols,
                                       int64_t rows);
// A matrix slice of a 3-D tensor ne = [cols, rows, n], taking index `i` of the last dim
// (per-head or per-expert matrices).
Result<kernels::MatrixView> LoadMatrixSlice(const gguf::File& f, const std::string& name,
                                            int64_t cols, int64_t rows, int64_t n, int64_t i);
// Memory for weights laid out once at load (kernels::Pretile): one private anonymous mapping,
// advised for transparent huge pages (a decode streams every weight: 4 KiB pages cost a TLB
// miss each), handed out in 64-byte-aligned pieces. Pages count in RSS as they are written.
class WeightArena {
 public:
  WeightArena() = default;
  ~WeightArena();
  WeightArena(const WeightArena&) = delete;
  WeightArena& operator=(const WeightArena&) = delete;

  // Maps `bytes` (once; an error if already reserved or the mapping fails).
  Status Reserve(uint64_t bytes);
  // The next n bytes of the reservation, or null when it has fewer left.
  uint8_t* Take(uint64_t n);

 private:
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0, used_ = 0;
};

// Lays out every matrix of `ms` that kernels::CanPretile accepts (Q4_0 on AVX-512 VNNI) in
// `arena` and repoints it there; each source range is then dropped from the file's mapping
// (gguf::File::DropPages), so the process holds each matrix once, and at most one twice while
// loading. Same MatMul results, bit for bit; 1.2-1.6x faster MatMul from DRAM (matmul_bench
// BM_MatMulCold). The others, where the file is mapped with 4 KiB page-cache pages, are copied
// into the arena as they are and dropped the same way: decode reads every weight once per
// token, and huge pages read 1b Q4_0 (its Q6_K head is not pretiled) ~9% faster here (`shoal
// bench -t 1 -n 64 --mmap 0` vs `1`: 60.8 vs 55.4 tok/s). A null entry is skipped.
Status PretileMatrices(const gguf::File& f, const std::vector<kernels::MatrixView*>& ms,
                       WeightArena* arena);

// A 1-D tensor of n elements converted to F32 (norm weights, biases).
Result<std::vector<float>> LoadVector(const gguf::File& f, const std::string& name, int64_t n);
// Same, but an absent tensor gives an empty vector.
Result<std::vector<float>> LoadOptionalVector(const gguf::File& f, const std::string& name,
                                              int64_t n);

}  // namespace shoal
