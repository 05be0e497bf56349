// Row slices and the column gather of exact tensor parallelism.
#include "model/tensor_parallel.h"

#include <algorithm>
#include <chrono>

namespace shoal {

kernels::MatrixView RowSlice(const kernels::MatrixView& m, Slice s) {
  kernels::MatrixView v = m;
  v.rows = s.count;
  v.data = m.data + static_cast<uint64_t>(s.first) * m.row_bytes;
  return v;
}

Status MeteredComm::AllGather(std::span<const float> mine, std::span<const int64_t> counts,
                              std::vector<float>* out) {
  const auto t0 = std::chrono::steady_clock::now();
  Status s = inner_->AllGather(mine, counts, out);
  stats_.ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ++stats_.calls;
  int64_t in = 0;
  for (int64_t c : counts) in += c;
  stats_.bytes_in += (in - static_cast<int64_t>(mine.size())) * static_cast<int64_t>(sizeof(float));
  return s;
}

Result<kernels::MatrixView> ColumnSlice(const kernels::MatrixView& m, Slice s,
                                        std::vector<uint8_t>* storage) {
  const DTypeInfo& t = Info(m.type);
  if (m.tiled) return Errorf("a column slice of a tiled matrix");
  if (s.first % t.block_size != 0 || s.count % t.block_size != 0)
    return Errorf("columns [{}, {}) of a {} matrix do not fall on its {}-element blocks", s.first,
                  s.end(), t.name, t.block_size);
  const uint64_t off = static_cast<uint64_t>(s.first / t.block_size * t.block_bytes);
  const uint64_t bytes = static_cast<uint64_t>(s.count / t.block_size * t.block_bytes);
  storage->resize(static_cast<size_t>(bytes * static_cast<uint64_t>(m.rows)));
  for (int64_t r = 0; r < m.rows; ++r)
    std::copy(m.data + static_cast<uint64_t>(r) * m.row_bytes + off,
              m.data + static_cast<uint64_t>(r) * m.row_bytes + off + bytes,
              storage->data() + static_cast<uint64_t>(r) * bytes);
  kernels::MatrixView v = m;
  v.cols = s.count;
  v.row_bytes = bytes;
  v.data = storage->data();
  return v;
}

Slice UnitSliceOf(int64_t n, int size, int k, int64_t unit) {
  const Slice u = SliceOf(n / unit, size, k);
  return {u.first * unit, u.count * unit};
}

Status AllReduceSum(TpComm& comm, int size, const float* mine, int64_t count, float* out,
                    std::vector<float>* buf) {
  const std::vector<int64_t> counts(static_cast<size_t>(size), count);
  SHOAL_RETURN_IF_ERROR(comm.AllGather({mine, static_cast<size_t>(count)}, counts, buf));
  const float* p = buf->data();
  for (int64_t i = 0; i < count; ++i) {
    float sum = p[i];
    for (int k = 1; k < size; ++k) sum += p[k * count + i];
    out[i] = sum;
  }
  return Status::Ok();
}

std::vector<int64_t> SliceWidths(int64_t n, int size, int64_t unit) {
  std::vector<int64_t> w;
  for (int k = 0; k < size; ++k) w.push_back(SliceOf(n, size, k).count * unit);
  return w;
}

void ColumnGather::SetCols(std::vector<int64_t> cols, int rank) {
  cols_ = std::move(cols);
  counts_.assign(cols_.size(), 0);
  total_ = 0;
  for (const int64_t c : cols_) total_ += c;
  rank_ = rank;
}

Status ColumnGather::Run(TpComm& comm, const float* mine, int64_t n, float* out) {
  for (size_t k = 0; k < cols_.size(); ++k) counts_[k] = n * cols_[k];
  const auto own = static_cast<size_t>(counts_[static_cast<size_t>(rank_)]);
  SHOAL_RETURN_IF_ERROR(comm.AllGather({mine, own}, counts_, &buf_));
  // buf_ holds [member][n][cols[member]]; out wants [n][member's columns, side by side].
  const float* src = buf_.data();
  int64_t col0 = 0;
  for (const int64_t c : cols_) {
    for (int64_t r = 0; r < n; ++r)
      std::copy(src + r * c, src + (r + 1) * c, out + r * total_ + col0);
    src += n * c;
    col0 += c;
  }
  return Status::Ok();
}

}  // namespace shoal
