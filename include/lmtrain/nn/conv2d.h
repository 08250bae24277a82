// 2-D convolution (cross-correlation, as PyTorch's nn.Conv2d; dilation 1, one group) on NCHW
// samples: z[o, oy, ox] = b[o] + Σ_{c,i,j} W[o, c, i, j] · a[c, oy·sh − ph + i, ox·sw − pw + j].
// Parameters in PyTorch's order: W (out × in × kh × kw) then b (out).
//
// With K = in·kh·kw, P = Ho·Wo and X_s = im2col(a_s) (K × P, backend.h), per sample
//   forward     Z_s = W X_s (+ b)                        Backend::conv2d_forward: im2col and one
//                                                        strided-batched GEMM over samples, or
//                                                        the CPU's direct kernel (≤ 32 outputs)
//   backward    G_in,r = col2im(Wᵀ δ_r)                  one strided-batched GEMM over rows
//   Jacobian    J[r, W] = δ_r X_sᵀ  (out × K),  J[r, b_o] = Σ_p δ_r[o, p]
// where δ_r (out × P) is the seed row r of sample s = r / group; the `group` rows of a sample
// share its X_s (one batched GEMM per residual index k < group).
//
// The layer owns a grow-only scratch buffer for the columns, at most max(K·P, workspace cap)
// elements: batches and seed rows are processed in chunks that fit it (workspace_elements()).
#pragma once

#include "lmtrain/core/buffer.h"
#include "lmtrain/core/image_shape.h"
#include "lmtrain/nn/layer.h"

namespace lmtrain {

template <typename T>
class Conv2d final : public Layer<T> {
 public:
  // Column scratch per layer on a GPU (16 MiB of float): large enough that the batched GEMMs run on
  // hundreds of samples at once, small next to a Jacobian slice.
  static constexpr std::size_t kDefaultWorkspaceElements = std::size_t{1} << 22;
  // The CPU's: 256 KiB of float, half of a core's L2 on current x86-64 parts.  The columns a chunk
  // writes are read back at once by its GEMMs, and a chunk that stays in cache saves the round
  // trip through memory (W4 on one thread: 0.15 s per LM step, against 0.19–0.22 s with 16 MiB).
  static constexpr std::size_t kCpuWorkspaceElements = std::size_t{1} << 16;
  // The cap Sequential gives a layer on `kind`.
  static constexpr std::size_t workspace_cap_for(DeviceKind kind) {
    return kind == DeviceKind::kCpu ? kCpuWorkspaceElements : kDefaultWorkspaceElements;
  }

  // `workspace_cap` bounds the column scratch (elements); one sample's K·P columns always fit.
  Conv2d(ImageShape input, std::size_t out_channels, Window2d window, bool bias,
         std::size_t workspace_cap = kDefaultWorkspaceElements);

  const WindowGeometry& geometry() const { return geometry_; }
  std::size_t out_channels() const { return out_channels_; }
  bool has_bias() const { return bias_; }

  std::string describe() const override;
  std::size_t inputs() const override { return geometry_.in_size(); }
  std::size_t outputs() const override { return out_channels_ * geometry_.out_spatial(); }
  std::size_t num_params() const override;
  std::size_t workspace_elements() const override;
  void initialize(std::span<T> params, Init init, Rng& rng) const override;
  void forward(Backend<T>& backend, const T* params, const T* in, std::size_t batch, T* out,
               T* saved) const override;
  T* backward(Backend<T>& backend, const T* params, const T* saved, std::size_t samples,
              std::size_t group, T* g_out, T* g_in) const override;
  void assemble_jacobian(Backend<T>& backend, const T* in, std::size_t samples, std::size_t group,
                         const T* g_out, T* j, std::size_t ldj) const override;

 private:
  // Samples (or seed rows) per pass so that their K × P column blocks fit the workspace.
  std::size_t chunk(std::size_t count) const;
  // The workspace, grown to hold `elements` on first need.
  T* workspace(Backend<T>& backend, std::size_t elements) const;

  WindowGeometry geometry_;
  std::size_t out_channels_;
  bool bias_;
  // A 1×1 kernel with stride 1 and no padding: im2col is the identity, so no scratch is used.
  bool pointwise_;
  std::size_t workspace_cap_;
  mutable DeviceBuffer<T> workspace_;
};

}  // namespace lmtrain
