// Weight lookup with shape and type validation.
#include "model/weights.h"

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
