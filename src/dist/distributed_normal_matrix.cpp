// Which implementation holds a distributed normal matrix: ScaLAPACK on CPU ranks (MPI), the
// cuSOLVERMp module on GPU ranks (NCCL).  Each is compiled only where its library was found.
#include "lmtrain/dist/distributed_normal_matrix.h"

#include <fmt/format.h>

#include <algorithm>

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
