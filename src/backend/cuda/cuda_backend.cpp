// CUDA backend: cuBLAS (64-bit API) for GEMM/GEMV/SYRK, cuSOLVER's 64-bit generic API
// (cusolverDnXpotrf/Xpotrs/Xsyevd; potri through Xpotrs) for the factorizations, lmtrain's kernels
// (kernels.h, std::size_t sizes and grid-stride loops) for the rest: no size reaches a library or
// a kernel as a 32-bit int.  Everything is queued on the backend's one stream; the host waits only
// where a scalar comes back (reductions, factorization status) or data is copied to the host.
//
// Row-major ↔ column-major: the memory of a row-major m × n matrix with leading dimension ld is
// the column-major n × m matrix (its transpose) with the same ld.  So row-major C = op(A) op(B)
// is column-major Cᵀ = op(B)ᵀ op(A)ᵀ — the operands swap, the transpose flags do not — and the
// row-major upper triangle of a symmetric matrix is the column-major lower triangle
// (CUBLAS_FILL_MODE_LOWER below), exactly as the CPU backend tells LAPACKE.
#include "lmtrain/backend/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "batched_gemm.h"
#include "conv_kernels.h"
#include "cuda_check.h"
#include "device_memory.h"
#include "kernels.h"
#include "lmtrain/backend/backend.h"
#include "lmtrain/backend/syrk_choice.h"
#include "lmtrain/core/error.h"
#include "phase_clock.h"

namespace lmtrain {
namespace cuda {
namespace {

// ---- RAII owners of the stream and the library handles ------------------------------------------
// Destruction failures are ignored: they only happen when the context is already gone (process
// exit), and a destructor cannot report them.
struct StreamDeleter {
  bool owned = true;  // false: the caller's stream (make_cuda_backend_on_stream), never destroyed
  void operator()(cudaStream_t s) const noexcept {
    if (owned) (void)cudaStreamDestroy(s);
  }
};
struct CublasDeleter {
  void operator()(cublasHandle_t h) const noexcept { (void)cublasDestroy(h); }
};
struct CusolverDeleter {
  void operator()(cusolverDnHandle_t h) const noexcept { (void)cusolverDnDestroy(h); }
};
struct CusolverParamsDeleter {
  void operator()(cusolverDnParams_t p) const noexcept { (void)cusolverDnDestroyParams(p); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const noexcept { (void)cudaEventDestroy(e); }
};
struct GraphDeleter {
  void operator()(cudaGraph_t g) const noexcept { (void)cudaGraphDestroy(g); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t g) const noexcept { (void)cudaGraphExecDestroy(g); }
};
struct PinnedDeleter {
  void operator()(void* p) const noexcept { (void)cudaFreeHost(p); }
};
using StreamHandle = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using EventHandle = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using PinnedHandle = std::unique_ptr<void, PinnedDeleter>;
using GraphHandle = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;
using GraphExecHandle = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;

// A stream's captured work (DeviceQueue::record), instantiated once, launched on that stream.
// `generation` counts the backend's moves of its own workspaces: a recording made before one
// points into freed memory.
class GraphRecording final : public QueueRecording {
 public:
  GraphRecording(GraphHandle graph, GraphExecHandle exec, cudaStream_t stream, int device,
                 const std::uint64_t* generation)
      : graph_(std::move(graph)),
        exec_(std::move(exec)),
        stream_(stream),
        device_(device),
        generation_(generation),
        recorded_(*generation) {}
  void replay() override {
    if (!valid())
      throw Error(
          "a recorded CUDA graph was replayed after its backend's workspace moved; record it "
          "again (QueueRecording::valid)");
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaGraphLaunch(exec_.get(), stream_));
  }
  bool valid() const override { return *generation_ == recorded_; }

 private:
  GraphHandle graph_;
  GraphExecHandle exec_;
  cudaStream_t stream_;
  int device_;
  const std::uint64_t* generation_;
  std::uint64_t recorded_;
};
using CublasHandle = std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, CublasDeleter>;
using CusolverHandle = std::unique_ptr<std::remove_pointer_t<cusolverDnHandle_t>, CusolverDeleter>;
using CusolverParams =
    std::unique_ptr<std::remove_pointer_t<cusolverDnParams_t>, CusolverParamsDeleter>;

// Creates the stream on `device` (made current), which also fixes the device of the handles
// created after it.
StreamHandle make_stream(int device) {
  CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  // Non-blocking: no implicit ordering with the legacy default stream that other libraries in
  // the process may use.
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return StreamHandle(s);
}

// The caller's stream on `device` (made current), borrowed: checked to belong to the device.
// cudaStreamLegacy is the legacy default stream of whatever device is current when work is queued
// (torch's default stream, whose handle torch reports as 0): every call binds `device` first.
StreamHandle borrow_stream(int device, cudaStream_t stream) {
  CUDA_CHECK(cudaSetDevice(device));
  if (stream == cudaStreamLegacy) return StreamHandle(stream, StreamDeleter{false});
  int stream_device = -1;
  CUDA_CHECK(cudaStreamGetDevice(stream, &stream_device));
  if (stream_device != device)
    throw InvalidArgument(fmt::format(
        "the stream handed to the cuda:{} backend belongs to cuda:{}; pass a stream of the "
        "model's device (torch.cuda.current_stream(device))",
        device, stream_device));
  return StreamHandle(stream, StreamDeleter{false});
}

CublasHandle make_cublas(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  CUBLAS_CHECK(cublasCreate(&h));
  CublasHandle handle(h);
  CUBLAS_CHECK(cublasSetStream(h, stream));
  // α and β are host scalars.  Default math: true fp32 (no TF32), the precision the CPU path has.
  CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  return handle;
}

CusolverHandle make_cusolver(cudaStream_t stream) {
  cusolverDnHandle_t h = nullptr;
  CUSOLVER_CHECK(cusolverDnCreate(&h));
  CusolverHandle handle(h);
  CUSOLVER_CHECK(cusolverDnSetStream(h, stream));
  return handle;
}

CusolverParams make_cusolver_params() {
  cusolverDnParams_t p = nullptr;
  CUSOLVER_CHECK(cusolverDnCreateParams(&p));
  return CusolverParams(p);
}

// ---- typed cuBLAS entry points
// -------------------------------------------------------------------
cublasOperation_t op(Trans t) {
  return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
}
std::int64_t i64(std::size_t v) {
  return static_cast<std::int64_t>(v);
}

template <typename T>
constexpr cudaDataType kDataType = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;

cublasStatus_t blas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                         std::int64_t m, std::int64_t n, std::int64_t k, const float* alpha,
                         const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                         const float* beta, float* c, std::int64_t ldc) {
  return cublasSgemm_64(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t blas_gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                         std::int64_t m, std::int64_t n, std::int64_t k, const double* alpha,
                         const double* a, std::int64_t lda, const double* b, std::int64_t ldb,
                         const double* beta, double* c, std::int64_t ldc) {
  return cublasDgemm_64(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
cublasStatus_t blas_gemv(cublasHandle_t h, cublasOperation_t t, std::int64_t m, std::int64_t n,
                         const float* alpha, const float* a, std::int64_t lda, const float* x,
                         const float* beta, float* y) {
  return cublasSgemv_64(h, t, m, n, alpha, a, lda, x, 1, beta, y, 1);
}
cublasStatus_t blas_gemv(cublasHandle_t h, cublasOperation_t t, std::int64_t m, std::int64_t n,
                         const double* alpha, const double* a, std::int64_t lda, const double* x,
                         const double* beta, double* y) {
  return cublasDgemv_64(h, t, m, n, alpha, a, lda, x, 1, beta, y, 1);
}
cublasStatus_t blas_syrk(cublasHandle_t h, cublasOperation_t t, std::int64_t n, std::int64_t k,
                         const float* alpha, const float* a, std::int64_t lda, const float* beta,
                         float* c, std::int64_t ldc) {
  return cublasSsyrk_64(h, CUBLAS_FILL_MODE_LOWER, t, n, k, alpha, a, lda, beta, c, ldc);
}
cublasStatus_t blas_syrk(cublasHandle_t h, cublasOperation_t t, std::int64_t n, std::int64_t k,
                         const double* alpha, const double* a, std::int64_t lda, const double* beta,
                         double* c, std::int64_t ldc) {
  return cublasDsyrk_64(h, CUBLAS_FILL_MODE_LOWER, t, n, k, alpha, a, lda, beta, c, ldc);
}

int multiprocessor_count(int device) {
  int count = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

std::string runtime_versions() {
  int runtime = 0;
  int driver = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  return fmt::format("CUDA runtime {}.{}, driver {}.{}", runtime / 1000, runtime % 1000 / 10,
                     driver / 1000, driver % 1000 / 10);
}

template <typename T>
class CudaBackend final : public Backend<T> {
 public:
  // `stream`: the caller's stream to queue on (borrowed), or nullptr for one of the backend's own.
  CudaBackend(int device, std::size_t memory_limit_bytes, cudaStream_t stream = nullptr)
      : device_(device),
        memory_(device, memory_limit_bytes),
        stream_(stream != nullptr ? borrow_stream(device, stream) : make_stream(device)),
        cublas_(make_cublas(stream_.get())),
        cusolver_(make_cusolver(stream_.get())),
        solver_params_(make_cusolver_params()),
        syrk_choice_(*this, static_cast<std::size_t>(multiprocessor_count(device)), kStrideMultiple,
                     [this](std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj,
                            T beta, T* c) {
                       CUBLAS_CHECK(blas_syrk(cublas(), CUBLAS_OP_N, i64(n), i64(k), &alpha, j,
                                              i64(ldj), &beta, c, i64(n)));
                     }),
        reduction_(memory_, kReductionBlocks + 1),
        norm_partials_(memory_, 3 * kReductionBlocks),
        info_(memory_, 1),
        name_(fmt::format("cuda:{} ({}, {}){}", device, cuda_device_description(device),
                          runtime_versions(),
                          memory_limit_bytes > 0
                              ? fmt::format(", memory limited to {:.1f} MiB",
                                            static_cast<double>(memory_limit_bytes) / (1 << 20))
                              : "")) {}

  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  // Members are released in reverse order with this device current, once the queued work (a copy
  // out of the pinned staging buffer, say) is done: buffers, then the library handles, then the
  // stream.
  ~CudaBackend() override {
    if (cudaSetDevice(device_) != cudaSuccess || cudaStreamSynchronize(stream()) != cudaSuccess)
      (void)cudaGetLastError();
  }

  std::string name() const override { return name_; }
  DeviceKind device_kind() const override { return DeviceKind::kCuda; }
  int device_index() const override { return device_; }
  void* native_stream() override { return stream(); }
  void order_after(void* other_queue) override {
    bind(device_);
    cuda::order_after(stream(), static_cast<cudaStream_t>(other_queue));
  }
  // Stream capture in thread-local mode: an allocation, a free or a host wait on this thread
  // fails the capture (cudaErrorStreamCaptureUnsupported) instead of being recorded, and a
  // CUDA_CHECK or library check that throws inside `work` ends it the same way.  Either way the
  // capture is ended here, its partial graph dropped, and nothing of `work` has run.
  std::unique_ptr<QueueRecording> record(const std::function<void()>& work,
                                         std::string& why) override {
    bind(device_);
    if (why = why_not_recordable(); !why.empty()) return nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
    std::string failed;
    try {
      work();
    } catch (const std::exception& e) {
      failed = e.what();
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream(), &graph);
    GraphHandle owned(graph);
    (void)cudaGetLastError();  // capture errors are not sticky: clear them for later checks
    if (failed.empty() && ended != cudaSuccess)
      failed = fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(ended));
    if (!failed.empty()) {
      why = name() + ": the work could not be captured (" + failed + ")";
      return nullptr;
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    if (instantiated != cudaSuccess) {
      (void)cudaGetLastError();
      why = fmt::format("{}: cudaGraphInstantiate: {}", name(), cudaGetErrorString(instantiated));
      return nullptr;
    }
    return std::make_unique<GraphRecording>(std::move(owned), GraphExecHandle(exec), stream(),
                                            device_, &workspace_generation_);
  }
  std::string why_not_recordable() const override {
    if (stream() == cudaStreamLegacy)
      return name() + ": the legacy default stream cannot be captured (a borrowed torch stream)";
    return {};
  }
  std::unique_ptr<PhaseClock> make_phase_clock() override {
    return cuda::make_event_phase_clock(stream());
  }
  MemoryResource& memory() override { return memory_; }
  std::size_t available_memory_bytes() const override {
    const std::size_t free = device_memory_info(device_).free_bytes;
    const std::size_t limit = memory_.limit_bytes();
    if (limit == 0) return free;
    const std::size_t left = limit > memory_.bytes_in_use() ? limit - memory_.bytes_in_use() : 0;
    return std::min(free, left);
  }
  void synchronize() override {
    bind(device_);
    CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  // A slice as large as the memory plan allows (no preferred size), its rows padded to a multiple
  // of kStrideMultiple elements so that every row starts 16-byte aligned: W2's 769 columns make
  // 3 076-byte float rows, which rules out the tensor-memory loads of cuBLAS's Hopper kernels (a
  // lead from their documented alignment; not measured on a GPU yet).  The stride only: SYRK and
  // split-K read the n columns, and A stays n × n.  Mixed precision widens such a slice to
  // float64 in blocks (at least kMinWideningRows rows, so that each block's SYRK does ≥ 2·1024
  // flops per element of A it reads and writes), their size measured at the first slice
  // (NormalEquationsBuilder::choose_widening) from about 32 MiB, which can stay in the L2 of an
  // H100 or H200 (50 MB) between the widening that writes it and the SYRK that reads it, ×4 up
  // to 1 GiB: on the H200 (2026-11-28) W7's 32 MiB blocks (5 433 rows) ran DSYRK at 18.7
  // TFLOP/s, 26 % of SGEMM, too few rows for split-K to pay, where W7's float32 slice of 100 000
  // rows ran split-K at 25.7; W7's whole slice widened (618 MB) is the 1 GiB candidate, and
  // whole it also serves the geodesic correction's Jᵀu without a second widening.
  SlicePreference slice_preference(std::size_t num_params) const override {
    SlicePreference p;
    p.leading_dimension = (num_params + kStrideMultiple - 1) / kStrideMultiple * kStrideMultiple;
    p.syrk_on_padding = false;
    const std::size_t row_bytes = sizeof(double) * std::max<std::size_t>(p.leading_dimension, 1);
    p.widening_rows_smallest = std::max(kMinWideningRows, kWideningBytes / row_bytes);
    p.widening_rows = std::max(p.widening_rows_smallest, kWideningMaxBytes / row_bytes);
    return p;
  }

  // ---- transfers and fills ------------------------------------------------------------------
  // backend.h's contract: `host` may be reused or freed on return (upload() says how).
  void copy_from_host(const T* host, T* dst, std::size_t n) override {
    if (n == 0) return;
    bind(device_);
    upload(host, dst, n * sizeof(T));
  }
  void write_scalars(const double* host, double* device, std::size_t count) override {
    if (count == 0) return;
    bind(device_);
    upload(host, device, count * sizeof(double));
  }
  // Overlapping ranges are allowed (memmove semantics, as on the CPU): cudaMemcpy's are not, so
  // they go through a temporary.
  void copy(const T* src, T* dst, std::size_t n) override {
    if (n == 0 || src == dst) return;
    bind(device_);
    const std::size_t bytes = n * sizeof(T);
    if (src < dst + n && dst < src + n) {
      DeviceBuffer<T> staging(memory_, n);
      CUDA_CHECK(cudaMemcpyAsync(staging.data(), src, bytes, cudaMemcpyDeviceToDevice, stream()));
      CUDA_CHECK(cudaMemcpyAsync(dst, staging.data(), bytes, cudaMemcpyDeviceToDevice, stream()));
      CUDA_CHECK(cudaStreamSynchronize(stream()));  // before `staging` is freed
      return;
    }
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
  }
  void fill(T* x, std::size_t n, T value) override {
    bind(device_);
    cuda::fill(stream(), x, n, value);
  }
  void convert(std::size_t n, const float* src, T* dst) override {
    bind(device_);
    cuda::convert(stream(), n, src, dst);
  }
  void convert(std::size_t n, const double* src, T* dst) override {
    bind(device_);
    cuda::convert(stream(), n, src, dst);
  }
  void gather_rows(const T* src, std::size_t cols, std::span<const std::int64_t> rows_host,
                   T* dst) override {
    if (rows_host.empty() || cols == 0) return;
    bind(device_);
    // Grow-only; a reallocation frees the old indices with cudaFree, which waits for any kernel
    // still reading them.
    grow(row_indices_, rows_host.size());
    upload(rows_host.data(), row_indices_.data(), rows_host.size() * sizeof(std::int64_t));
    cuda::gather_rows(stream(), src, cols, row_indices_.data(), rows_host.size(), dst);
  }

  // ---- level 1 --------------------------------------------------------------------------------
  void axpy(std::size_t n, T alpha, const T* x, T* y) override {
    bind(device_);
    cuda::axpy(stream(), n, alpha, x, y);
  }
  void add_scaled(std::size_t n, const T* x, T alpha, const T* y, T* z) override {
    bind(device_);
    cuda::add_scaled(stream(), n, x, alpha, y, z);
  }
  void dot_into(std::size_t n, const T* x, const T* y, double* result) override {
    bind(device_);
    cuda::dot(stream(), n, x, y, reduction_.data(), result);
  }
  void axpy_if_ratio_holds(std::size_t n, T alpha, const T* x, T* y, const double* x_norms,
                           const double* y_norms, double lr, double ratio,
                           double* applied) override {
    bind(device_);
    cuda::axpy_if_ratio_holds(stream(), n, alpha, x, y, x_norms, y_norms, lr, ratio, applied);
  }
  void vector_norms(std::size_t n, const T* x, std::size_t stride, double* result) override {
    bind(device_);
    cuda::vector_norms(stream(), n, x, stride, norm_partials_.data(), result);
  }
  void scale_elementwise(std::size_t n, const T* x, const T* s, bool divide, T* y) override {
    bind(device_);
    cuda::scale_elementwise(stream(), n, x, s, divide, y);
  }
  void inverse_sqrt(std::size_t n, const T* x, T* y) override {
    bind(device_);
    cuda::inverse_sqrt(stream(), n, x, y);
  }

  // ---- level 2 / 3 ------------------------------------------------------------------------------
  void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
            std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) override {
    if (m == 0 || n == 0) return;
    bind(device_);
    CUBLAS_CHECK(blas_gemm(cublas(), op(tb), op(ta), i64(n), i64(m), i64(k), &alpha, b, i64(ldb), a,
                           i64(lda), &beta, c, i64(ldc)));
  }
  // Row-major A (m × n) is column-major Aᵀ (n × m): A x is a transposed GEMV on it, Aᵀx a plain
  // one.
  void gemv(Trans ta, std::size_t m, std::size_t n, T alpha, const T* a, std::size_t lda,
            const T* x, T beta, T* y) override {
    if (m == 0 || n == 0) return;
    bind(device_);
    const cublasOperation_t t = ta == Trans::kNo ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(blas_gemv(cublas(), t, i64(n), i64(m), &alpha, a, i64(lda), x, &beta, y));
  }
  // cuBLAS's SYRK or split-K (split_k_syrk.h), whichever ran this shape faster on its first call
  // (syrk_choice.h).  For SYRK, row-major J (k × n) is column-major M = Jᵀ (n × k), and
  // JᵀJ = M Mᵀ: a non-transposed SYRK.  With TF32 (use_tf32) the handle's math mode allows TF32
  // tensor cores for this call only: the layers' GEMMs and the solve keep float32 arithmetic.
  void syrk_ata(std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj, T beta,
                T* c) override {
    if (n == 0) return;
    bind(device_);
    if (!tf32_) {
      syrk_choice_.syrk_ata(n, k, alpha, j, ldj, beta, c);
      return;
    }
    CUBLAS_CHECK(cublasSetMathMode(cublas(), CUBLAS_TF32_TENSOR_OP_MATH));
    try {
      syrk_choice_.syrk_ata(n, k, alpha, j, ldj, beta, c);
    } catch (...) {
      (void)cublasSetMathMode(cublas(), CUBLAS_DEFAULT_MATH);
      throw;
    }
    CUBLAS_CHECK(cublasSetMathMode(cublas(), CUBLAS_DEFAULT_MATH));
  }
  std::string normal_matrix_report() const override {
    const std::string report = syrk_choice_.report();
    return tf32_ ? "A = JᵀJ on TF32 tensor cores (SolverOptions::tf32)" +
                       (report.empty() ? "" : "\n" + report)
                 : report;
  }
  bool set_normal_matrix_method(NormalMatrixMethod method) override {
    syrk_choice_.set_method(method);
    return true;
  }
  // TF32 for a float A; the shapes' SYRK-or-split-K choices are measured again under it.
  bool use_tf32(bool on) override {
    if constexpr (!std::is_same_v<T, float>) {
      return false;
    } else {
      if (on != tf32_) syrk_choice_.forget();
      tf32_ = on;
      return true;
    }
  }
  // Row-major J (m × n) is column-major M = Jᵀ (n × m), and JJᵀ = MᵀM: a transposed SYRK.
  void syrk_aat(std::size_t m, std::size_t n, T alpha, const T* j, std::size_t ldj, T beta,
                T* c) override {
    if (m == 0) return;
    bind(device_);
    CUBLAS_CHECK(
        blas_syrk(cublas(), CUBLAS_OP_T, i64(m), i64(n), &alpha, j, i64(ldj), &beta, c, i64(m)));
  }
  void reduce_upper(std::size_t n, std::size_t count, const T* partials, std::size_t ldp,
                    std::size_t stride, T beta, T* c) override {
    bind(device_);
    cuda::reduce_upper(stream(), n, count, partials, ldp, stride, beta, c);
  }
  void symmetrize_upper(std::size_t n, T* a) override {
    bind(device_);
    cuda::symmetrize_upper(stream(), n, a);
  }
  void copy_upper(std::size_t n, const T* src, T* dst) override {
    bind(device_);
    cuda::copy_upper(stream(), n, src, dst);
  }

  // ---- factorizations ---------------------------------------------------------------------------
  void potrf_into(std::size_t n, T* a, double* status) override {
    bind(device_);
    if (n == 0) {
      CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(double), stream()));  // 0.0: success
      return;
    }
    factor(n, a);
    cuda::store_status(stream(), info_.data(), status);
  }
  void potrs(std::size_t n, const T* factor, T* b) override {
    if (n == 0) return;
    bind(device_);
    // Xpotrs' info reports only an invalid argument, which its returned status reports too
    // (CUSOLVER_STATUS_INVALID_VALUE): reading it would make every solve wait for the stream.
    CUSOLVER_CHECK(cusolverDnXpotrs(cusolver(), solver_params(), CUBLAS_FILL_MODE_LOWER, i64(n), 1,
                                    kDataType<T>, factor, i64(n), kDataType<T>, b, i64(n),
                                    info_.data()));
  }
  void add_diagonal(std::size_t n, T* a, T lambda, const T* d) override {
    bind(device_);
    cuda::add_diagonal(stream(), n, a, lambda, d);
  }
  void add_diagonal_from(std::size_t n, T* a, const double* lambda, const T* d) override {
    bind(device_);
    cuda::add_diagonal_from(stream(), n, a, lambda, d);
  }
  void scale_symmetric(std::size_t n, T* a, const T* s) override {
    bind(device_);
    cuda::scale_symmetric(stream(), n, a, s);
  }
  void pack_upper(std::size_t n, const T* a, T* packed) override {
    bind(device_);
    cuda::pack_upper(stream(), n, a, packed);
  }
  void unpack_upper(std::size_t n, const T* packed, T* a) override {
    bind(device_);
    cuda::unpack_upper(stream(), n, packed, a);
  }
  void column_sums_of_squares(std::size_t m, std::size_t n, const T* j, std::size_t ldj,
                              T* out) override {
    if (n == 0) return;
    bind(device_);
    const std::size_t chunks = cuda::column_sum_chunks(m, n);
    if (chunks > 1) grow(column_partials_, chunks * n);  // grow-only, ≤ 2¹⁶ doubles
    cuda::column_sums_of_squares(stream(), m, n, j, ldj, column_partials_.data(), out);
  }
  void clamped_diagonal(std::size_t n, const T* a, T lo, T hi, T* d) override {
    bind(device_);
    cuda::clamp_strided(stream(), n, a, n + 1, lo, hi, d);
  }
  void clamp(std::size_t n, const T* x, T lo, T hi, T* y) override {
    bind(device_);
    cuda::clamp_strided(stream(), n, x, 1, lo, hi, y);
  }

  // ---- neural-network kernels -------------------------------------------------------------------
  void add_bias_rows(std::size_t rows, std::size_t cols, const T* bias, T* z) override {
    bind(device_);
    cuda::add_bias_rows(stream(), rows, cols, bias, z);
  }
  void activation_forward(Activation f, std::size_t n, const T* z, T* a) override {
    bind(device_);
    cuda::activation_forward(stream(), f, n, z, a);
  }
  void activation_derivative(Activation f, std::size_t n, const T* z, const T* a, T* d) override {
    bind(device_);
    cuda::activation_derivative(stream(), f, n, z, a, d);
  }
  void scale_row_groups(std::size_t rows, std::size_t cols, std::size_t group, const T* d,
                        T* g) override {
    bind(device_);
    cuda::scale_row_groups(stream(), rows, cols, group, d, g);
  }
  void dense_jacobian(std::size_t rows, std::size_t out, std::size_t in, std::size_t group,
                      const T* g_out, const T* a_in, T* j, std::size_t ldj) override {
    // The kernel's column arithmetic is 32-bit: a layer of 2³² parameters or more (whose A alone
    // would take 2⁶⁴ elements) is refused rather than indexed wrongly.
    if (in >= std::numeric_limits<std::uint32_t>::max() ||
        out > std::numeric_limits<std::uint32_t>::max() / (in + 1))
      throw InvalidArgument(fmt::format(
          "dense layer {} → {}: {} parameters exceed the CUDA Jacobian kernel's 32-bit column "
          "index; use narrower layers",
          in, out, static_cast<double>(out) * static_cast<double>(in + 1)));
    bind(device_);
    cuda::dense_jacobian(stream(), rows, out, in, group, g_out, a_in, j, ldj);
  }

  // ---- convolution and pooling (batched_gemm.cpp, conv_kernels.cu) -----------------------------
  void gemm_strided_batched(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                            T alpha, const T* a, std::size_t lda, std::size_t stride_a, const T* b,
                            std::size_t ldb, std::size_t stride_b, T beta, T* c, std::size_t ldc,
                            std::size_t stride_c, std::size_t count) override {
    bind(device_);
    cuda::gemm_strided_batched(cublas(), ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                               beta, c, ldc, stride_c, count);
  }
  void im2col(const WindowGeometry& g, std::size_t samples, const T* x, T* cols) override {
    bind(device_);
    cuda::im2col(stream(), g, samples, x, cols);
  }
  void col2im(const WindowGeometry& g, std::size_t samples, const T* cols, T* x) override {
    bind(device_);
    cuda::col2im(stream(), g, samples, cols, x);
  }
  void add_channel_bias(std::size_t samples, std::size_t channels, std::size_t spatial,
                        const T* bias, T* z) override {
    bind(device_);
    cuda::add_channel_bias(stream(), samples, channels, spatial, bias, z);
  }
  void channel_sums(std::size_t rows, std::size_t channels, std::size_t spatial, const T* g_out,
                    T* j, std::size_t ldj) override {
    bind(device_);
    cuda::channel_sums(stream(), rows, channels, spatial, g_out, j, ldj);
  }
  void max_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y,
                        T* argmax) override {
    bind(device_);
    cuda::max_pool_forward(stream(), g, samples, x, y, argmax);
  }
  void max_pool_backward(const WindowGeometry& g, std::size_t rows, std::size_t group,
                         const T* argmax, const T* g_out, T* g_in) override {
    bind(device_);
    cuda::max_pool_backward(stream(), g, rows, group, argmax, g_out, g_in);
  }
  void avg_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y) override {
    bind(device_);
    cuda::avg_pool_forward(stream(), g, samples, x, y);
  }
  void avg_pool_backward(const WindowGeometry& g, std::size_t rows, const T* g_out,
                         T* g_in) override {
    bind(device_);
    cuda::avg_pool_backward(stream(), g, rows, g_out, g_in);
  }

  // ---- losses -----------------------------------------------------------------------------------
  void loss_objective_into(const LossParams<T>& loss, std::size_t batch, std::size_t c, const T* z,
                           const T* y, double* objective) override {
    bind(device_);
    cuda::loss_objective(stream(), loss, batch, c, z, y, reduction_.data(), objective);
  }
  void loss_linearize_into(const LossParams<T>& loss, std::size_t batch, std::size_t c, const T* z,
                           const T* y, T* r, T* seeds, double* objective) override {
    bind(device_);
    double* scratch = nullptr;
    if (const std::size_t doubles = cuda::loss_scratch_doubles(loss.kind, batch, c); doubles > 0) {
      grow(loss_scratch_, doubles);  // grow-only
      scratch = loss_scratch_.data();
    }
    cuda::loss_linearize(stream(), loss, batch, c, z, y, r, seeds, scratch, reduction_.data(),
                         objective);
  }

 protected:
  // ---- the counted reads (linear_algebra.h): each waits for the stream -------------------------
  void read_scalars_impl(const double* device, double* host, std::size_t count) override {
    if (count == 0) return;
    bind(device_);
    CUDA_CHECK(
        cudaMemcpyAsync(host, device, count * sizeof(double), cudaMemcpyDeviceToHost, stream()));
    CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  void copy_to_host_impl(const T* src, T* host, std::size_t n) override {
    if (n == 0) return;
    bind(device_);
    CUDA_CHECK(cudaMemcpyAsync(host, src, n * sizeof(T), cudaMemcpyDeviceToHost, stream()));
    CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  double dot_impl(std::size_t n, const T* x, const T* y) override {
    if (n == 0) return 0.0;
    bind(device_);
    dot_into(n, x, y, host_result());
    return reduction_result();
  }
  double max_abs_impl(std::size_t n, const T* x) override {
    if (n == 0) return 0.0;
    bind(device_);
    cuda::max_abs(stream(), n, x, reduction_.data(), host_result());
    return reduction_result();
  }
  bool all_finite_impl(std::size_t n, const T* x) override {
    if (n == 0) return true;
    bind(device_);
    cuda::count_nonfinite(stream(), n, x, reduction_.data(), host_result());
    return reduction_result() == 0.0;
  }
  int potrf_impl(std::size_t n, T* a) override {
    if (n == 0) return 0;
    bind(device_);
    factor(n, a);
    const int info = factorization_info();
    if (info < 0)
      throw BackendError(fmt::format("cusolverDnXpotrf: argument {} invalid (n = {})", -info, n));
    return info;
  }
  // cuSOLVER's potri exists only in the legacy API, whose int lda and lwork make it wrong from
  // n = 46 341 (n² > 2³¹).  So (LLᵀ)⁻¹ is solved for with the 64-bit cusolverDnXpotrs against the
  // identity, a block of columns at a time (kernels.h: identity_columns, store_inverse_columns,
  // finish_inverse): an n × k block instead of a second n × n matrix.  2n³ flops against potri's
  // n³, once per accepted step of ard.
  int potri_impl(std::size_t n, T* a) override {
    if (n == 0) return 0;
    bind(device_);
    // LAPACK's info: the first zero on the factor's diagonal (none after a successful potrf).
    cuda::first_zero_on_diagonal(stream(), n, a, reduction_.data(), host_result());
    if (const double zero = reduction_result(); zero < static_cast<double>(n))
      return static_cast<int>(zero) + 1;
    const std::size_t k = inverse_block_columns(n);
    grow(inverse_block_, n * k);
    grow(inverse_diagonal_, n);
    for (std::size_t j0 = 0; j0 < n; j0 += k) {
      const std::size_t count = std::min(k, n - j0);
      cuda::identity_columns(stream(), n, j0, count, inverse_block_.data());
      CUSOLVER_CHECK(cusolverDnXpotrs(cusolver(), solver_params(), CUBLAS_FILL_MODE_LOWER, i64(n),
                                      i64(count), kDataType<T>, a, i64(n), kDataType<T>,
                                      inverse_block_.data(), i64(n), info_.data()));
      cuda::store_inverse_columns(stream(), n, j0, count, inverse_block_.data(), a,
                                  inverse_diagonal_.data());
    }
    // Xpotrs reports only invalid arguments; one check after the loop (it waits for the stream).
    if (const int info = factorization_info(); info != 0)
      throw BackendError(fmt::format("cusolverDnXpotrs (inverse): info {} (n = {})", info, n));
    cuda::finish_inverse(stream(), n, inverse_diagonal_.data(), a);
    return 0;
  }
  // Column-major eigenvectors (columns) of the lower triangle are, read row-major, the rows of
  // `a` — the layout backend.h promises.
  int syevd_impl(std::size_t n, T* a, T* w) override {
    return eigen_decomposition(CUSOLVER_EIG_MODE_VECTOR, n, a, w);
  }
  int eigenvalues_impl(std::size_t n, T* a, T* w) override {
    return eigen_decomposition(CUSOLVER_EIG_MODE_NOVECTOR, n, a, w);
  }
  double loss_objective_impl(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                             const T* z, const T* y) override {
    if (batch == 0) return 0.0;
    loss_objective_into(loss, batch, c, z, y, host_result());
    return reduction_result();
  }
  double loss_linearize_impl(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                             const T* z, const T* y, T* r, T* seeds) override {
    if (batch == 0) return 0.0;
    loss_linearize_into(loss, batch, c, z, y, r, seeds, host_result());
    return reduction_result();
  }

 private:
  // syevd / eigenvalues: cusolverDnXsyevd with or without the eigenvectors.
  int eigen_decomposition(cusolverEigMode_t mode, std::size_t n, T* a, T* w) {
    if (n == 0) return 0;
    bind(device_);
    std::size_t device_bytes = 0;
    std::size_t host_bytes = 0;
    CUSOLVER_CHECK(cusolverDnXsyevd_bufferSize(
        cusolver(), solver_params(), mode, CUBLAS_FILL_MODE_LOWER, i64(n), kDataType<T>, a, i64(n),
        kDataType<T>, w, kDataType<T>, &device_bytes, &host_bytes));
    reserve_solver_workspace(device_bytes, host_bytes);
    CUSOLVER_CHECK(cusolverDnXsyevd(cusolver(), solver_params(), mode, CUBLAS_FILL_MODE_LOWER,
                                    i64(n), kDataType<T>, a, i64(n), kDataType<T>, w, kDataType<T>,
                                    device_workspace_.data(), device_bytes, host_workspace_.data(),
                                    host_bytes, info_.data()));
    const int info = factorization_info();
    if (info < 0)
      throw BackendError(fmt::format("cusolverDnXsyevd: argument {} invalid (n = {})", -info, n));
    return info;
  }

  // Makes `device` current on the calling thread (cheap when it already is), so that several
  // backends on several devices can be driven from one thread.
  static void bind(int device) { CUDA_CHECK(cudaSetDevice(device)); }

  cudaStream_t stream() const noexcept { return stream_.get(); }
  cublasHandle_t cublas() const noexcept { return cublas_.get(); }
  cusolverDnHandle_t cusolver() const noexcept { return cusolver_.get(); }
  cusolverDnParams_t solver_params() const noexcept { return solver_params_.get(); }

  // Cholesky of `a` in place, its status left in info_.
  void factor(std::size_t n, T* a) {
    std::size_t device_bytes = 0;
    std::size_t host_bytes = 0;
    CUSOLVER_CHECK(cusolverDnXpotrf_bufferSize(cusolver(), solver_params(), CUBLAS_FILL_MODE_LOWER,
                                               i64(n), kDataType<T>, a, i64(n), kDataType<T>,
                                               &device_bytes, &host_bytes));
    reserve_solver_workspace(device_bytes, host_bytes);
    CUSOLVER_CHECK(cusolverDnXpotrf(cusolver(), solver_params(), CUBLAS_FILL_MODE_LOWER, i64(n),
                                    kDataType<T>, a, i64(n), kDataType<T>, device_workspace_.data(),
                                    device_bytes, host_workspace_.data(), host_bytes,
                                    info_.data()));
  }

  // Where a reduction read back at once leaves its result (reduction_result() reads it).
  double* host_result() { return reduction_.data() + kReductionBlocks; }
  // Waits for the queued reduction and copies its one double to the host.
  double reduction_result() {
    double value = 0.0;
    CUDA_CHECK(
        cudaMemcpyAsync(&value, host_result(), sizeof(double), cudaMemcpyDeviceToHost, stream()));
    CUDA_CHECK(cudaStreamSynchronize(stream()));
    return value;
  }

  int factorization_info() {
    int info = 0;
    CUDA_CHECK(cudaMemcpyAsync(&info, info_.data(), sizeof(int), cudaMemcpyDeviceToHost, stream()));
    CUDA_CHECK(cudaStreamSynchronize(stream()));
    return info;
  }

  // Columns of the identity potri solves for at once: 8 MiB worth, at least 256 (so large n
  // still gives the triangular solves some width), at most n.
  static std::size_t inverse_block_columns(std::size_t n) {
    constexpr std::size_t kBlockBytes = std::size_t{8} << 20;
    const std::size_t k = std::max<std::size_t>(kBlockBytes / (n * sizeof(T)), 256);
    return std::min(k, n);
  }

  // Host → device copy of `bytes` at `host`, pageable memory the caller may reuse as soon as this
  // returns.  cudaMemcpyAsync from pageable memory only happens to work (the driver stages it
  // before returning); here that is explicit.  Up to kStagingBytes are copied into this
  // backend's pinned buffer and sent asynchronously, after waiting for the previous upload out of
  // it (its event; normally long done).  Larger uploads — the data sets, A's triangle between
  // ranks — are synchronous: the stream is drained before returning.
  void upload(const void* host, void* device, std::size_t bytes) {
    if (bytes <= kStagingBytes && ensure_staging()) {
      CUDA_CHECK(cudaEventSynchronize(staging_free_.get()));
      std::memcpy(staging_.get(), host, bytes);
      CUDA_CHECK(cudaMemcpyAsync(device, staging_.get(), bytes, cudaMemcpyHostToDevice, stream()));
      CUDA_CHECK(cudaEventRecord(staging_free_.get(), stream()));
      return;
    }
    CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream()));
    CUDA_CHECK(cudaStreamSynchronize(stream()));
  }

  // The pinned staging buffer and its event, made on first use.  False when pinned memory cannot
  // be had (then uploads are synchronous, which is correct, only slower).
  bool ensure_staging() {
    if (staging_) return true;
    if (staging_unavailable_) return false;
    void* p = nullptr;
    if (cudaMallocHost(&p, kStagingBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      staging_unavailable_ = true;
      return false;
    }
    staging_ = PinnedHandle(p);
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    staging_free_ = EventHandle(e);
    return true;
  }

  // Grow-only, so repeated factorizations of the same size (every λ retry) allocate nothing.
  void reserve_solver_workspace(std::size_t device_bytes, std::size_t host_bytes) {
    if (device_bytes > 0) grow(device_workspace_, device_bytes);
    if (host_bytes > host_workspace_.size()) {
      host_workspace_.resize(host_bytes);
      ++workspace_generation_;  // cuSOLVER was handed its address
    }
  }
  // A grow-only buffer of the backend's own to at least `count` elements.  A move invalidates the
  // recordings made before it (GraphRecording): their kernels hold the old address.
  template <typename U>
  void grow(DeviceBuffer<U>& buffer, std::size_t count) {
    const U* before = buffer.data();
    buffer.reserve(memory_, count);
    if (buffer.data() != before) ++workspace_generation_;
  }

  // Split-K's partials are padded to this many elements per row, 16 bytes of float (32 of
  // double), the alignment of strides that Hopper's tensor-memory copies require.
  static constexpr std::size_t kStrideMultiple = 4;
  static constexpr std::size_t kWideningBytes = std::size_t{32} << 20;
  static constexpr std::size_t kWideningMaxBytes = std::size_t{1} << 30;
  static constexpr std::size_t kMinWideningRows = 1024;

  int device_;
  DeviceMemory memory_;
  StreamHandle stream_;
  CublasHandle cublas_;
  CusolverHandle cusolver_;
  CusolverParams solver_params_;
  SyrkChoice<T> syrk_choice_;           // how syrk_ata forms A, per shape
  bool tf32_ = false;                   // syrk_ata on TF32 tensor cores (use_tf32)
  DeviceBuffer<double> reduction_;      // kReductionBlocks partials + the result
  DeviceBuffer<double> norm_partials_;  // vector_norms' three figures per block
  DeviceBuffer<int> info_;              // cuSOLVER's status
  DeviceBuffer<std::byte> device_workspace_;
  std::vector<std::byte> host_workspace_;
  std::uint64_t workspace_generation_ = 0;  // moves of the two above (QueueRecording::valid)
  DeviceBuffer<double> loss_scratch_;
  DeviceBuffer<double> column_partials_;  // column_sums_of_squares' per-chunk sums
  DeviceBuffer<T> inverse_block_;     // potri: n × k columns of the identity, then of the inverse
  DeviceBuffer<T> inverse_diagonal_;  // potri: the inverse's diagonal
  DeviceBuffer<std::int64_t> row_indices_;
  static constexpr std::size_t kStagingBytes = std::size_t{4} << 20;
  PinnedHandle staging_;      // kStagingBytes of page-locked host memory (upload())
  EventHandle staging_free_;  // recorded after the last copy out of staging_
  bool staging_unavailable_ = false;
  std::string name_;
};

}  // namespace
}  // namespace cuda

namespace {

// LMTRAIN_CUDA_MEMORY_LIMIT_BYTES, or 0 when unset.
std::size_t memory_limit_from_environment() {
  const char* text = std::getenv("LMTRAIN_CUDA_MEMORY_LIMIT_BYTES");
  if (text == nullptr || *text == '\0') return 0;
  const std::string_view v(text);
  std::size_t bytes = 0;
  const auto [end, error] = std::from_chars(v.data(), v.data() + v.size(), bytes);
  if (error != std::errc() || end != v.data() + v.size() || bytes == 0)
    throw InvalidArgument(fmt::format(
        "LMTRAIN_CUDA_MEMORY_LIMIT_BYTES=\"{}\" is not a positive number of bytes; set it to the "
        "device memory lmtrain may use (a test of the memory planner), or unset it",
        v));
  return bytes;
}

// Throws BackendError, saying what to do, unless `device` is a visible CUDA device.
void check_device(int device) {
  if (cuda_device_count() == 0) {
    throw BackendError(
        "no CUDA device is visible (no NVIDIA driver, no GPU, or CUDA_VISIBLE_DEVICES hides "
        "them; `nvidia-smi` shows what the driver sees); use the cpu backend");
  }
  (void)cuda_device_description(device);  // validates the index with an actionable message
}

}  // namespace

template <typename T>
std::unique_ptr<Backend<T>> make_cuda_backend(int device) {
  return make_cuda_backend<T>(device, memory_limit_from_environment());
}

template <typename T>
std::unique_ptr<Backend<T>> make_cuda_backend(int device, std::size_t memory_limit_bytes) {
  check_device(device);
  return std::make_unique<cuda::CudaBackend<T>>(device, memory_limit_bytes);
}

template <typename T>
std::unique_ptr<Backend<T>> make_cuda_backend_on_stream(int device, void* stream) {
  if (stream == nullptr)
    throw InvalidArgument(
        "make_cuda_backend_on_stream: the null stream is ambiguous here; pass the caller's "
        "stream, cudaStreamLegacy for the legacy default stream (torch's default stream, whose "
        "cuda_stream reads 0), or call make_cuda_backend for a stream of the backend's own");
  check_device(device);
  return std::make_unique<cuda::CudaBackend<T>>(device, memory_limit_from_environment(),
                                                static_cast<cudaStream_t>(stream));
}

template std::unique_ptr<Backend<float>> make_cuda_backend_on_stream<float>(int, void*);
template std::unique_ptr<Backend<double>> make_cuda_backend_on_stream<double>(int, void*);
template std::unique_ptr<Backend<float>> make_cuda_backend<float>(int);
template std::unique_ptr<Backend<double>> make_cuda_backend<double>(int);
template std::unique_ptr<Backend<float>> make_cuda_backend<float>(int, std::size_t);
template std::unique_ptr<Backend<double>> make_cuda_backend<double>(int, std::size_t);

}  // namespace lmtrain
