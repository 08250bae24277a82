// The steps every distributed normal matrix takes, around the library calls of its backend, and
// which implementation holds one: ScaLAPACK on CPU ranks (MPI), the cuSOLVERMp module on GPU ranks
// (NCCL).  Each is compiled only where its library was found.
#include "lmtrain/dist/distributed_normal_matrix.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lmtrain/core/error.h"

namespace lmtrain::dist {

#ifdef LMTRAIN_HAVE_SCALAPACK
template <typename T>
std::unique_ptr<DistributedNormalMatrix<T>> make_scalapack_normal_matrix(Communicator& comm,
                                                                         LinearAlgebra<T>& backend,
                                                                         std::size_t n,
                                                                         std::size_t nb);
#endif
#ifdef LMTRAIN_HAVE_CUSOLVERMP
template <typename T>
std::unique_ptr<DistributedNormalMatrix<T>> make_cusolvermp_normal_matrix(Communicator& comm,
                                                                          LinearAlgebra<T>& backend,
                                                                          std::size_t n,
                                                                          std::size_t nb);
std::optional<std::string> cusolvermp_unavailable();
#endif

template <typename T>
std::size_t DistributedNormalMatrix<T>::begin(std::size_t local_passes) {
  backend_.fill(a_.data(), layout_.local_elements(), T(0));
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_.size()));
  const std::uint64_t mine = local_passes;
  comm_.allgather(&mine, sizeof mine, all.data());
  return static_cast<std::size_t>(*std::max_element(all.begin(), all.end()));
}

template <typename T>
void DistributedNormalMatrix<T>::accumulate(const T* j, std::size_t m, std::size_t ld) {
  const std::size_t n = layout_.n, width = layout_.nb * panel_columns_;
  for (std::size_t c0 = 0; c0 < n; c0 += width) {
    const std::size_t c1 = std::min(n, c0 + width), w = c1 - c0;
    // Panel P (w × c1, row-major) = J[:, c0:c1]ᵀ·J[:, 0:c1]: row jj of P is column c0 + jj of
    // A's upper part, its rows 0 … c1 − 1 contiguous.
    if (m > 0)
      backend_.gemm(Trans::kYes, Trans::kNo, w, c1, m, T(1), j + c0, ld, j, ld, T(0), panel_.data(),
                    c1);
    else
      backend_.fill(panel_.data(), w * c1, T(0));
    unpack(c0, c1, reduce_scatter_panel(c0, c1));
  }
}

template <typename T>
void DistributedNormalMatrix<T>::diagonal(T* out) {
  backend_.fill(vector_.data(), layout_.n, T(0));
  for (std::size_t i = 0; i < layout_.n; ++i)
    if (owns(i, i)) backend_.copy(a_.data() + local_index(i, i), vector_.data() + i, 1);
  sum_vector();
  backend_.copy(vector_.data(), out, layout_.n);
}

template <typename T>
int DistributedNormalMatrix<T>::factor(double lambda, const T* d, double shift) {
  backend_.copy(a_.data(), factor_.data(), layout_.local_elements());
  shift_diagonal(lambda, d, shift);
  const int info = potrf();
  // The ranks agree on the worst info any of them got (ScaLAPACK returns it on every process all
  // the same), so that no rank can go on to a solve the others skip.
  std::vector<int> all(static_cast<std::size_t>(comm_.size()));
  comm_.allgather(&info, sizeof info, all.data());
  if (std::any_of(all.begin(), all.end(), [](int i) { return i < 0; }))
    throw Error(fmt::format("{} rejected argument {} on some rank", potrf_name(),
                            -*std::min_element(all.begin(), all.end())));
  return *std::max_element(all.begin(), all.end());
}

template <typename T>
void DistributedNormalMatrix<T>::solve(const T* rhs, T* x) {
  // b lives in process column 0: its local rows are the rank's rows of A.
  if (layout_.grid.col == 0) copy_rows(rhs, rhs_.data(), /*to_local=*/true);
  potrs();
  backend_.fill(vector_.data(), layout_.n, T(0));
  if (layout_.grid.col == 0) copy_rows(rhs_.data(), vector_.data(), /*to_local=*/false);
  sum_vector();  // one owner per entry: the sum is exact on every rank
  backend_.copy(vector_.data(), x, layout_.n);
}

template <typename T>
void DistributedNormalMatrix<T>::unpack(std::size_t c0, std::size_t c1, const T* part) {
  const std::size_t j0 = owned_block_column(c0, c1, layout_.grid.col);
  const std::size_t rows =
      BlockCyclicLayout::local_count(c1, layout_.nb, layout_.grid.row, layout_.grid.rows);
  for (std::size_t col = j0; col < std::min(c1, j0 + layout_.nb); ++col, part += rows)
    if (rows > 0)
      backend_.axpy(rows, T(1), part, a_.data() + layout_.local_col(col) * layout_.local_ld());
}

// The rank's rows of an n-vector ↔ its local rows (b's share).
template <typename T>
void DistributedNormalMatrix<T>::copy_rows(const T* from, T* to, bool to_local) {
  const std::size_t stride = layout_.nb * static_cast<std::size_t>(layout_.grid.rows);
  std::size_t local = 0;
  for (std::size_t i0 = static_cast<std::size_t>(layout_.grid.row) * layout_.nb; i0 < layout_.n;
       i0 += stride) {
    const std::size_t count = std::min(layout_.nb, layout_.n - i0);
    if (to_local)
      backend_.copy(from + i0, to + local, count);
    else
      backend_.copy(from + local, to + i0, count);
    local += count;
  }
}

template <typename T>
std::size_t DistributedNormalMatrix<T>::elements(const BlockCyclicLayout& layout,
                                                 DeviceKind device) {
  const std::size_t share = layout.largest_share();
  const std::size_t rows = BlockCyclicLayout::local_count(layout.n, layout.nb, 0, layout.grid.rows);
  const std::size_t width = std::min(layout.n, layout.nb * panel_block_columns(layout, device));
  // A and its factor; the panel and its packed copy; the received part; b's share; an n-vector.
  return 2 * share + 2 * width * layout.n + std::max<std::size_t>(layout.nb * rows, 1) +
         std::max<std::size_t>(rows, 1) + layout.n;
}

bool distributed_normal_matrix_built(DeviceKind device) noexcept {
#if defined(LMTRAIN_HAVE_SCALAPACK)
  if (device == DeviceKind::kCpu) return true;
#endif
#if defined(LMTRAIN_HAVE_CUSOLVERMP)
  if (device == DeviceKind::kCuda) return true;
#endif
  (void)device;
  return false;
}

std::optional<std::string> distributed_normal_matrix_unavailable(const Communicator* comm,
                                                                 DeviceKind device) {
  if (device == DeviceKind::kCuda) {
#ifdef LMTRAIN_HAVE_CUSOLVERMP
    if (comm == nullptr || comm->nccl_comm() == nullptr)
      return std::string(
          "GPU ranks factor a distributed A with cuSOLVERMp over NCCL, and these ranks have no "
          "NCCL communicator");
    return cusolvermp_unavailable();
#else
    return std::string(
        "lmtrain was built without cuSOLVERMp (the nvidia-cusolvermp-cu13 and "
        "nvidia-cublasmp-cu13 wheels: scripts/install-cusolvermp.sh), so GPU ranks cannot factor "
        "a distributed A");
#endif
  }
#ifdef LMTRAIN_HAVE_SCALAPACK
  if (comm == nullptr || comm->mpi_comm() == nullptr)
    return std::string(
        "CPU ranks factor a distributed A with ScaLAPACK over MPI, and this process has no MPI "
        "communicator (start it with mpirun or srun)");
  return std::nullopt;
#else
  (void)comm;
  return std::string(
      "lmtrain was built without ScaLAPACK (install libscalapack-openmpi-dev: "
      "scripts/install-deps.sh), so CPU ranks cannot factor a distributed A");
#endif
}

template <typename T>
std::unique_ptr<DistributedNormalMatrix<T>> make_distributed_normal_matrix(
    Communicator& comm, LinearAlgebra<T>& backend, std::size_t n, std::size_t nb) {
  if (const auto why = distributed_normal_matrix_unavailable(&comm, backend.device_kind()))
    throw Error("SolverOptions::linear_solver = distributed_cholesky: " + *why);
  nb = BlockCyclicLayout::block_size(nb, n, ProcessGrid::for_ranks(comm.size(), comm.rank()));
#ifdef LMTRAIN_HAVE_CUSOLVERMP
  if (backend.device_kind() == DeviceKind::kCuda)
    return make_cusolvermp_normal_matrix<T>(comm, backend, n, nb);
#endif
#ifdef LMTRAIN_HAVE_SCALAPACK
  return make_scalapack_normal_matrix<T>(comm, backend, n, nb);
#else
  (void)n;
  throw Error("unreachable: no distributed normal matrix in this build");
#endif
}

template class DistributedNormalMatrix<float>;
template class DistributedNormalMatrix<double>;
template std::unique_ptr<DistributedNormalMatrix<float>> make_distributed_normal_matrix(
    Communicator&, LinearAlgebra<float>&, std::size_t, std::size_t);
template std::unique_ptr<DistributedNormalMatrix<double>> make_distributed_normal_matrix(
    Communicator&, LinearAlgebra<double>&, std::size_t, std::size_t);

}  // namespace lmtrain::dist
