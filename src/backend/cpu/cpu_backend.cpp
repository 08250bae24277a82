// CPU backend: OpenBLAS (OpenMP build) for GEMM/SYRK, LAPACKE for potrf/potrs/syevd, OpenMP
// loops for the elementwise and Jacobian-assembly kernels.
#include <cblas.h>
#include <fmt/format.h>
#include <lapacke.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../activation_math.h"
#include "../loss_math.h"
#include "../step_math.h"
#include "activation_loops.h"
#include "blas_calls.h"
#include "conv_kernels.h"
#include "cpu_memory.h"
#include "cpu_threads.h"
#include "lmtrain/backend/backend.h"
#include "lmtrain/backend/syrk_choice.h"
#include "lmtrain/core/error.h"

namespace lmtrain {
namespace {

using cpu::bi;
using cpu::blas_gemm;
using cpu::cblas_trans;
using cpu::kSerialBlasWork;

// Below this many elements an OpenMP region costs more than it saves.  Set high on purpose: a
// region's barrier waits for every thread, and on a loaded machine (another process on the same
// cores) each wait can cost a scheduler time slice; small networks run best on one thread.
constexpr std::size_t kParallelThreshold = 1 << 17;

// Splits [0, n) into one contiguous chunk per OpenMP thread (when n is large enough).
template <typename Body>
void parallel_chunks(std::size_t n, std::size_t threshold, Body body) {
  if (n < threshold) {
    body(std::size_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const auto threads = static_cast<std::size_t>(omp_get_num_threads());
    const auto id = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t chunk = (n + threads - 1) / threads;
    const std::size_t begin = std::min(n, id * chunk), end = std::min(n, begin + chunk);
    body(begin, end);
  }
}

// Σ term(i) over [0, n), with the same bits on any number of threads: up to `threshold` terms in
// index order on the calling thread; above it as partial sums of fixed blocks of `block` terms
// (spread over the threads), added in block order.  An OpenMP reduction adds in an order that
// follows the team's size, and the team's size changes from phase to phase (cpu_threads.h),
// which would make a run's trajectory depend on timing.
template <typename Term>
double ordered_sum(std::size_t n, std::size_t threshold, std::size_t block, Term term) {
  double s = 0;
  if (n <= threshold) {
    for (std::size_t i = 0; i < n; ++i) s += term(i);
    return s;
  }
  std::vector<double> partial((n + block - 1) / block);
  const auto blocks = static_cast<std::ptrdiff_t>(partial.size());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t b = 0; b < blocks; ++b) {
    const std::size_t first = static_cast<std::size_t>(b) * block, end = std::min(n, first + block);
    double p = 0;
    for (std::size_t i = first; i < end; ++i) p += term(i);
    partial[static_cast<std::size_t>(b)] = p;
  }
  for (double p : partial) s += p;
  return s;
}
constexpr std::size_t kSumBlock = 4096;       // elements of a dot product
constexpr std::size_t kSampleSumBlock = 256;  // samples of a loss

// A CPU slices each batch's Jacobian so that a slice's rows and activations, about 2 MiB per
// thread, are still cached when SYRK reads them, with at least 512 rows per SYRK call and, on
// several threads, twice the work from which SYRK runs threaded (a SYRK just past kSerialBlasWork
// runs its threads poorly: W4 on two threads took 48.5 ms per step in 512-row slices, 46.2 in
// 1 000-row ones).  On W2 (769 parameters, 5 KiB per sample, one thread) 512-sample slices take
// 82 ms per step against 86 ms for one 10 000-sample slice; W1's whole batch is 0.4 MiB and
// stays one slice (bench/README.md, "Slice size on a CPU").
constexpr std::size_t kCacheSliceBytes = std::size_t{2} << 20;
constexpr std::size_t kMinSliceRows = 512;
// OpenBLAS's float SYRK on n < 128 columns runs faster on a multiple of 8 (zero columns added):
// k = 1 000 rows, one thread, n = 21 → 24: 18.8 → 12.6 µs, 37 → 40: 36.3 → 27.9, 61 → 64: 73.4
// → 61.1, 101 → 104: 163 → 145; from n = 130 on it gains nothing, and double SYRK gains nothing.
constexpr std::size_t kPaddedSyrkBelow = 128, kSyrkColumnMultiple = 8;

double work(std::size_t a, std::size_t b, std::size_t c) {
  return static_cast<double>(a) * static_cast<double>(b) * static_cast<double>(c);
}

lapack_int li(std::size_t v) {
  return static_cast<lapack_int>(v);
}

// Thin typed wrappers so the backend is written once for float and double.
void blas_gemv(CBLAS_TRANSPOSE t, blasint m, blasint n, float al, const float* a, blasint lda,
               const float* x, float be, float* y) {
  cblas_sgemv(CblasRowMajor, t, m, n, al, a, lda, x, 1, be, y, 1);
}
void blas_gemv(CBLAS_TRANSPOSE t, blasint m, blasint n, double al, const double* a, blasint lda,
               const double* x, double be, double* y) {
  cblas_dgemv(CblasRowMajor, t, m, n, al, a, lda, x, 1, be, y, 1);
}
void blas_syrk(CBLAS_TRANSPOSE t, blasint n, blasint k, float al, const float* a, blasint lda,
               float be, float* c) {
  cblas_ssyrk(CblasRowMajor, CblasUpper, t, n, k, al, a, lda, be, c, n);
}
void blas_syrk(CBLAS_TRANSPOSE t, blasint n, blasint k, double al, const double* a, blasint lda,
               double be, double* c) {
  cblas_dsyrk(CblasRowMajor, CblasUpper, t, n, k, al, a, lda, be, c, n);
}
// Row-major upper == column-major lower on the same memory: no transposed copies in LAPACKE.
// The _work entry points skip LAPACKE's NaN scan of the inputs (n² reads per call, 1 % of a W1
// step, by perf): a NaN in A fails the factorization or leaves a NaN factor, and a NaN in A or b
// leaves a non-finite δ, which the step already treats as an invalid attempt (before, LAPACKE
// returned an argument error, which the backend threw).
lapack_int lapack_potrf(lapack_int n, float* a) {
  return LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'L', n, a, n);
}
lapack_int lapack_potrf(lapack_int n, double* a) {
  return LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', n, a, n);
}
lapack_int lapack_potri(lapack_int n, float* a) {
  return LAPACKE_spotri_work(LAPACK_COL_MAJOR, 'L', n, a, n);
}
lapack_int lapack_potri(lapack_int n, double* a) {
  return LAPACKE_dpotri_work(LAPACK_COL_MAJOR, 'L', n, a, n);
}
lapack_int lapack_potrs(lapack_int n, const float* a, float* b) {
  return LAPACKE_spotrs_work(LAPACK_COL_MAJOR, 'L', n, 1, a, n, b, n);
}
lapack_int lapack_potrs(lapack_int n, const double* a, double* b) {
  return LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, 'L', n, 1, a, n, b, n);
}
lapack_int lapack_syevd(char jobz, lapack_int n, float* a, float* w) {
  return LAPACKE_ssyevd(LAPACK_COL_MAJOR, jobz, 'L', n, a, n, w);
}
lapack_int lapack_syevd(char jobz, lapack_int n, double* a, double* w) {
  return LAPACKE_dsyevd(LAPACK_COL_MAJOR, jobz, 'L', n, a, n, w);
}

template <typename T>
class CpuBackend final : public Backend<T> {
 public:
  // Resolves the activation loops' SIMD path here, where a bad LMTRAIN_SIMD can still throw
  // (inside the loops' parallel regions it could not).
  // `threads`: the thread use this backend shares (mixed precision's float64 side shares its
  // float side's); null: its own.
  CpuBackend(std::size_t memory_limit_bytes, std::shared_ptr<cpu::ThreadController> threads)
      : memory_(memory_limit_bytes),
        simd_(cpu::simd_path()),
        threads_(threads ? std::move(threads) : std::make_shared<cpu::ThreadController>()),
        split_k_(*this, static_cast<std::size_t>(threads_->max_threads()), kSplitKStrideMultiple,
                 [this](std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj, T beta,
                        T* c) { own_syrk_ata(n, k, alpha, j, ldj, beta, c); }) {}

  std::string name() const override {
    if (memory_.limit_bytes() > 0)
      return fmt::format("cpu ({}, up to {} threads, {} loops, limited to {} bytes)",
                         openblas_get_config(), threads_->max_threads(), cpu::to_string(simd_),
                         memory_.limit_bytes());
    return fmt::format("cpu ({}, up to {} threads, {} loops)", openblas_get_config(),
                       threads_->max_threads(), cpu::to_string(simd_));
  }
  std::string thread_report() const override { return threads_->report(); }
  const std::shared_ptr<cpu::ThreadController>& threads() const { return threads_; }
  // The host clock, telling the thread choice where each phase begins and ends.
  std::unique_ptr<PhaseClock> make_phase_clock() override {
    return std::make_unique<cpu::ThreadedPhaseClock>(threads_);
  }
  DeviceKind device_kind() const override { return DeviceKind::kCpu; }
  MemoryResource& memory() override { return memory_; }
  std::size_t available_memory_bytes() const override {
    const std::size_t host = cpu::available_host_memory_bytes();
    if (memory_.limit_bytes() == 0) return host;
    return std::min(
        host, memory_.limit_bytes() - std::min(memory_.limit_bytes(), memory_.bytes_in_use()));
  }
  SlicePreference slice_preference(std::size_t num_params) const override {
    // Sized for the most threads a phase may run on, so the slices (and with them the order in
    // which A's sums are added) do not change with the per-phase choice.
    const auto threads = static_cast<std::size_t>(threads_->max_threads());
    SlicePreference p{threads * kCacheSliceBytes, kMinSliceRows, 0};
    if (std::is_same_v<T, float> && num_params < kPaddedSyrkBelow)
      p.leading_dimension =
          (num_params + kSyrkColumnMultiple - 1) / kSyrkColumnMultiple * kSyrkColumnMultiple;
    if (threads > 1) {
      const double threaded_rows =
          4 * kSerialBlasWork / std::max(work(num_params, num_params, 1), 1.0);
      p.min_rows = std::max(p.min_rows, static_cast<std::size_t>(threaded_rows) + 1);
    }
    return p;
  }
  void synchronize() override {}

  void copy_from_host(const T* host, T* dst, std::size_t n) override { copy(host, dst, n); }
  void copy(const T* src, T* dst, std::size_t n) override {
    if (n > 0 && src != dst) std::memmove(dst, src, n * sizeof(T));
  }
  void write_scalars(const double* host, double* device, std::size_t count) override {
    std::copy_n(host, count, device);
  }
  void fill(T* x, std::size_t n, T value) override { std::fill(x, x + n, value); }
  void convert(std::size_t n, const float* src, T* dst) override { convert_values(n, src, dst); }
  void convert(std::size_t n, const double* src, T* dst) override { convert_values(n, src, dst); }
  void gather_rows(const T* src, std::size_t cols, std::span<const std::int64_t> rows,
                   T* dst) override {
    const std::size_t count = rows.size();
    if (cols <= 8) {  // a few values per row: a loop, not a memcpy call per row
      for (std::size_t i = 0; i < count; ++i) {
        const T* s = src + static_cast<std::size_t>(rows[i]) * cols;
        for (std::size_t c = 0; c < cols; ++c) dst[i * cols + c] = s[c];
      }
      return;
    }
#pragma omp parallel for if (count * cols > kParallelThreshold)
    for (std::size_t i = 0; i < count; ++i)
      std::memcpy(dst + i * cols, src + static_cast<std::size_t>(rows[i]) * cols, cols * sizeof(T));
  }

  template <typename S>
  static void convert_values(std::size_t n, const S* src, T* dst) {
#pragma omp parallel for if (n > kParallelThreshold)
    for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
  }

  void axpy(std::size_t n, T alpha, const T* x, T* y) override {
#pragma omp parallel for if (n > kParallelThreshold)
    for (std::size_t i = 0; i < n; ++i) y[i] += alpha * x[i];
  }
  void add_scaled(std::size_t n, const T* x, T alpha, const T* y, T* z) override {
#pragma omp parallel for if (n > kParallelThreshold)
    for (std::size_t i = 0; i < n; ++i) z[i] = x[i] + alpha * y[i];
  }
  void dot_into(std::size_t n, const T* x, const T* y, double* result) override {
    *result = dot_impl(n, x, y);
  }
  void axpy_if_ratio_holds(std::size_t n, T alpha, const T* x, T* y, const double* x_norms,
                           const double* y_norms, double lr, double ratio,
                           double* applied) override {
    const bool holds = kernels::geodesic_ratio_holds(x_norms[2], y_norms[2], lr, ratio);
    if (holds) axpy(n, alpha, x, y);
    *applied = holds ? 1.0 : 0.0;
  }
  void vector_norms(std::size_t n, const T* x, std::size_t stride, double* result) override {
    double bad = 0, largest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(x[i * stride]);
      bad += std::isfinite(v) ? 0.0 : 1.0;
      largest = std::max(largest, std::fabs(v));
    }
    result[0] = bad;
    result[1] = largest;
    // Added as dot(x, x) adds it, so that a norm taken here has dot's bits.
    result[2] = ordered_sum(n, kParallelThreshold, kSumBlock, [x, stride](std::size_t i) {
      const double v = static_cast<double>(x[i * stride]);
      return v * v;
    });
  }
  void scale_elementwise(std::size_t n, const T* x, const T* s, bool divide, T* y) override {
    if (divide) {
      for (std::size_t i = 0; i < n; ++i) y[i] = x[i] / s[i];
    } else {
      for (std::size_t i = 0; i < n; ++i) y[i] = x[i] * s[i];
    }
  }

  void inverse_sqrt(std::size_t n, const T* x, T* y) override {
    for (std::size_t i = 0; i < n; ++i) y[i] = T(1) / std::sqrt(x[i]);
  }

  void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a,
            std::size_t lda, const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) override {
    if (m == 0 || n == 0) return;
    cpu::BlasCall call(*threads_, work(m, n, k));
    if (cpu::degenerate_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
    blas_gemm(cblas_trans(ta), cblas_trans(tb), bi(m), bi(n), bi(k), alpha, a, bi(lda), b, bi(ldb),
              beta, c, bi(ldc));
  }
  void gemv(Trans ta, std::size_t m, std::size_t n, T alpha, const T* a, std::size_t lda,
            const T* x, T beta, T* y) override {
    if (m == 0 || n == 0) return;
    cpu::BlasCall call(*threads_, work(m, n, 1));
    blas_gemv(cblas_trans(ta), bi(m), bi(n), alpha, a, bi(lda), x, beta, y);
  }
  // OpenBLAS's SYRK, or split-K when solver.normal_matrix asks for it (the algorithm the CUDA
  // backend may choose, run here so that CI trains with it; normal_matrix_method.h).
  void syrk_ata(std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj, T beta,
                T* c) override {
    if (method_ == NormalMatrixMethod::kSplitK)
      split_k_.syrk_ata(n, k, alpha, j, ldj, beta, c);
    else
      own_syrk_ata(n, k, alpha, j, ldj, beta, c);
  }
  bool set_normal_matrix_method(NormalMatrixMethod method) override {
    method_ = method;
    split_k_.set_method(method);
    return true;
  }
  std::string normal_matrix_report() const override {
    return method_ == NormalMatrixMethod::kSplitK ? split_k_.report() : std::string();
  }
  void syrk_aat(std::size_t m, std::size_t n, T alpha, const T* j, std::size_t ldj, T beta,
                T* c) override {
    cpu::BlasCall call(*threads_, work(m, m, n) / 2);
    blas_syrk(CblasNoTrans, bi(m), bi(n), alpha, j, bi(ldj), beta, c);
  }
  void reduce_upper(std::size_t n, std::size_t count, const T* partials, std::size_t ldp,
                    std::size_t stride, T beta, T* c) override {
    // Row by row, each row's sums in a double accumulator, the partials added in the order
    // b = 0, 1, …: the same bits on any number of threads.
#pragma omp parallel if (n * n * count > 2 * kParallelThreshold)
    {
      std::vector<double> sum(n);
#pragma omp for schedule(static)
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t width = n - i;
        std::fill_n(sum.begin(), width, 0.0);
        for (std::size_t b = 0; b < count; ++b) {
          const T* p = partials + b * stride + i * ldp + i;
          for (std::size_t j = 0; j < width; ++j) sum[j] += static_cast<double>(p[j]);
        }
        T* ci = c + i * n + i;
        if (beta == T(0)) {
          for (std::size_t j = 0; j < width; ++j) ci[j] = static_cast<T>(sum[j]);
        } else {
          const auto b = static_cast<double>(beta);
          for (std::size_t j = 0; j < width; ++j)
            ci[j] = static_cast<T>(b * static_cast<double>(ci[j]) + sum[j]);
        }
      }
    }
  }
  void symmetrize_upper(std::size_t n, T* a) override {
#pragma omp parallel for if (n * n > kParallelThreshold)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < i; ++j) a[i * n + j] = a[j * n + i];
  }

  void copy_upper(std::size_t n, const T* src, T* dst) override {
#pragma omp parallel for if (n * n > kParallelThreshold)
    for (std::size_t i = 0; i < n; ++i)
      std::memcpy(dst + i * n + i, src + i * n + i, (n - i) * sizeof(T));
  }

  void potrf_into(std::size_t n, T* a, double* status) override {
    *status = static_cast<double>(potrf_impl(n, a));
  }
  void potrs(std::size_t n, const T* factor, T* b) override {
    cpu::BlasCall call(*threads_, work(n, n, 2));
    const lapack_int info = lapack_potrs(li(n), factor, b);
    if (info != 0) throw BackendError(fmt::format("LAPACKE potrs failed with info {}", info));
  }
  void add_diagonal(std::size_t n, T* a, T lambda, const T* d) override {
    for (std::size_t i = 0; i < n; ++i) a[i * n + i] += lambda * (d ? d[i] : T(1));
  }
  void add_diagonal_from(std::size_t n, T* a, const double* lambda, const T* d) override {
    add_diagonal(n, a, static_cast<T>(*lambda), d);
  }
  void scale_symmetric(std::size_t n, T* a, const T* s) override {
#pragma omp parallel for if (n * n > kParallelThreshold)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i; j < n; ++j) a[i * n + j] *= s[i] * s[j];
  }
  void pack_upper(std::size_t n, const T* a, T* packed) override {
    for (std::size_t i = 0; i < n; ++i) {
      std::memcpy(packed, a + i * n + i, (n - i) * sizeof(T));
      packed += n - i;
    }
  }
  void unpack_upper(std::size_t n, const T* packed, T* a) override {
    for (std::size_t i = 0; i < n; ++i) {
      std::memcpy(a + i * n + i, packed, (n - i) * sizeof(T));
      packed += n - i;
    }
  }
  void column_sums_of_squares(std::size_t m, std::size_t n, const T* j, std::size_t ldj,
                              T* out) override {
    std::fill(out, out + n, T(0));
    for (std::size_t r = 0; r < m; ++r) {
      const T* row = j + r * ldj;
      for (std::size_t c = 0; c < n; ++c) out[c] += row[c] * row[c];
    }
  }
  void clamped_diagonal(std::size_t n, const T* a, T lo, T hi, T* d) override {
    for (std::size_t i = 0; i < n; ++i) d[i] = std::clamp(a[i * n + i], lo, hi);
  }
  void clamp(std::size_t n, const T* x, T lo, T hi, T* y) override {
    for (std::size_t i = 0; i < n; ++i) y[i] = std::clamp(x[i], lo, hi);
  }

  void add_bias_rows(std::size_t rows, std::size_t cols, const T* bias, T* z) override {
    if (cols == 1) {  // one output: a single broadcast value
      const T b = bias[0];
      for (std::size_t r = 0; r < rows; ++r) z[r] += b;
      return;
    }
#pragma omp parallel for if (rows * cols > kParallelThreshold)
    for (std::size_t r = 0; r < rows; ++r) {
      T* __restrict zr = z + r * cols;
      const T* __restrict br = bias;
      for (std::size_t c = 0; c < cols; ++c) zr[c] += br[c];
    }
  }
  // z = x·Wᵀ + b in one pass for a layer of In ≤ 4 inputs (W1's first layer has one), where a GEMM
  // is all packing overhead.  In is a constant so the loop over outputs vectorizes (W's column i
  // is read at the fixed stride In); each z[r, o] sums b[o] + x[r, 0]·W[o, 0] + … in that order.
  template <std::size_t In>
  static void few_input_dense(std::size_t batch, std::size_t out, const T* x, const T* w,
                              const T* b, T* z) {
#pragma omp parallel for if (batch * out * In > kParallelThreshold)
    for (std::size_t r = 0; r < batch; ++r) {
      T* __restrict zr = z + r * out;
      const T* xr = x + r * In;
      for (std::size_t o = 0; o < out; ++o) {
        T acc = b[o];
        for (std::size_t i = 0; i < In; ++i) acc += xr[i] * w[o * In + i];
        zr[o] = acc;
      }
    }
  }
  void dense_forward(std::size_t batch, std::size_t out, std::size_t in, const T* x, const T* w,
                     const T* b, T* z) override {
    switch (out == 1 ? 0 : in) {
      case 1:
        return few_input_dense<1>(batch, out, x, w, b, z);
      case 2:
        return few_input_dense<2>(batch, out, x, w, b, z);
      case 3:
        return few_input_dense<3>(batch, out, x, w, b, z);
      case 4:
        return few_input_dense<4>(batch, out, x, w, b, z);
      default:
        Backend<T>::dense_forward(batch, out, in, x, w, b, z);
    }
  }
  void activation_forward(Activation f, std::size_t n, const T* z, T* a) override {
    parallel_chunks(n, kParallelThreshold, [&](std::size_t begin, std::size_t end) {
      cpu::activation_forward(f, begin, end, z, a);
    });
  }
  void activation_derivative(Activation f, std::size_t n, const T* z, const T* a, T* d) override {
    parallel_chunks(n, kParallelThreshold, [&](std::size_t begin, std::size_t end) {
      cpu::activation_derivative(f, begin, end, z, a, d);
    });
  }
  void scale_row_groups(std::size_t rows, std::size_t cols, std::size_t group, const T* d,
                        T* g) override {
#pragma omp parallel for if (rows * cols > kParallelThreshold)
    for (std::size_t r = 0; r < rows; ++r) {
      const T* dr = d + (r / group) * cols;
      T* gr = g + r * cols;
      for (std::size_t c = 0; c < cols; ++c) gr[c] *= dr[c];
    }
  }
  void dense_jacobian(std::size_t rows, std::size_t out, std::size_t in, std::size_t group,
                      const T* g_out, const T* a_in, T* j, std::size_t ldj) override {
#pragma omp parallel for if (rows * out * in > kParallelThreshold)
    for (std::size_t r = 0; r < rows; ++r) {
      const T* gr = g_out + r * out;
      const T* ar = a_in + (r / group) * in;
      T* jr = j + r * ldj;
      if (in == 1) {  // a one-input layer: one product per output, vectorized over them
        const T a0 = ar[0];
        for (std::size_t o = 0; o < out; ++o) jr[o] = gr[o] * a0;
        std::memcpy(jr + out, gr, out * sizeof(T));
        continue;
      }
      for (std::size_t o = 0; o < out; ++o) {
        const T go = gr[o];
        T* jw = jr + o * in;
        for (std::size_t i = 0; i < in; ++i) jw[i] = go * ar[i];
      }
      std::memcpy(jr + out * in, gr, out * sizeof(T));
    }
  }

  // Convolution and pooling: cpu_conv.cpp.
  void gemm_strided_batched(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                            T alpha, const T* a, std::size_t lda, std::size_t stride_a, const T* b,
                            std::size_t ldb, std::size_t stride_b, T beta, T* c, std::size_t ldc,
                            std::size_t stride_c, std::size_t count) override {
    // Each product runs on one thread when they are spread over the threads; the call's thread
    // count is the guard's for the whole batch.
    cpu::BlasCall call(*threads_, work(m, n, k) * static_cast<double>(count));
    cpu::gemm_strided_batched(ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c,
                              ldc, stride_c, count);
  }
  void im2col(const WindowGeometry& g, std::size_t samples, const T* x, T* cols) override {
    cpu::im2col(g, samples, x, cols);
  }
  void conv2d_forward(const WindowGeometry& g, std::size_t out_channels, std::size_t samples,
                      const T* x, const T* w, const T* bias, T* z, T* cols,
                      std::size_t cols_elements) override {
    if (!cpu::conv2d_forward_direct(cpu::simd_path(), g, out_channels, samples, x, w, bias, z, cols,
                                    cols_elements))
      Backend<T>::conv2d_forward(g, out_channels, samples, x, w, bias, z, cols, cols_elements);
  }
  void col2im(const WindowGeometry& g, std::size_t samples, const T* cols, T* x) override {
    cpu::col2im(g, samples, cols, x);
  }
  void add_channel_bias(std::size_t samples, std::size_t channels, std::size_t spatial,
                        const T* bias, T* z) override {
    cpu::add_channel_bias(samples, channels, spatial, bias, z);
  }
  void channel_sums(std::size_t rows, std::size_t channels, std::size_t spatial, const T* g_out,
                    T* j, std::size_t ldj) override {
    cpu::channel_sums(rows, channels, spatial, g_out, j, ldj);
  }
  void max_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y,
                        T* argmax) override {
    cpu::max_pool_forward(g, samples, x, y, argmax);
  }
  void max_pool_backward(const WindowGeometry& g, std::size_t rows, std::size_t group,
                         const T* argmax, const T* g_out, T* g_in) override {
    cpu::max_pool_backward(g, rows, group, argmax, g_out, g_in);
  }
  void avg_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y) override {
    cpu::avg_pool_forward(g, samples, x, y);
  }
  void avg_pool_backward(const WindowGeometry& g, std::size_t rows, const T* g_out,
                         T* g_in) override {
    cpu::avg_pool_backward(g, rows, g_out, g_in);
  }

  void loss_objective_into(const LossParams<T>& loss, std::size_t batch, std::size_t c, const T* z,
                           const T* y, double* objective) override {
    *objective = loss_objective_impl(loss, batch, c, z, y);
  }
  void loss_linearize_into(const LossParams<T>& loss, std::size_t batch, std::size_t c, const T* z,
                           const T* y, T* r, T* seeds, double* objective) override {
    *objective = loss_linearize_impl(loss, batch, c, z, y, r, seeds);
  }

 protected:
  void copy_to_host_impl(const T* src, T* host, std::size_t n) override {
    copy(src, host, n);
  }
  void read_scalars_impl(const double* device, double* host, std::size_t count) override {
    std::copy_n(device, count, host);
  }
  double dot_impl(std::size_t n, const T* x, const T* y) override {
    return ordered_sum(n, kParallelThreshold, kSumBlock, [x, y](std::size_t i) {
      return static_cast<double>(x[i]) * static_cast<double>(y[i]);
    });
  }
  double max_abs_impl(std::size_t n, const T* x) override {
    double m = 0;
#pragma omp parallel for reduction(max : m) if (n > kParallelThreshold)
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(x[i])));
    return m;
  }
  bool all_finite_impl(std::size_t n, const T* x) override {
    int bad = 0;
#pragma omp parallel for reduction(| : bad) if (n > kParallelThreshold)
    for (std::size_t i = 0; i < n; ++i) bad |= std::isfinite(x[i]) ? 0 : 1;
    return bad == 0;
  }
  int potrf_impl(std::size_t n, T* a) override {
    cpu::BlasCall call(*threads_, work(n, n, n) / 3);
    const lapack_int info = lapack_potrf(li(n), a);
    if (info < 0) throw BackendError(fmt::format("LAPACKE potrf: argument {} invalid", -info));
    return static_cast<int>(info);
  }
  int potri_impl(std::size_t n, T* a) override {
    cpu::BlasCall call(*threads_, work(n, n, n) * 2 / 3);
    const lapack_int info = lapack_potri(li(n), a);
    if (info < 0) throw BackendError(fmt::format("LAPACKE potri: argument {} invalid", -info));
    return static_cast<int>(info);
  }
  int syevd_impl(std::size_t n, T* a, T* w) override {
    cpu::BlasCall call(*threads_, work(n, n, n) * 4 / 3);
    const lapack_int info = lapack_syevd('V', li(n), a, w);
    if (info < 0) throw BackendError(fmt::format("LAPACKE syevd: argument {} invalid", -info));
    return static_cast<int>(info);
  }
  int eigenvalues_impl(std::size_t n, T* a, T* w) override {
    cpu::BlasCall call(*threads_, work(n, n, n) * 4 / 3);
    const lapack_int info = lapack_syevd('N', li(n), a, w);
    if (info < 0) throw BackendError(fmt::format("LAPACKE syevd: argument {} invalid", -info));
    return static_cast<int>(info);
  }
  double loss_objective_impl(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                             const T* z, const T* y) override {
    const std::size_t threshold = (kParallelThreshold / 8 + c - 1) / c;  // samples
    const std::size_t ys = kernels::target_stride(loss, c);
    return ordered_sum(batch, threshold, kSampleSumBlock, [&](std::size_t b) {
      return kernels::sample_objective(loss, c, z + b * c, y + b * ys);
    });
  }
  double loss_linearize_impl(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                             const T* z, const T* y, T* r, T* seeds) override {
    const std::size_t rows = residuals_per_sample(loss.kind, c);
    const std::size_t threshold = (kParallelThreshold / 8 + c - 1) / c;  // samples
    const std::size_t ys = kernels::target_stride(loss, c);
    return ordered_sum(batch, threshold, kSampleSumBlock, [&](std::size_t b) {
      thread_local std::vector<double> scratch;
      if (scratch.size() < c) scratch.resize(c);
      return kernels::sample_linearize(loss, c, z + b * c, y + b * ys, b, r + b * rows,
                                       seeds + b * rows * c, scratch.data());
    });
  }

 private:
  void own_syrk_ata(std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj, T beta,
                    T* c) {
    cpu::BlasCall call(*threads_, work(n, n, k) / 2);
    blas_syrk(CblasTrans, bi(n), bi(k), alpha, j, bi(ldj), beta, c);
  }

  // Split-K's partials rows padded to 8 elements (a 32- or 64-byte line).
  static constexpr std::size_t kSplitKStrideMultiple = 8;

  cpu::HostMemory memory_;
  cpu::SimdPath simd_;
  std::shared_ptr<cpu::ThreadController> threads_;
  SyrkChoice<T> split_k_;  // syrk_ata under solver.normal_matrix = "split_k"
  NormalMatrixMethod method_ = NormalMatrixMethod::kAuto;
};

}  // namespace

template <typename T>
std::unique_ptr<Backend<T>> make_cpu_backend() {
  return std::make_unique<CpuBackend<T>>(0, nullptr);
}

template <typename T>
std::unique_ptr<Backend<T>> make_cpu_backend(std::size_t memory_limit_bytes) {
  return std::make_unique<CpuBackend<T>>(memory_limit_bytes, nullptr);
}

namespace cpu {

template <typename S>
std::unique_ptr<Backend<S>> make_cpu_sibling(const DeviceQueue& device) {
  std::shared_ptr<cpu::ThreadController> threads;
  if (const auto* f = dynamic_cast<const CpuBackend<float>*>(&device))
    threads = f->threads();
  else if (const auto* d = dynamic_cast<const CpuBackend<double>*>(&device))
    threads = d->threads();
  return std::make_unique<CpuBackend<S>>(0, std::move(threads));
}

template std::unique_ptr<Backend<double>> make_cpu_sibling<double>(const DeviceQueue&);
template std::unique_ptr<Backend<float>> make_cpu_sibling<float>(const DeviceQueue&);

}  // namespace cpu

template std::unique_ptr<Backend<float>> make_cpu_backend<float>();
template std::unique_ptr<Backend<double>> make_cpu_backend<double>();
template std::unique_ptr<Backend<float>> make_cpu_backend<float>(std::size_t);
template std::unique_ptr<Backend<double>> make_cpu_backend<double>(std::size_t);

}  // namespace lmtrain
