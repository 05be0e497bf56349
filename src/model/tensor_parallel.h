// Tensor parallelism inside a layer, exact mode: each member of a group computes whole output
// elements of a slice of every matrix (rows of Q/K/V by heads, of the output and down
// projections by embedding columns, of gate/up by FFN columns, of the head by vocabulary) and the
// members all-gather the slices. No dot product is split, so every member ends each layer with
// the bits a single process computes. MoE layers place whole experts on members instead (expert
// parallel) and gather the experts' outputs before the weighted sum in top-k order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/even_split.h"
#include "base/status.h"
#include "kernels/matmul.h"

namespace shoal {

// This process's place in its group: member `rank` of `size` (size 1: no split). `fast`: the
// output and down projections are split by input columns instead and their partial sums added
// over the members in member order (AllReduceSum): 2 collectives per layer instead of 4, the
// same bits run after run and on every member, not those of one process.
struct TpShard {
  int rank = 0;
  int size = 1;
  bool fast = false;
};

// The group's all-gather, implemented over the cluster's links (collective/tp_comm.h).
class TpComm {
 public:
  virtual ~TpComm() = default;
  // out = every member's `mine` concatenated in member order; counts[k]: member k's length.
  virtual Status AllGather(std::span<const float> mine, std::span<const int64_t> counts,
                           std::vector<float>* out) = 0;
};

// What a member's collectives cost so far: calls, wall time inside them (the wait for the
// slowest member included), and bytes received from the other members.
struct TpStats {
  int64_t calls = 0;
  int64_t ns = 0;
  int64_t bytes_in = 0;
};

// A communicator that counts what passes through it (cluster view: collective time and bytes
// per token).
class MeteredComm final : public TpComm {
 public:
  void Set(TpComm* inner) { inner_ = inner; }
  TpComm* inner() const { return inner_; }
  const TpStats& stats() const { return stats_; }
  Status AllGather(std::span<const float> mine, std::span<const int64_t> counts,
                   std::vector<float>* out) override;

 private:
  TpComm* inner_ = nullptr;
  TpStats stats_;
};

// Rows [s.first, s.end()) of a row-major matrix (no copy; an empty slice has rows == 0).
kernels::MatrixView RowSlice(const kernels::MatrixView& m, Slice s);
// Columns [s.first, s.end()) of every row, copied into *storage (the view points there); an error
// unless both ends fall on the type's block boundaries.
Result<kernels::MatrixView> ColumnSlice(const kernels::MatrixView& m, Slice s,
                                        std::vector<uint8_t>* storage);
// SliceOf(n, size, k) in whole units of `unit` elements (n a multiple of unit): the column
// slices of a quantized matrix.
Slice UnitSliceOf(int64_t n, int size, int k, int64_t unit);

// out[i] = the sum over members of their mine[i], added in member order 0, 1, ... (every member
// sends its whole vector to every other: one round trip). out may alias mine.
Status AllReduceSum(TpComm& comm, int size, const float* mine, int64_t count, float* out,
                    std::vector<float>* buf);

// The column widths of a [n, total] tensor cut into the group's slices, and the gather that
// puts every member's [n, cols[k]] block back side by side into out [n, sum(cols)].
class ColumnGather {
 public:
  // cols[k]: member k's columns; this process is member `rank`.
  void SetCols(std::vector<int64_t> cols, int rank);
  const std::vector<int64_t>& cols() const { return cols_; }
  int64_t total() const { return total_; }  // the sum of cols
  Status Run(TpComm& comm, const float* mine, int64_t n, float* out);

 private:
  std::vector<int64_t> cols_, counts_;
  int64_t total_ = 0;
  int rank_ = 0;
  std::vector<float> buf_;
};

// cols[k] = SliceOf(n, size, k).count * unit for every member k.
std::vector<int64_t> SliceWidths(int64_t n, int size, int64_t unit = 1);

}  // namespace shoal
