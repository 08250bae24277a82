// The distributed normal matrix of GPU ranks (NCCL), as a module lmtrain loads when a GPU rank
// first asks for distributed_cholesky (dist/cusolvermp_module.cpp says why it is not linked):
//   * assembly as on CPU ranks (scalapack_normal_matrix.cpp): per panel of Pc block columns a
//     cuBLAS GEMM of the rank's rows, the panel packed by rank (cudaMemcpy2DAsync) and summed to
//     the owners by ncclReduceScatter (segments padded to the largest: NCCL wants equal counts);
//   * the factorization and the solves with cuSOLVERMp (cusolverMpPotrf/Potrs on the same 2-D
//     block-cyclic descriptors as ScaLAPACK; cuSOLVERMp runs its panels and updates through
//     cuBLASMp over the same NCCL communicator).
// Everything runs on the backend's stream; the host waits only for potrf's info.  Compiled and
// linked against NVIDIA's nvidia-cusolvermp-cu13 / nvidia-cublasmp-cu13 wheels; NOT yet run on a
// GPU (no GPU was available when it was written).
#include <cuda_runtime_api.h>
#include <cusolverMp.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "lmtrain/core/error.h"
#include "lmtrain/dist/distributed_normal_matrix.h"

namespace lmtrain::dist {
namespace {

void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw Error(fmt::format("{} failed: {}", call, cudaGetErrorString(e)));
}
void check_solver(cusolverStatus_t s, const char* call) {
  if (s != CUSOLVER_STATUS_SUCCESS)
    throw Error(fmt::format("{} failed (status {})", call, static_cast<int>(s)));
}
void check_nccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) throw Error(fmt::format("{} failed: {}", call, ncclGetErrorString(r)));
}

template <typename T>
constexpr cudaDataType_t kType = sizeof(T) == 8 ? CUDA_R_64F : CUDA_R_32F;
template <typename T>
constexpr ncclDataType_t kNcclType = sizeof(T) == 8 ? ncclFloat64 : ncclFloat32;

template <typename T>
class CusolverMpNormalMatrix final : public DistributedNormalMatrix<T> {
 public:
  CusolverMpNormalMatrix(Communicator& comm, LinearAlgebra<T>& backend, std::size_t n,
                         std::size_t nb)
      : DistributedNormalMatrix<T>(comm, backend, n, nb),
        nccl_(static_cast<ncclComm_t>(comm.nccl_comm())),
        stream_(static_cast<cudaStream_t>(backend.native_stream())) {
    const BlockCyclicLayout& l = this->layout_;
    const auto n64 = static_cast<std::int64_t>(n), nb64 = static_cast<std::int64_t>(nb);
    const auto lld = static_cast<std::int64_t>(l.local_ld());
    check_solver(cusolverMpCreate(&handle_, backend.device_index(), stream_), "cusolverMpCreate");
    check_solver(cusolverMpCreateDeviceGrid(handle_, &grid_, nccl_, l.grid.rows, l.grid.cols,
                                            CUSOLVERMP_GRID_MAPPING_ROW_MAJOR),
                 "cusolverMpCreateDeviceGrid");
    check_solver(
        cusolverMpCreateMatrixDesc(&desc_a_, grid_, kType<T>, n64, n64, nb64, nb64, 0, 0, lld),
        "cusolverMpCreateMatrixDesc");
    check_solver(
        cusolverMpCreateMatrixDesc(&desc_b_, grid_, kType<T>, n64, 1, nb64, nb64, 0, 0, lld),
        "cusolverMpCreateMatrixDesc");
    // One segment per rank, each as long as the longest (ncclReduceScatter's equal counts).
    segment_ = std::max<std::size_t>(nb * BlockCyclicLayout::local_count(n, nb, 0, l.grid.rows), 1);
    send_ = backend.allocate(segment_ * static_cast<std::size_t>(comm.size()));
    recv_ = backend.allocate(segment_);
    info_ = backend.allocate(1);  // an int's room (T is at least as wide)
    std::size_t device = 0, host = 0, d2 = 0, h2 = 0;
    check_solver(
        cusolverMpPotrf_bufferSize(handle_, CUBLAS_FILL_MODE_UPPER, n64, this->factor_.data(), 1, 1,
                                   desc_a_, kType<T>, &device, &host),
        "cusolverMpPotrf_bufferSize");
    check_solver(cusolverMpPotrs_bufferSize(handle_, CUBLAS_FILL_MODE_UPPER, n64, 1,
                                            this->factor_.data(), 1, 1, desc_a_, this->rhs_.data(),
                                            1, 1, desc_b_, kType<T>, &d2, &h2),
                 "cusolverMpPotrs_bufferSize");
    device = std::max(device, d2);
    work_bytes_ = std::max<std::size_t>(device, sizeof(T));
    work_ = backend.allocate((work_bytes_ + sizeof(T) - 1) / sizeof(T));
    host_work_.resize(std::max(host, h2));
  }
  ~CusolverMpNormalMatrix() override {
    cudaStreamSynchronize(stream_);
    cusolverMpDestroyMatrixDesc(desc_b_);
    cusolverMpDestroyMatrixDesc(desc_a_);
    cusolverMpDestroyGrid(grid_);
    cusolverMpDestroy(handle_);
  }

  std::string describe() const override {
    const BlockCyclicLayout& l = this->layout_;
    return fmt::format("cuSOLVERMp potrf/potrs over NCCL on a {} process grid, {}×{} blocks",
                       l.grid.describe(), l.nb, l.nb);
  }

 private:
  const T* reduce_scatter_panel(std::size_t c0, std::size_t c1) override {
    pack(c0, c1);
    check_nccl(ncclReduceScatter(send_.data(), recv_.data(), segment_, kNcclType<T>, ncclSum, nccl_,
                                 stream_),
               "ncclReduceScatter");
    return recv_.data();
  }
  void sum_vector() override {
    this->comm_.allreduce_sum_device(this->vector_.data(), this->layout_.n, stream_);
  }
  // d lives on the device: the shift is added there, λ·d_i and shift in T one after the other.
  void shift_diagonal(double lambda, const T* d, double shift) override {
    for (std::size_t i = 0; i < this->layout_.n; ++i) {
      if (!this->owns(i, i)) continue;
      T* entry = this->factor_.data() + this->local_index(i, i);
      this->backend_.add_diagonal(1, entry, static_cast<T>(lambda), d != nullptr ? d + i : nullptr);
      if (shift != 0) this->backend_.add_diagonal(1, entry, static_cast<T>(shift), nullptr);
    }
  }
  int potrf() override {
    int* info = reinterpret_cast<int*>(info_.data());
    check_solver(
        cusolverMpPotrf(handle_, CUBLAS_FILL_MODE_UPPER, static_cast<std::int64_t>(this->layout_.n),
                        this->factor_.data(), 1, 1, desc_a_, kType<T>, work_.data(), work_bytes_,
                        host_work_.data(), host_work_.size(), info),
        "cusolverMpPotrf");
    int result = 0;
    check_cuda(cudaMemcpyAsync(&result, info, sizeof result, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    return result;
  }
  const char* potrf_name() const override { return "cusolverMpPotrf"; }
  void potrs() override {
    check_solver(
        cusolverMpPotrs(handle_, CUBLAS_FILL_MODE_UPPER, static_cast<std::int64_t>(this->layout_.n),
                        1, this->factor_.data(), 1, 1, desc_a_, this->rhs_.data(), 1, 1, desc_b_,
                        kType<T>, work_.data(), work_bytes_, host_work_.data(), host_work_.size(),
                        reinterpret_cast<int*>(info_.data())),
        "cusolverMpPotrs");
  }

  // Rank (pr, pc)'s part of the panel — its block column's rows of process row pr below c1 — at
  // segment rank·segment_ of the send buffer, column by column (strided chunks of nb rows).
  void pack(std::size_t c0, std::size_t c1) {
    const BlockCyclicLayout& l = this->layout_;
    const auto stride = l.nb * static_cast<std::size_t>(l.grid.rows);
    for (int pr = 0; pr < l.grid.rows; ++pr)
      for (int pc = 0; pc < l.grid.cols; ++pc) {
        T* out = send_.data() + static_cast<std::size_t>(l.grid.rank_of(pr, pc)) * segment_;
        const std::size_t j0 = c0 + static_cast<std::size_t>(pc) * l.nb;
        const std::size_t first_row = static_cast<std::size_t>(pr) * l.nb;
        const std::size_t rows = BlockCyclicLayout::local_count(c1, l.nb, pr, l.grid.rows);
        const std::size_t whole = rows / l.nb, tail = rows % l.nb;
        for (std::size_t col = j0; col < std::min(c1, j0 + l.nb); ++col) {
          const T* column = this->panel_.data() + (col - c0) * c1;
          if (whole > 0)
            check_cuda(
                cudaMemcpy2DAsync(out, l.nb * sizeof(T), column + first_row, stride * sizeof(T),
                                  l.nb * sizeof(T), whole, cudaMemcpyDeviceToDevice, stream_),
                "cudaMemcpy2DAsync");
          if (tail > 0)
            this->backend_.copy(column + first_row + whole * stride, out + whole * l.nb, tail);
          out += rows;
        }
      }
  }

  ncclComm_t nccl_;
  cudaStream_t stream_;
  cusolverMpHandle_t handle_ = nullptr;
  cusolverMpGrid_t grid_ = nullptr;
  cusolverMpMatrixDescriptor_t desc_a_ = nullptr, desc_b_ = nullptr;
  std::size_t segment_ = 1, work_bytes_ = 0;
  DeviceBuffer<T> send_, recv_, info_, work_;
  std::vector<char> host_work_;
};

template <typename T>
DistributedNormalMatrix<T>* make(Communicator* comm, LinearAlgebra<T>* backend, std::size_t n,
                                 std::size_t nb, char* error, std::size_t error_size) noexcept {
  try {
    return new CusolverMpNormalMatrix<T>(*comm, *backend, n, nb);
  } catch (const std::exception& e) {
    if (error_size > 0) {
      std::strncpy(error, e.what(), error_size - 1);
      error[error_size - 1] = '\0';
    }
    return nullptr;
  }
}

}  // namespace
}  // namespace lmtrain::dist

// The module's entry points (dist/cusolvermp_module.cpp loads them with dlsym): a new matrix,
// owned by the caller, or null with the reason in `error`.
extern "C" {
__attribute__((visibility("default"))) lmtrain::dist::DistributedNormalMatrix<double>*
lmtrain_cusolvermp_normal_matrix_f64(lmtrain::dist::Communicator* comm,
                                     lmtrain::LinearAlgebra<double>* backend, std::size_t n,
                                     std::size_t nb, char* error, std::size_t error_size) {
  return lmtrain::dist::make(comm, backend, n, nb, error, error_size);
}
__attribute__((visibility("default"))) lmtrain::dist::DistributedNormalMatrix<float>*
lmtrain_cusolvermp_normal_matrix_f32(lmtrain::dist::Communicator* comm,
                                     lmtrain::LinearAlgebra<float>* backend, std::size_t n,
                                     std::size_t nb, char* error, std::size_t error_size) {
  return lmtrain::dist::make(comm, backend, n, nb, error, error_size);
}
}
