#include "lmtrain/nn/conv2d.h"

#include <fmt/format.h>

#include <algorithm>

#include "parameter_init.h"

namespace lmtrain {
template <typename T>
Conv2d<T>::Conv2d(ImageShape input, std::size_t out_channels, Window2d window, bool bias,
                  std::size_t workspace_cap)
    : geometry_(make_window_geometry(input, window)),
      out_channels_(out_channels),
      bias_(bias),
      pointwise_(window == Window2d{}),
      workspace_cap_(workspace_cap) {}

template <typename T>
std::string Conv2d<T>::describe() const {
  const WindowGeometry& g = geometry_;
  return fmt::format("conv2d {}→{} k{}×{} s{}×{} p{}×{}{} ({}×{}×{}→{}×{}×{})", g.channels,
                     out_channels_, g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.pad_h,
                     g.pad_w, bias_ ? "" : " no-bias", g.channels, g.height, g.width, out_channels_,
                     g.out_height, g.out_width);
}

template <typename T>
std::size_t Conv2d<T>::num_params() const {
  return out_channels_ * geometry_.patch_size() + (bias_ ? out_channels_ : 0);
}

template <typename T>
std::size_t Conv2d<T>::workspace_elements() const {
  if (pointwise_) return 0;
  const std::size_t per_sample = geometry_.patch_size() * geometry_.out_spatial();
  return per_sample * std::max<std::size_t>(1, workspace_cap_ / per_sample);
}

template <typename T>
std::size_t Conv2d<T>::chunk(std::size_t count) const {
  const std::size_t per_sample = geometry_.patch_size() * geometry_.out_spatial();
  return std::clamp<std::size_t>(workspace_cap_ / per_sample, 1, std::max<std::size_t>(count, 1));
}

template <typename T>
T* Conv2d<T>::workspace(Backend<T>& backend, std::size_t elements) const {
  workspace_.reserve(backend.memory(), elements);
  return workspace_.data();
}

template <typename T>
void Conv2d<T>::initialize(std::span<T> params, Init init, Rng& rng) const {
  const std::size_t weights = out_channels_ * geometry_.patch_size();
  const double receptive = static_cast<double>(geometry_.kernel_h * geometry_.kernel_w);
  initialize_weights_and_bias(params.first(weights),
                              params.subspan(weights, bias_ ? out_channels_ : 0),
                              static_cast<double>(geometry_.channels) * receptive,
                              static_cast<double>(out_channels_) * receptive, init, rng);
}

template <typename T>
void Conv2d<T>::forward(Backend<T>& backend, const T* params, const T* in, std::size_t batch,
                        T* out, T* /*saved*/) const {
  const std::size_t K = geometry_.patch_size(), P = geometry_.out_spatial();
  const std::size_t O = out_channels_;
  const T* bias = bias_ ? params + O * K : nullptr;
  if (pointwise_) {  // Z_s (O × P) = W (O × K) · X_s (K × P): the input is its own columns
    backend.gemm_strided_batched(Trans::kNo, Trans::kNo, O, P, K, T(1), params, K, 0, in, P, K * P,
                                 T(0), out, P, O * P, batch);
    if (bias != nullptr) backend.add_channel_bias(batch, O, P, bias, out);
    return;
  }
  const std::size_t cols = chunk(batch) * K * P;
  backend.conv2d_forward(geometry_, O, batch, in, params, bias, out, workspace(backend, cols),
                         cols);
}

template <typename T>
T* Conv2d<T>::backward(Backend<T>& backend, const T* params, const T* /*saved*/,
                       std::size_t samples, std::size_t group, T* g_out, T* g_in) const {
  const std::size_t K = geometry_.patch_size(), P = geometry_.out_spatial();
  const std::size_t O = out_channels_, in_size = geometry_.in_size();
  const std::size_t rows = samples * group;
  const std::size_t per = chunk(rows);
  T* cols = pointwise_ ? nullptr : workspace(backend, per * K * P);
  for (std::size_t first = 0; first < rows; first += per) {
    const std::size_t count = std::min(per, rows - first);
    T* gx = g_in + first * in_size;
    // Column seeds Wᵀ δ_r (K × P), then their adjoint im2col onto the input (C × H × W); for a
    // pointwise kernel the column seeds are the input seeds.
    backend.gemm_strided_batched(Trans::kYes, Trans::kNo, K, P, O, T(1), params, K, 0,
                                 g_out + first * O * P, P, O * P, T(0), pointwise_ ? gx : cols, P,
                                 K * P, count);
    if (!pointwise_) backend.col2im(geometry_, count, cols, gx);
  }
  return g_in;
}

template <typename T>
void Conv2d<T>::assemble_jacobian(Backend<T>& backend, const T* in, std::size_t samples,
                                  std::size_t group, const T* g_out, T* j, std::size_t ldj) const {
  const std::size_t K = geometry_.patch_size(), P = geometry_.out_spatial();
  const std::size_t O = out_channels_, in_size = geometry_.in_size();
  T* jw = j + this->param_offset();
  const std::size_t per = chunk(samples);
  T* cols = pointwise_ ? nullptr : workspace(backend, per * K * P);
  for (std::size_t first = 0; first < samples; first += per) {
    const std::size_t count = std::min(per, samples - first);
    const T* x = in + first * in_size;
    if (!pointwise_) backend.im2col(geometry_, count, x, cols);
    // For residual index k, over the chunk's samples s: J[s·group + k, W] = δ_{s·group+k} X_sᵀ.
    for (std::size_t k = 0; k < group; ++k) {
      const std::size_t row = first * group + k;
      backend.gemm_strided_batched(Trans::kNo, Trans::kYes, O, K, P, T(1), g_out + row * O * P, P,
                                   group * O * P, pointwise_ ? x : cols, P, K * P, T(0),
                                   jw + row * ldj, K, group * ldj, count);
    }
  }
  if (bias_) backend.channel_sums(samples * group, O, P, g_out, jw + O * K, ldj);
}

template class Conv2d<float>;
template class Conv2d<double>;

}  // namespace lmtrain
