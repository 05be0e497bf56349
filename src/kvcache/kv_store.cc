// KvStore allocation and row conversion.
#include "kvcache/kv_store.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "base/fp16.h"

namespace shoal {

uint64_t KvLayout::BytesPerBlock() const {
  const uint64_t elt = dtype == DType::kF16 ? 2 : 4;
  return static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(block_size) *
         static_cast<uint64_t>(k_dim + v_dim) * elt;
}

Result<KvStore> KvStore::Create(const KvLayout& layout) {
  if (layout.dtype != DType::kF16 && layout.dtype != DType::kF32)
    return Errorf("KV cache type {} not supported (use f16 or f32)", DTypeName(layout.dtype));
  if (layout.block_size <= 0 || layout.n_blocks <= 0 || layout.n_layers < 0)
    return Errorf("bad KV layout: block_size {} n_blocks {}", layout.block_size, layout.n_blocks);
  KvStore s;
  s.layout_ = layout;
  const uint64_t elt = layout.dtype == DType::kF16 ? 2 : 4;
  s.k_row_bytes_ = static_cast<uint64_t>(layout.k_dim) * elt;
  s.v_row_bytes_ = static_cast<uint64_t>(layout.v_dim) * elt;
  const uint64_t rows = static_cast<uint64_t>(layout.block_size) * layout.n_blocks;
  s.k_layer_bytes_ = rows * s.k_row_bytes_;
  s.v_layer_bytes_ = rows * s.v_row_bytes_;
  const uint64_t k_total = s.k_layer_bytes_ * static_cast<uint64_t>(layout.n_layers);
  const uint64_t v_total = s.v_layer_bytes_ * static_cast<uint64_t>(layout.n_layers);
  s.k_.reset(static_cast<uint8_t*>(std::calloc(std::max<uint64_t>(k_total, 1), 1)));
  s.v_.reset(static_cast<uint8_t*>(std::calloc(std::max<uint64_t>(v_total, 1), 1)));
  if (!s.k_ || !s.v_)
    return Errorf("cannot allocate a KV pool of {} MiB", (k_total + v_total) >> 20);
  if (layout.state_floats < 0 || layout.n_state_slots < 0)
    return Errorf("bad KV layout: {} state slots of {} floats", layout.n_state_slots,
                  layout.state_floats);
  s.state_.assign(static_cast<size_t>(layout.state_floats) * layout.n_state_slots, 0.f);
  s.state_pos_.assign(static_cast<size_t>(layout.n_state_slots), -1);
  return s;
}

void KvStore::CopyState(int32_t src, int32_t dst) {
  SHOAL_CHECK(src >= 0 && src < layout_.n_state_slots && dst >= 0 && dst < layout_.n_state_slots);
  if (src == dst) return;
  std::copy(State(src), State(src) + layout_.state_floats, State(dst));
  StatePos(dst) = StatePos(src);
}

void KvStore::Touch() {
  // One byte per 4 KiB page: the pages are zero already, writing makes them resident.
  constexpr uint64_t kPage = 4096;
  const uint64_t nk = k_layer_bytes_ * static_cast<uint64_t>(layout_.n_layers);
  const uint64_t nv = v_layer_bytes_ * static_cast<uint64_t>(layout_.n_layers);
  volatile uint8_t* k = k_.get();  // volatile: a store of the zero already there must happen
  volatile uint8_t* v = v_.get();
  for (uint64_t i = 0; i < nk; i += kPage) k[i] = 0;
  for (uint64_t i = 0; i < nv; i += kPage) v[i] = 0;
}

void CopyKvBlock(const KvStore& src, int32_t src_block, KvStore& dst, int32_t dst_block) {
  const KvLayout& l = src.layout();
  SHOAL_CHECK(l.n_layers == dst.layout().n_layers && l.block_size == dst.layout().block_size &&
              src.k_row_bytes() == dst.k_row_bytes() && src.v_row_bytes() == dst.v_row_bytes());
  SHOAL_CHECK(src_block >= 0 && src_block < l.n_blocks && dst_block >= 0 &&
              dst_block < dst.layout().n_blocks);
  const uint64_t k_bytes = static_cast<uint64_t>(l.block_size) * src.k_row_bytes();
  const uint64_t v_bytes = static_cast<uint64_t>(l.block_size) * src.v_row_bytes();
  for (int32_t layer = 0; layer < l.n_layers; ++layer) {
    std::memcpy(dst.KBase(layer) + static_cast<uint64_t>(dst_block) * k_bytes,
                src.KBase(layer) + static_cast<uint64_t>(src_block) * k_bytes, k_bytes);
    if (v_bytes > 0)
      std::memcpy(dst.VBase(layer) + static_cast<uint64_t>(dst_block) * v_bytes,
                  src.VBase(layer) + static_cast<uint64_t>(src_block) * v_bytes, v_bytes);
  }
}

void StoreKvRow(DType dtype, const float* src, uint8_t* dst, int64_t n) {
  if (dtype == DType::kF16) {
    auto* d = reinterpret_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = Fp32ToFp16(src[i]);
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  }
}

}  // namespace shoal
