// Weight lookup with shape and type validation.
#include "model/weights.h"

#include <sys/mman.h>

#include <cstring>

#include "io/mapped_file.h"
#include "kernels/quant.h"

namespace shoal {

Result<kernels::MatrixView> LoadMatrix(const gguf::File& f, const std::string& name, int64_t cols,
                                       int64_t rows) {
  return LoadMatrixSlice(f, name, cols, rows, 1, 0);
}

Result<kernels::MatrixView> LoadMatrixSlice(const gguf::File& f, const std::string& name,
                                            int64_t cols, int64_t rows, int64_t n, int64_t i) {
  const gguf::TensorInfo* t = f.FindTensor(name);
  if (!t) return Errorf("{}: missing tensor '{}'", f.path(), name);
  if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n || t->ne[3] != 1)
    return Errorf("{}: tensor '{}' has shape [{}, {}, {}, {}], expected [{}, {}, {}]", f.path(),
                  name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], cols, rows, n);
  if (!kernels::IsSupportedWeightType(t->type))
    return Errorf("{}: tensor '{}' has type {} which Shoal cannot compute with", f.path(), name,
                  DTypeName(t->type));
  kernels::MatrixView m;
  m.type = t->type;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = t->row_bytes();
  m.data = t->data + static_cast<uint64_t>(i) * static_cast<uint64_t>(rows) * m.row_bytes;
  return m;
}

WeightArena::~WeightArena() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

Status WeightArena::Reserve(uint64_t bytes) {
  if (base_ != nullptr) return Errorf("weight arena: already reserved");
  if (bytes == 0) return Status::Ok();
  // Whole 2 MiB huge pages, so the last one is not split.
  constexpr uint64_t kHuge = uint64_t{2} << 20;
  const uint64_t size = (bytes + kHuge - 1) / kHuge * kHuge;
  SHOAL_ASSIGN_OR_RETURN(base_, MapAnonymousHuge(size, "weight arena"));
  size_ = size;
  return Status::Ok();
}

uint8_t* WeightArena::Take(uint64_t n) {
  const uint64_t at = (used_ + 63) / 64 * 64;
  if (base_ == nullptr || at + n > size_) return nullptr;
  used_ = at + n;
  return base_ + at;
}

Status PretileMatrices(const gguf::File& f, const std::vector<kernels::MatrixView*>& ms,
                       WeightArena* arena) {
  auto bytes_of = [](const kernels::MatrixView& m) {
    return static_cast<uint64_t>(m.rows) * m.row_bytes;
  };
  auto wanted = [&](const kernels::MatrixView* m) {
    return m != nullptr && !m->tiled &&
           (kernels::CanPretile(*m) || f.InPageCache(m->data, bytes_of(*m)));
  };
  uint64_t total = 0;
  for (const kernels::MatrixView* m : ms)
    if (wanted(m)) total += bytes_of(*m) + 64;
  if (total == 0) return Status::Ok();
  SHOAL_RETURN_IF_ERROR(arena->Reserve(total));
  for (kernels::MatrixView* m : ms) {
    if (!wanted(m)) continue;
    const uint64_t bytes = bytes_of(*m);
    uint8_t* dst = arena->Take(bytes);
    if (dst == nullptr) return Errorf("weight arena: out of room for a {}-byte matrix", bytes);
    const uint8_t* src = m->data;
    if (kernels::CanPretile(*m)) {
      *m = kernels::Pretile(*m, dst, /*pool=*/nullptr);
    } else {
      std::memcpy(dst, src, bytes);
      m->data = dst;
    }
    f.DropPages(src, bytes);
  }
  return Status::Ok();
}

Result<std::vector<float>> LoadVector(const gguf::File& f, const std::string& name, int64_t n) {
  const gguf::TensorInfo* t = f.FindTensor(name);
  if (!t) return Errorf("{}: missing tensor '{}'", f.path(), name);
  if (t->n_elements() != n)
    return Errorf("{}: tensor '{}' has {} elements, expected {}", f.path(), name, t->n_elements(),
                  n);
  if (!kernels::IsSupportedWeightType(t->type))
    return Errorf("{}: tensor '{}' has unsupported type {}", f.path(), name, DTypeName(t->type));
  std::vector<float> v(static_cast<size_t>(n));
  kernels::Dequantize(t->type, t->data, v.data(), n);
  return v;
}

Result<std::vector<float>> LoadOptionalVector(const gguf::File& f, const std::string& name,
                                              int64_t n) {
  if (!f.FindTensor(name)) return std::vector<float>();
  return LoadVector(f, name, n);
}

}  // namespace shoal
