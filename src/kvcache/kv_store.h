// The KV memory pool: K and V rows for a range of layers, addressed by (layer, block, slot), and
// the per-sequence recurrent-state slots of models that keep one (kimi-k3's KDA layers).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/status.h"
#include "tensor/dtype.h"

namespace shoal {

struct KvLayout {
  int32_t n_layers = 0;       // layers held here (a pipeline stage holds only its own)
  int64_t k_dim = 0;          // elements per token row of K (n_head_kv * head_dim_k)
  int64_t v_dim = 0;          // elements per token row of V (0 when V is a view of K, e.g. MLA)
  DType dtype = DType::kF16;  // F16 (llama.cpp's default numerics) or F32
  int32_t block_size = 16;    // tokens per block
  int32_t n_blocks = 0;
  // Recurrent state: n_state_slots slots of state_floats F32 values (all this range's recurrent
  // layers for one sequence). 0 for models without recurrent layers.
  int64_t state_floats = 0;
  int32_t n_state_slots = 0;

  uint64_t BytesPerBlock() const;  // K + V of all layers for one block
  uint64_t StateBytes() const {    // the whole state pool
    return static_cast<uint64_t>(state_floats) * static_cast<uint64_t>(n_state_slots) * 4;
  }
  uint64_t TotalBytes() const { return BytesPerBlock() * static_cast<uint64_t>(n_blocks); }
};

class KvStore {
 public:
  // Allocates the whole pool up front (DESIGN.md principle 5: memory is planned).
  static Result<KvStore> Create(const KvLayout& layout);

  const KvLayout& layout() const { return layout_; }
  // Bytes of the K and V arrays together (every layer, every block).
  uint64_t bytes() const {
    return (k_layer_bytes_ + v_layer_bytes_) * static_cast<uint64_t>(layout_.n_layers);
  }
  // Writes every page of the pool once, so it is resident from now on: a pipeline node takes
  // its whole planned memory at assignment (and fails there, not in the middle of a request).
  void Touch();
  uint64_t k_row_bytes() const { return k_row_bytes_; }
  uint64_t v_row_bytes() const { return v_row_bytes_; }
  // Base of layer l's K rows: row of (block b, slot s) is at base + (b * block_size + s) * stride.
  uint8_t* KBase(int32_t layer) { return k_.get() + static_cast<uint64_t>(layer) * k_layer_bytes_; }
  uint8_t* VBase(int32_t layer) { return v_.get() + static_cast<uint64_t>(layer) * v_layer_bytes_; }
  const uint8_t* KBase(int32_t layer) const {
    return k_.get() + static_cast<uint64_t>(layer) * k_layer_bytes_;
  }
  const uint8_t* VBase(int32_t layer) const {
    return v_.get() + static_cast<uint64_t>(layer) * v_layer_bytes_;
  }
  // Recurrent-state slot `slot`: layout().state_floats values, and the position the state has
  // reached (tokens folded in; -1 after Create). The model owns the meaning of both.
  float* State(int32_t slot) {
    return state_.data() + static_cast<size_t>(slot) * static_cast<size_t>(layout_.state_floats);
  }
  int32_t& StatePos(int32_t slot) { return state_pos_[static_cast<size_t>(slot)]; }
  // Copies slot src's state and position to slot dst (a fork's child continues its parent).
  void CopyState(int32_t src, int32_t dst);

 private:
  KvLayout layout_;
  uint64_t k_row_bytes_ = 0, v_row_bytes_ = 0, k_layer_bytes_ = 0, v_layer_bytes_ = 0;
  // calloc'd: the kernel hands out zero pages as they are first written, so a 1 GiB pool costs
  // nothing at start-up (zero-filling it took ~0.5 s) and RSS grows with the tokens cached.
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], Free> k_, v_;
  std::vector<float> state_;
  std::vector<int32_t> state_pos_;
};

// Copies K and V rows of every layer from block `src_block` of `src` to block `dst_block` of
// `dst` (copy-on-write and swap; the layouts must agree apart from n_blocks).
void CopyKvBlock(const KvStore& src, int32_t src_block, KvStore& dst, int32_t dst_block);

// Writes one F32 row into the cache format (F16 rounding or F32 copy).
void StoreKvRow(DType dtype, const float* src, uint8_t* dst, int64_t n);

}  // namespace shoal
