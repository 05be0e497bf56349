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
// A 1-D tensor of n elements converted to F32 (norm weights, biases).
Result<std::vector<float>> LoadVector(const gguf::File& f, const std::string& name, int64_t n);
// Same, but an absent tensor gives an empty vector.
Result<std::vector<float>> LoadOptionalVector(const gguf::File& f, const std::string& name,
                                              int64_t n);

}  // namespace shoal
