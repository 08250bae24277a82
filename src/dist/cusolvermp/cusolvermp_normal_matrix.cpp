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
      : DistributedNormalMatrix<T>(
            BlockCyclicLayout{n, nb, ProcessGrid::for_ranks(comm.size(), comm.rank())}),
        comm_(comm),
        backend_(backend),
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
    const std::size_t width = std::min(n, nb * static_cast<std::size_t>(l.grid.cols));
    a_ = backend.allocate(l.local_elements());
    factor_ = backend.allocate(l.local_elements());
    panel_ = backend.allocate(width * n);
    // One segment per rank, each as long as the longest (ncclReduceScatter's equal counts).
    segment_ = std::max<std::size_t>(nb * BlockCyclicLayout::local_count(n, nb, 0, l.grid.rows), 1);
    send_ = backend.allocate(segment_ * static_cast<std::size_t>(comm.size()));
    recv_ = backend.allocate(segment_);
    rhs_ = backend.allocate(l.local_ld());
    vector_ = backend.allocate(n);
    info_ = backend.allocate(1);  // an int's room (T is at least as wide)
    std::size_t device = 0, host = 0, d2 = 0, h2 = 0;
    check_solver(cusolverMpPotrf_bufferSize(handle_, CUBLAS_FILL_MODE_UPPER, n64, factor_.data(), 1,
                                            1, desc_a_, kType<T>, &device, &host),
                 "cusolverMpPotrf_bufferSize");
    check_solver(
        cusolverMpPotrs_bufferSize(handle_, CUBLAS_FILL_MODE_UPPER, n64, 1, factor_.data(), 1, 1,
                                   desc_a_, rhs_.data(), 1, 1, desc_b_, kType<T>, &d2, &h2),
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
  CusolverMpNormalMatrix(const CusolverMpNormalMatrix&) = delete;
  CusolverMpNormalMatrix& operator=(const CusolverMpNormalMatrix&) = delete;

  std::string describe() const override {
    const BlockCyclicLayout& l = this->layout_;
    return fmt::format("cuSOLVERMp potrf/potrs over NCCL on a {} process grid, {}×{} blocks",
                       l.grid.describe(), l.nb, l.nb);
  }

  std::size_t begin(std::size_t local_passes) override {
    backend_.fill(a_.data(), this->layout_.local_elements(), T(0));
    std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_.size()));
    const std::uint64_t mine = local_passes;
    comm_.allgather(&mine, sizeof mine, all.data());
    return static_cast<std::size_t>(*std::max_element(all.begin(), all.end()));
  }

  void accumulate(const T* j, std::size_t m, std::size_t ld) override {
    const BlockCyclicLayout& l = this->layout_;
    const std::size_t width = l.nb * static_cast<std::size_t>(l.grid.cols);
    for (std::size_t c0 = 0; c0 < l.n; c0 += width) {
      const std::size_t c1 = std::min(l.n, c0 + width), w = c1 - c0;
      if (m > 0)
        backend_.gemm(Trans::kYes, Trans::kNo, w, c1, m, T(1), j + c0, ld, j, ld, T(0),
                      panel_.data(), c1);
      else
        backend_.fill(panel_.data(), w * c1, T(0));
      pack(c0, c1);
      check_nccl(ncclReduceScatter(send_.data(), recv_.data(), segment_, kNcclType<T>, ncclSum,
                                   nccl_, stream_),
                 "ncclReduceScatter");
      unpack(c0, c1);
    }
  }

  void diagonal(T* out) override {
    const BlockCyclicLayout& l = this->layout_;
    backend_.fill(vector_.data(), l.n, T(0));
    for (std::size_t i = 0; i < l.n; ++i)
      if (owns(i, i)) backend_.copy(a_.data() + local_index(i, i), vector_.data() + i, 1);
    comm_.allreduce_sum_device(vector_.data(), l.n, stream_);
    backend_.copy(vector_.data(), out, l.n);
  }

  int factor(double lambda, const T* d, double shift) override {
    const BlockCyclicLayout& l = this->layout_;
    backend_.copy(a_.data(), factor_.data(), l.local_elements());
    for (std::size_t i = 0; i < l.n; ++i) {
      if (!owns(i, i)) continue;
      T* entry = factor_.data() + local_index(i, i);
      backend_.add_diagonal(1, entry, static_cast<T>(lambda), d != nullptr ? d + i : nullptr);
      if (shift != 0) backend_.add_diagonal(1, entry, static_cast<T>(shift), nullptr);
    }
    int* info = reinterpret_cast<int*>(info_.data());
    check_solver(cusolverMpPotrf(handle_, CUBLAS_FILL_MODE_UPPER, static_cast<std::int64_t>(l.n),
                                 factor_.data(), 1, 1, desc_a_, kType<T>, work_.data(), work_bytes_,
                                 host_work_.data(), host_work_.size(), info),
                 "cusolverMpPotrf");
    int result = 0;
    check_cuda(cudaMemcpyAsync(&result, info, sizeof result, cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    std::vector<int> all(static_cast<std::size_t>(comm_.size()));
    comm_.allgather(&result, sizeof result, all.data());
    return *std::max_element(all.begin(), all.end());
  }

  void solve(const T* rhs, T* x) override {
    const BlockCyclicLayout& l = this->layout_;
    if (l.grid.col == 0) gather_rows(rhs, rhs_.data(), /*to_local=*/true);
    check_solver(cusolverMpPotrs(handle_, CUBLAS_FILL_MODE_UPPER, static_cast<std::int64_t>(l.n), 1,
                                 factor_.data(), 1, 1, desc_a_, rhs_.data(), 1, 1, desc_b_,
                                 kType<T>, work_.data(), work_bytes_, host_work_.data(),
                                 host_work_.size(), reinterpret_cast<int*>(info_.data())),
                 "cusolverMpPotrs");
    backend_.fill(vector_.data(), l.n, T(0));
    if (l.grid.col == 0) gather_rows(rhs_.data(), vector_.data(), /*to_local=*/false);
    comm_.allreduce_sum_device(vector_.data(), l.n, stream_);
    backend_.copy(vector_.data(), x, l.n);
  }

 private:
  bool owns(std::size_t i, std::size_t j) const {
    const BlockCyclicLayout& l = this->layout_;
    return l.row_owner(i) == l.grid.row && l.col_owner(j) == l.grid.col;
  }
  std::size_t local_index(std::size_t i, std::size_t j) const {
    const BlockCyclicLayout& l = this->layout_;
    return l.local_row(i) + l.local_col(j) * l.local_ld();
  }
  // The rank's rows of an n-vector ↔ its local rows (column 0 of the grid holds b).
  void gather_rows(const T* from, T* to, bool to_local) {
    const BlockCyclicLayout& l = this->layout_;
    const std::size_t stride = l.nb * static_cast<std::size_t>(l.grid.rows);
    std::size_t local = 0;
    for (std::size_t i0 = static_cast<std::size_t>(l.grid.row) * l.nb; i0 < l.n; i0 += stride) {
      const std::size_t count = std::min(l.nb, l.n - i0);
      if (to_local)
        backend_.copy(from + i0, to + local, count);
      else
        backend_.copy(from + local, to + i0, count);
      local += count;
    }
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
          const T* column = panel_.data() + (col - c0) * c1;
          if (whole > 0)
            check_cuda(
                cudaMemcpy2DAsync(out, l.nb * sizeof(T), column + first_row, stride * sizeof(T),
                                  l.nb * sizeof(T), whole, cudaMemcpyDeviceToDevice, stream_),
                "cudaMemcpy2DAsync");
          if (tail > 0)
            backend_.copy(column + first_row + whole * stride, out + whole * l.nb, tail);
          out += rows;
        }
      }
  }
  void unpack(std::size_t c0, std::size_t c1) {
    const BlockCyclicLayout& l = this->layout_;
    const std::size_t j0 = c0 + static_cast<std::size_t>(l.grid.col) * l.nb;
    const std::size_t rows = BlockCyclicLayout::local_count(c1, l.nb, l.grid.row, l.grid.rows);
    const T* in = recv_.data();
    for (std::size_t col = j0; col < std::min(c1, j0 + l.nb); ++col, in += rows)
      if (rows > 0) backend_.axpy(rows, T(1), in, a_.data() + l.local_col(col) * l.local_ld());
  }

  Communicator& comm_;
  LinearAlgebra<T>& backend_;
  ncclComm_t nccl_;
  cudaStream_t stream_;
  cusolverMpHandle_t handle_ = nullptr;
  cusolverMpGrid_t grid_ = nullptr;
  cusolverMpMatrixDescriptor_t desc_a_ = nullptr, desc_b_ = nullptr;
  std::size_t segment_ = 1, work_bytes_ = 0;
  DeviceBuffer<T> a_, factor_, panel_, send_, recv_, rhs_, vector_, info_, work_;
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
