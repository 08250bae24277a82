// The normal matrix A = Σ_ranks JᵀJ sharded over the ranks (DESIGN.md §6, "beyond one device's
// memory for A"): A lives 2-D block-cyclically on a process grid (block_cyclic.h) and no rank
// ever holds all of it.
//   * accumulate(): each rank hands in its Jacobian rows; the contributions JᵀJ are formed one
//     panel of Pc block columns at a time (a GEMM of the rank's rows against the panel's columns,
//     upper triangle only) and reach the blocks' owners by one reduce-scatter per panel — never
//     an all-reduce of the whole matrix.
//   * factor(): Cholesky of A + λ·diag(d) + shift·I into a second share (ScaLAPACK pdpotrf on CPU
//     ranks, cuSOLVERMp's potrf on GPU ranks), so that a λ retry starts again from the A it kept.
//   * solve(): δ = (UᵀU)⁻¹ rhs with pdpotrs, δ gathered on every rank (one n-vector sum: each
//     entry comes from its one owner, so every rank receives the same bits).
// Every call is collective over the communicator's ranks, in the same order on each.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "lmtrain/backend/linear_algebra.h"
#include "lmtrain/dist/block_cyclic.h"
#include "lmtrain/dist/communicator.h"

namespace lmtrain::dist {

template <typename T>
class DistributedNormalMatrix {
 public:
  virtual ~DistributedNormalMatrix() = default;
  DistributedNormalMatrix(const DistributedNormalMatrix&) = delete;
  DistributedNormalMatrix& operator=(const DistributedNormalMatrix&) = delete;
  const BlockCyclicLayout& layout() const { return layout_; }
  // "ScaLAPACK pdpotrf, 2×2 grid, 64×64 blocks".
  virtual std::string describe() const = 0;

  // Starts a new A = 0, to be built in `local_passes` calls of accumulate() on this rank.  Returns
  // the passes every rank must make (the most any rank needs); a rank with fewer hands in no rows
  // for the rest.
  std::size_t begin(std::size_t local_passes);
  // A += Σ over the ranks of JᵣᵀJᵣ, Jᵣ each rank's m × n rows (row-major, row stride ld ≥ n; m may
  // be 0 and j null).  Only A's upper triangle (i ≤ j) is formed.
  void accumulate(const T* j, std::size_t m, std::size_t ld);
  // A's diagonal, n values on every rank (device memory of the backend).
  void diagonal(T* out);
  // UᵀU = A + λ·diag(d) + shift·I (d null: I).  Returns 0, or k > 0 when the leading minor of
  // order k is not positive definite; the same on every rank.
  int factor(double lambda, const T* d, double shift);
  // x = (UᵀU)⁻¹·rhs with the last factor; rhs holds the same n values on every rank, and so does
  // x afterwards.  x may alias rhs.
  void solve(const T* rhs, T* x);

  // Block columns of A per reduce-scatter panel on `device`'s ranks.  A slice costs n/(nb·k)
  // collectives, and each panel 2·nb·k·n values (the GEMM's panel and its packed copy).  MPI's
  // reduce-scatter takes a count per rank, so CPU ranks narrow the panel below a process row's
  // Pc block columns (the ranks of the columns left out receive nothing) until the two copies
  // fit in a quarter of a rank's share of A, down to one block column: on a wide grid the panels
  // would otherwise outgrow the shares (docs/design.md).  NCCL's takes equal segments, so GPU
  // ranks keep k = Pc, where no rank receives padding.
  static std::size_t panel_block_columns(const BlockCyclicLayout& layout, DeviceKind device);
  // Elements of T a rank of `layout` allocates on `device` (its share of A, the factor's share,
  // the panel buffers, the right-hand side's share and an n-vector), for the memory plan.
  static std::size_t elements(const BlockCyclicLayout& layout, DeviceKind device);
  // The share of A alone on the rank that holds the most.
  static std::size_t share_elements(const BlockCyclicLayout& layout) {
    return layout.largest_share();
  }

 protected:
  // The grid of comm's ranks, and on the backend's device A's share, the factor's share, the
  // GEMM's panel, b's share and an n-vector; each backend adds its reduce-scatter buffers.
  DistributedNormalMatrix(Communicator& comm, LinearAlgebra<T>& backend, std::size_t n,
                          std::size_t nb);

  // What each backend does with its library; every call is collective.
  //
  // Sums panel_ (columns [c0, c1) of A's upper part: w × c1, row-major) over the ranks and
  // returns where this rank's part of the sum is: the panel's block column it owns (if any),
  // each column's rows of its process row below c1, in local order.
  virtual const T* reduce_scatter_panel(std::size_t c0, std::size_t c1) = 0;
  // vector_'s n values summed over the ranks, on every rank.
  virtual void sum_vector() = 0;
  // factor_ += λ·diag(d) + shift·I on the diagonal entries this rank holds (d null: I).
  virtual void shift_diagonal(double lambda, const T* d, double shift) = 0;
  // UᵀU = factor_, in place; returns this rank's info (LAPACK's convention).
  virtual int potrf() = 0;
  // The routine potrf() calls, for the message when it rejects an argument.
  virtual const char* potrf_name() const = 0;
  // rhs_ (b's share in process column 0) = (UᵀU)⁻¹·rhs_ with factor_.
  virtual void potrs() = 0;

  bool owns(std::size_t i, std::size_t j) const {
    return layout_.row_owner(i) == layout_.grid.row && layout_.col_owner(j) == layout_.grid.col;
  }
  std::size_t local_index(std::size_t i, std::size_t j) const {
    return layout_.local_row(i) + layout_.local_col(j) * layout_.local_ld();
  }
  // The first column of the panel's block column [c0, c1) that process column pc owns, or c1
  // when it owns none there: a panel spans at most Pc block columns, each of another owner.
  std::size_t owned_block_column(std::size_t c0, std::size_t c1, int pc) const {
    for (std::size_t j0 = c0; j0 < c1; j0 += layout_.nb)
      if (layout_.col_owner(j0) == pc) return j0;
    return c1;
  }

  BlockCyclicLayout layout_;
  Communicator& comm_;
  LinearAlgebra<T>& backend_;
  std::size_t panel_columns_;  // block columns per reduce-scatter (panel_block_columns)
  DeviceBuffer<T> a_, factor_, panel_, rhs_, vector_;

 private:
  void unpack(std::size_t c0, std::size_t c1, const T* part);
  void copy_rows(const T* from, T* to, bool to_local);
};

// Why the ranks of `comm` cannot hold a distributed A on a `device` backend, or nothing when they
// can: CPU ranks need lmtrain's MPI communicator and ScaLAPACK; GPU ranks need NCCL and the
// cuSOLVERMp module.
std::optional<std::string> distributed_normal_matrix_unavailable(const Communicator* comm,
                                                                 DeviceKind device);
// Whether this build could factor a distributed A on `device` at all (for plans made before any
// communicator exists: lmtrain info --plan).
bool distributed_normal_matrix_built(DeviceKind device) noexcept;

// A distributed A of n × n in nb × nb blocks on the process grid of comm's ranks, on the
// backend's device.  Throws lmtrain::Error with distributed_normal_matrix_unavailable's reason.
template <typename T>
std::unique_ptr<DistributedNormalMatrix<T>> make_distributed_normal_matrix(
    Communicator& comm, LinearAlgebra<T>& backend, std::size_t n, std::size_t nb);

// The constructor, and panel_block_columns that it calls, are defined here and not in
// distributed_normal_matrix.cpp: the cuSOLVERMp module compiles them into its matrices, because it
// is loaded into processes that link lmtrain statically and cannot take them from liblmtrain
// (dist/cusolvermp_module.cpp).
template <typename T>
std::size_t DistributedNormalMatrix<T>::panel_block_columns(const BlockCyclicLayout& layout,
                                                            DeviceKind device) {
  const auto columns = static_cast<std::size_t>(layout.grid.cols);
  if (device == DeviceKind::kCuda) return columns;
  // 2·nb·k·n ≤ share / 4.
  const std::size_t fit =
      layout.largest_share() / (8 * layout.nb * std::max<std::size_t>(layout.n, 1));
  return std::clamp<std::size_t>(fit, 1, columns);
}

template <typename T>
DistributedNormalMatrix<T>::DistributedNormalMatrix(Communicator& comm, LinearAlgebra<T>& backend,
                                                    std::size_t n, std::size_t nb)
    : layout_{n, nb, ProcessGrid::for_ranks(comm.size(), comm.rank())},
      comm_(comm),
      backend_(backend),
      panel_columns_(panel_block_columns(layout_, backend.device_kind())) {
  a_ = backend.allocate(layout_.local_elements());
  factor_ = backend.allocate(layout_.local_elements());
  panel_ = backend.allocate(std::min(n, nb * panel_columns_) * n);
  rhs_ = backend.allocate(layout_.local_ld());
  vector_ = backend.allocate(n);
}

}  // namespace lmtrain::dist
