// The Backend is the only part of lmtrain that knows about a device.  Its operations are coarse
// (a GEMM, a SYRK, a factorization, one elementwise kernel over a whole batch), so the virtual
// call costs nothing next to the work.  Every pointer argument is a *device* pointer from the
// backend's own MemoryResource unless its name says `host`; only scalars (losses, norms,
// factorization status) come back to the host.
//
// Conventions: matrices are dense row-major with an explicit leading dimension (elements between
// consecutive rows).  The normal matrix A (n × n) is symmetric; SYRK writes its upper triangle in
// row-major order, which is the lower triangle in LAPACK's column-major view — factorization
// routines below are told so, and callers never read the other triangle.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "lmtrain/core/activation.h"
#include "lmtrain/core/buffer.h"
#include "lmtrain/core/image_shape.h"
#include "lmtrain/core/loss_kind.h"
#include "lmtrain/core/timer.h"

namespace lmtrain {

enum class DeviceKind { kCpu, kCuda };

// How a device likes each batch's Jacobian sliced (the memory plan's slice): about `bytes` of
// working set per slice (Jacobian rows, activations) with at least `min_rows` Jacobian rows;
// bytes = 0 asks for the largest slice the memory budget allows.
struct SlicePreference {
  std::size_t bytes = 0;
  std::size_t min_rows = 1;
  // Stride of a slice's rows (≥ n; 0: n), its extra columns held at zero: SYRK on a few dozen
  // columns runs faster on a multiple of its kernel's width.
  std::size_t leading_dimension = 0;
};

enum class Trans { kNo, kYes };

template <typename T>
class Backend {
 public:
  virtual ~Backend() = default;

  // Human-readable device description, e.g. "cpu (OpenBLAS 0.3.21, 2 threads)".
  virtual std::string name() const = 0;
  virtual DeviceKind device_kind() const = 0;
  virtual MemoryResource& memory() = 0;
  // Bytes the memory planner may consider free on this device right now.
  virtual std::size_t available_memory_bytes() const = 0;
  // The slicing this device runs fastest, for a step of `num_params` parameters.
  virtual SlicePreference slice_preference(std::size_t /*num_params*/) const { return {}; }
  // Blocks until all queued work is done (a no-op on the CPU); called before timers close.
  virtual void synchronize() = 0;
  // Index of the device among the visible ones of its kind (0 for the CPU).
  virtual int device_index() const { return 0; }
  // The queue the backend's work runs on (a cudaStream_t for CUDA; null for the CPU), for
  // communicators that enqueue collectives on device buffers.
  virtual void* native_stream() { return nullptr; }
  // Work queued on this backend from now on starts only after everything queued so far on
  // `other_queue` (another backend's native_stream() on the same device) — ordered on the device,
  // without a host wait.  A no-op on the CPU, where every call has finished when it returns.
  virtual void order_after(void* /*other_queue*/) {}
  // How the device's host threads were used and why, for the Summary (the CPU: the thread count
  // of each phase, chosen per phase; cpu_threads.h).  Empty where there is no such choice.
  virtual std::string thread_report() const { return {}; }
  // A clock for phases of this backend's queue (core/timer.h); the host clock on the CPU.
  virtual std::unique_ptr<PhaseClock> make_phase_clock() {
    return std::make_unique<HostPhaseClock>();
  }

  DeviceBuffer<T> allocate(std::size_t count) { return DeviceBuffer<T>(memory(), count); }

  // ---- transfers and fills ------------------------------------------------------------------
  // Copies n values from host memory to the device buffer dst, ordered after the work already
  // queued on this backend and before any queued later.  Returns once `host` has been read: the
  // caller may overwrite or free it at once (a temporary is fine).  The device may still be
  // copying: the CUDA backend sends small copies from its own pinned staging buffer and makes
  // large ones synchronous.
  virtual void copy_from_host(const T* host, T* dst, std::size_t n) = 0;
  // Copies n values from the device buffer src to host memory after the queued work; blocks until
  // they are in `host`.
  virtual void copy_to_host(const T* src, T* host, std::size_t n) = 0;
  // Device to device; overlapping ranges behave like memmove.
  virtual void copy(const T* src, T* dst, std::size_t n) = 0;
  virtual void fill(T* x, std::size_t n, T value) = 0;
  // dst_i = src_i rounded to T: precision changes between this backend and its sibling of the
  // other precision on the same device (mixed precision: float32 J, float64 A).  Ordered after
  // this backend's queued work; the caller synchronizes the source's backend first.
  virtual void convert(std::size_t n, const float* src, T* dst) = 0;
  virtual void convert(std::size_t n, const double* src, T* dst) = 0;
  // dst[i, :] = src[rows_host[i], :] for a row-major src with `cols` columns.  rows_host is host
  // memory, read before the call returns (as copy_from_host).
  virtual void gather_rows(const T* src, std::size_t cols, std::span<const std::int64_t> rows_host,
                           T* dst) = 0;

  // ---- level 1 (reductions return a host scalar, accumulated in double) -------------------------
  virtual void axpy(std::size_t n, T alpha, const T* x, T* y) = 0;  // y += αx
  // z = x + αy (z may alias x or y).
  virtual void add_scaled(std::size_t n, const T* x, T alpha, const T* y, T* z) = 0;
  virtual double dot(std::size_t n, const T* x, const T* y) = 0;
  virtual double max_abs(std::size_t n, const T* x) = 0;
  virtual bool all_finite(std::size_t n, const T* x) = 0;
  // y_i = x_i * s_i (or x_i / s_i when `divide`).
  virtual void scale_elementwise(std::size_t n, const T* x, const T* s, bool divide, T* y) = 0;

  // y_i = 1 / √x_i.
  virtual void inverse_sqrt(std::size_t n, const T* x, T* y) = 0;

  // ---- level 2 / 3 ------------------------------------------------------------------------------
  // C(m×n) = α op(A) op(B) + β C, row-major.
  virtual void gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, T alpha,
                    const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c,
                    std::size_t ldc) = 0;
  // y = α op(A) x + β y with A (m × n) row-major.
  virtual void gemv(Trans ta, std::size_t m, std::size_t n, T alpha, const T* a, std::size_t lda,
                    const T* x, T beta, T* y) = 0;
  // Upper triangle (row-major) of C(n×n) = α JᵀJ + β C, J (k × n) row-major.  The SYRK of A +=
  // JₛᵀJₛ.
  virtual void syrk_ata(std::size_t n, std::size_t k, T alpha, const T* j, std::size_t ldj, T beta,
                        T* c) = 0;
  // Upper triangle (row-major) of C(m×m) = α JJᵀ + β C, J (m × n) row-major.  The dual form's Gram.
  virtual void syrk_aat(std::size_t m, std::size_t n, T alpha, const T* j, std::size_t ldj, T beta,
                        T* c) = 0;
  // Copies the upper triangle (row-major) into the lower one.
  virtual void symmetrize_upper(std::size_t n, T* a) = 0;
  // dst's upper triangle (row-major, diagonal included) = src's; dst's strict lower triangle is
  // left as it was.  What a factorization of the upper triangle needs of A: half the bytes of a
  // full copy (the Cholesky solver's copy of A on every λ retry).
  virtual void copy_upper(std::size_t n, const T* src, T* dst) = 0;

  // ---- dense factorizations on the upper triangle (row-major) -----------------------------------
  // Cholesky in place; returns 0 on success, k > 0 if the leading minor of order k is not
  // positive definite (a recoverable event: the LM step raises λ).
  virtual int potrf(std::size_t n, T* a) = 0;
  // Solves (LLᵀ) x = b in place on b with the factor from potrf.
  virtual void potrs(std::size_t n, const T* factor, T* b) = 0;
  // (LLᵀ)⁻¹ in place from potrf's factor (upper triangle valid afterwards); returns 0, or k > 0
  // if the factor's k-th diagonal entry is zero.  Bayesian relevance groups read its diagonal.
  virtual int potri(std::size_t n, T* a) = 0;
  // Symmetric eigendecomposition in place: a ← eigenvectors as *rows* (a[i, :] is the i-th
  // eigenvector), w ← eigenvalues ascending.  Returns 0 on success.
  virtual int syevd(std::size_t n, T* a, T* w) = 0;
  // The eigenvalues alone (ascending into w; a is destroyed): a third of syevd's work.
  virtual int eigenvalues(std::size_t n, T* a, T* w) = 0;
  // a_ii += λ d_i (d == nullptr: d ≡ 1).
  virtual void add_diagonal(std::size_t n, T* a, T lambda, const T* d) = 0;
  // a_ij *= s_i s_j, i.e. a ← SAS with S = diag(s) (upper triangle only).
  virtual void scale_symmetric(std::size_t n, T* a, const T* s) = 0;
  // Upper triangle (row-major) of a (n × n) ↔ n(n+1)/2 contiguous values, row by row: what ranks
  // all-reduce instead of the whole matrix.
  virtual void pack_upper(std::size_t n, const T* a, T* packed) = 0;
  virtual void unpack_upper(std::size_t n, const T* packed, T* a) = 0;
  // out_j = Σ_r J[r, j]² for J (m × n) row-major: diag(JᵀJ) without forming JᵀJ.
  virtual void column_sums_of_squares(std::size_t m, std::size_t n, const T* j, std::size_t ldj,
                                      T* out) = 0;
  // d_i = clamp(a_ii, lo, hi).
  virtual void clamped_diagonal(std::size_t n, const T* a, T lo, T hi, T* d) = 0;
  // y_i = clamp(x_i, lo, hi) (y may alias x).
  virtual void clamp(std::size_t n, const T* x, T lo, T hi, T* y) = 0;

  // ---- neural-network kernels -------------------------------------------------------------------
  // z[r, :] += bias for r < rows.
  virtual void add_bias_rows(std::size_t rows, std::size_t cols, const T* bias, T* z) = 0;
  // A dense layer's forward pass z = x·Wᵀ + b (x: batch × in, W: out × in, z: batch × out).  By
  // default a GEMM and add_bias_rows; a backend fuses them where that pays.
  virtual void dense_forward(std::size_t batch, std::size_t out, std::size_t in, const T* x,
                             const T* w, const T* b, T* z) {
    gemm(Trans::kNo, Trans::kYes, batch, out, in, T(1), x, in, w, in, T(0), z, out);
    add_bias_rows(batch, out, b, z);
  }
  virtual void activation_forward(Activation f, std::size_t n, const T* z, T* a) = 0;
  // d = φ'(z), given z and a = φ(z) (kernels use whichever is cheaper).
  virtual void activation_derivative(Activation f, std::size_t n, const T* z, const T* a, T* d) = 0;
  // g[r, c] *= d[r / group, c]: seeds of `group` residual rows per sample times a per-sample
  // factor.
  virtual void scale_row_groups(std::size_t rows, std::size_t cols, std::size_t group, const T* d,
                                T* g) = 0;
  // Dense layer's block of a Jacobian slice.  For each row r (sample r / group):
  //   J[r, o·in + i] = g_out[r, o] · a_in[r / group, i]     (weights, PyTorch's (out, in) order)
  //   J[r, out·in + o] = g_out[r, o]                         (bias)
  virtual void dense_jacobian(std::size_t rows, std::size_t out, std::size_t in, std::size_t group,
                              const T* g_out, const T* a_in, T* j, std::size_t ldj) = 0;

  // ---- convolution and pooling (NCHW: sample s starts at s·C·H·W; see core/image_shape.h) ------
  // Batched C_b = α op(A_b) op(B_b) + β C_b for b < count, X_b = x + b·stride_x (row-major as
  // gemm).  A stride of 0 shares one matrix across the batch (a layer's weights).
  virtual void gemm_strided_batched(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k,
                                    T alpha, const T* a, std::size_t lda, std::size_t stride_a,
                                    const T* b, std::size_t ldb, std::size_t stride_b, T beta, T* c,
                                    std::size_t ldc, std::size_t stride_c, std::size_t count) = 0;
  // Patches of `samples` inputs x (each C × H × W) as columns: cols_s (K × P row-major,
  // K = C·kh·kw, P = Ho·Wo, cols_s at cols + s·K·P) with
  //   cols_s[(c·kh + i)·kw + j, oy·Wo + ox] = x_s[c, oy·sh − ph + i, ox·sw − pw + j]  (0 in
  //   padding)
  virtual void im2col(const WindowGeometry& g, std::size_t samples, const T* x, T* cols) = 0;
  // The adjoint of im2col: x_s[c, y, x] = Σ of the cols_s entries im2col copies from (c, y, x).
  // Overwrites x (samples × C·H·W).
  virtual void col2im(const WindowGeometry& g, std::size_t samples, const T* cols, T* x) = 0;
  // A convolution's forward pass over `samples` inputs (no 1×1 shortcut: the caller handles
  // pointwise kernels): z_s (O × P) = W (O × K) · im2col(x_s) (+ bias[o] on row o when bias is not
  // null), W row-major.  `cols` is scratch of `cols_elements` ≥ K·P.  By default im2col and one
  // strided-batched GEMM per chunk of samples whose columns fit `cols`, then the bias; a backend
  // replaces it where a direct kernel pays.
  virtual void conv2d_forward(const WindowGeometry& g, std::size_t out_channels,
                              std::size_t samples, const T* x, const T* w, const T* bias, T* z,
                              T* cols, std::size_t cols_elements) {
    const std::size_t K = g.patch_size(), P = g.out_spatial(), O = out_channels;
    const std::size_t per = cols_elements / (K * P);
    for (std::size_t first = 0; first < samples; first += per) {
      const std::size_t count = std::min(per, samples - first);
      im2col(g, count, x + first * g.in_size(), cols);
      gemm_strided_batched(Trans::kNo, Trans::kNo, O, P, K, T(1), w, K, 0, cols, P, K * P, T(0),
                           z + first * O * P, P, O * P, count);
    }
    if (bias != nullptr) add_channel_bias(samples, O, P, bias, z);
  }
  // z[s, c·spatial + p] += bias[c]: a convolution's per-channel bias.
  virtual void add_channel_bias(std::size_t samples, std::size_t channels, std::size_t spatial,
                                const T* bias, T* z) = 0;
  // J[r, c] = Σ_p g_out[r, c·spatial + p] for r < rows (row r of J at j + r·ldj): a
  // convolution's bias columns of a Jacobian slice.
  virtual void channel_sums(std::size_t rows, std::size_t channels, std::size_t spatial,
                            const T* g_out, T* j, std::size_t ldj) = 0;
  // Max pooling of `samples` inputs: y_s[c, oy, ox] = max over the window (padding is −∞).
  // When argmax is not null it receives, per output, the flat index (c·H + y)·W + x within the
  // sample of the first maximum, stored as T (exact: a float holds integers up to 2²⁴).
  virtual void max_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y,
                                T* argmax) = 0;
  // Seeds through max pooling for `rows` = samples·group rows (sample r / group):
  //   g_in[r, i] = Σ_{o : argmax[r / group, o] = i} g_out[r, o]     (overwrites g_in)
  virtual void max_pool_backward(const WindowGeometry& g, std::size_t rows, std::size_t group,
                                 const T* argmax, const T* g_out, T* g_in) = 0;
  // Average pooling; padding counts as zeros, the divisor is kh·kw (count_include_pad).
  virtual void avg_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y) = 0;
  // g_in[r, (c, y, x)] = Σ_{windows covering (y, x)} g_out[r, (c, oy, ox)] / (kh·kw).
  virtual void avg_pool_backward(const WindowGeometry& g, std::size_t rows, const T* g_out,
                                 T* g_in) = 0;

  // ---- losses (see core/loss_kind.h for the formulas)
  // -------------------------------------------- Objective F (double) of `batch` samples with C
  // outputs.
  virtual double loss_objective(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                                const T* z, const T* y) = 0;
  // Residuals r (batch·R) and seeds S (batch·R × C) with S[b·R + k, :] = ∂r_{b,k}/∂z_b (for the
  // exact cross-entropy the row of the GGN factor L).  Returns F as loss_objective would.
  virtual double loss_linearize(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                                const T* z, const T* y, T* r, T* seeds) = 0;
};

// The CPU backend: OpenBLAS + LAPACKE + OpenMP.
template <typename T>
std::unique_ptr<Backend<T>> make_cpu_backend();
// The same, behaving like a device of `memory_limit_bytes`: available_memory_bytes() counts
// down from it and an allocation beyond it throws OutOfMemory (0: no limit).
template <typename T>
std::unique_ptr<Backend<T>> make_cpu_backend(std::size_t memory_limit_bytes);

// A backend of precision S on the same device as `backend` (its own queue and handles): the
// float64 side of mixed precision.
template <typename S, typename T>
std::unique_ptr<Backend<S>> make_sibling_backend(Backend<T>& backend);

}  // namespace lmtrain
