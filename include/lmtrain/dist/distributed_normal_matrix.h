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
  const BlockCyclicLayout& layout() const { return layout_; }
  // "ScaLAPACK pdpotrf, 2×2 grid, 64×64 blocks".
  virtual std::string describe() const = 0;

  // Starts a new A = 0, to be built in `local_passes` calls of accumulate() on this rank.  Returns
  // the passes every rank must make (the most any rank needs); a rank with fewer hands in no rows
  // for the rest.
  virtual std::size_t begin(std::size_t local_passes) = 0;
  // A += Σ over the ranks of JᵣᵀJᵣ, Jᵣ each rank's m × n rows (row-major, row stride ld ≥ n; m may
  // be 0 and j null).  Only A's upper triangle (i ≤ j) is formed.
  virtual void accumulate(const T* j, std::size_t m, std::size_t ld) = 0;
  // A's diagonal, n values on every rank (device memory of the backend).
  virtual void diagonal(T* out) = 0;
  // UᵀU = A + λ·diag(d) + shift·I (d null: I).  Returns 0, or k > 0 when the leading minor of
  // order k is not positive definite; the same on every rank.
  virtual int factor(double lambda, const T* d, double shift) = 0;
  // x = (UᵀU)⁻¹·rhs with the last factor; rhs holds the same n values on every rank, and so does
  // x afterwards.  x may alias rhs.
  virtual void solve(const T* rhs, T* x) = 0;

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
  explicit DistributedNormalMatrix(const BlockCyclicLayout& layout) : layout_(layout) {}
  BlockCyclicLayout layout_;
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

}  // namespace lmtrain::dist
