// Requantizing a GGUF model to one of llama.cpp's quantization mixes (`shoal quantize`).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace shoal {

// What QuantizeModel did (for the CLI's summary line).
struct QuantizeStats {
  int n_fallback = 0;      // tensors whose rows are not whole blocks of the chosen type
  int n_converted = 0;     // tensors written in a type other than their input type
  uint64_t in_bytes = 0;   // input tensor data
  uint64_t out_bytes = 0;  // output tensor data
  int64_t n_elements = 0;  // all tensors
};

struct QuantizeOptions {
  std::string mix;                       // one of QuantizeMixNames(), case-insensitive
  int n_threads = 0;                     // 0: every hardware thread
  std::function<void(double)> progress;  // fraction of weights done, 0..1
  QuantizeStats* stats = nullptr;        // filled in when not null
};

// The mix names llama-quantize users know: F32, F16, BF16, Q8_0, Q4_0, ..., Q4_K_M, ..., MXFP4.
std::vector<std::string> QuantizeMixNames();

// llama.cpp's general.file_type (llama_ftype) for a mix, or nullopt if the name is unknown.
std::optional<uint32_t> QuantizeMixFileType(const std::string& mix);

// Reads `in` (any tensor types Shoal can dequantize), picks each tensor's type with llama.cpp's
// llama_tensor_get_type rules for the mix, and writes `out`: metadata copied with
// general.file_type and general.quantization_version = 2 updated, tensors in llama-quantize's
// order (by layer, then name). Without an importance matrix the quantized bytes are those
// llama-quantize writes. Memory: the output tensors plus one F32 row per thread.
Status QuantizeModel(const std::string& in, const std::string& out, const QuantizeOptions& opts);

}  // namespace shoal
