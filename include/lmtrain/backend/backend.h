// The Backend is the only part of lmtrain that knows about a device.  Its operations are coarse
// (a GEMM, a SYRK, a factorization, one elementwise kernel over a whole batch), so the virtual
// call costs nothing next to the work.  It comes in three layers:
//   DeviceQueue       the device, its memory, its queue and clocks (device_queue.h);
//   LinearAlgebra<T>  transfers, BLAS levels 1–3 and the factorizations (linear_algebra.h) —
//                     all that solve/ uses;
//   Backend<T>        the neural-network kernels nn/ runs on top: activations, seeds, Jacobian
//                     assembly, convolution, pooling and the losses (this file).
// Pointers are device pointers of the backend's own MemoryResource unless their name says `host`
// (linear_algebra.h has the conventions).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "lmtrain/backend/linear_algebra.h"
#include "lmtrain/core/activation.h"
#include "lmtrain/core/image_shape.h"
#include "lmtrain/core/loss_kind.h"

namespace lmtrain {

template <typename T>
class Backend : public LinearAlgebra<T> {
 public:
  using LinearAlgebra<T>::gemm;
  using LinearAlgebra<T>::gemm_strided_batched;

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
  // (The batched GEMM they use, gemm_strided_batched, is linear_algebra.h's.)
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
  // --------------------------------------------- Objective F (double) of `batch` samples with C
  // outputs.  One read.
  double loss_objective(const LossParams<T>& loss, std::size_t batch, std::size_t c, const T* z,
                        const T* y) {
    this->count_host_read();
    return loss_objective_impl(loss, batch, c, z, y);
  }
  // Residuals r (batch·R) and seeds S (batch·R × C) with S[b·R + k, :] = ∂r_{b,k}/∂z_b (for the
  // exact cross-entropy the row of the GGN factor L).  Returns F as loss_objective would.  One
  // read.
  double loss_linearize(const LossParams<T>& loss, std::size_t batch, std::size_t c, const T* z,
                        const T* y, T* r, T* seeds) {
    this->count_host_read();
    return loss_linearize_impl(loss, batch, c, z, y, r, seeds);
  }
  // The same with F left on the device at `objective` (the bits they return), to be read with
  // other scalars (LinearAlgebra::read_scalars).  No read.
  virtual void loss_objective_into(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                                   const T* z, const T* y, double* objective) = 0;
  virtual void loss_linearize_into(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                                   const T* z, const T* y, T* r, T* seeds, double* objective) = 0;

 protected:
  virtual double loss_objective_impl(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                                     const T* z, const T* y) = 0;
  virtual double loss_linearize_impl(const LossParams<T>& loss, std::size_t batch, std::size_t c,
                                     const T* z, const T* y, T* r, T* seeds) = 0;
};

// The CPU backend: OpenBLAS + LAPACKE + OpenMP.
template <typename T>
std::unique_ptr<Backend<T>> make_cpu_backend();
// The same, behaving like a device of `memory_limit_bytes`: available_memory_bytes() counts
// down from it and an allocation beyond it throws OutOfMemory (0: no limit).
template <typename T>
std::unique_ptr<Backend<T>> make_cpu_backend(std::size_t memory_limit_bytes);

}  // namespace lmtrain
