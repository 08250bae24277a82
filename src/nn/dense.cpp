#include "lmtrain/nn/dense.h"

#include <fmt/format.h>

#include "parameter_init.h"

namespace lmtrain {

template <typename T>
std::string Dense<T>::describe() const {
  return fmt::format("dense {}→{}", in_, out_);
}

template <typename T>
void Dense<T>::initialize(std::span<T> params, Init init, Rng& rng) const {
  initialize_weights_and_bias(params.first(out_ * in_), params.subspan(out_ * in_, out_),
                              static_cast<double>(in_), static_cast<double>(out_), init, rng);
}

template <typename T>
void Dense<T>::forward(Backend<T>& backend, const T* params, const T* in, std::size_t batch, T* out,
                       T* /*saved*/) const {
  const T* w = params;
  const T* b = params + out_ * in_;
  backend.dense_forward(batch, out_, in_, in, w, b, out);
}

template <typename T>
T* Dense<T>::backward(Backend<T>& backend, const T* params, const T* /*saved*/, std::size_t samples,
                      std::size_t group, T* g_out, T* g_in) const {
  // G_in = G_out W: each residual row's sensitivity to this layer's input.
  backend.gemm(Trans::kNo, Trans::kNo, samples * group, in_, out_, T(1), g_out, out_, params, in_,
               T(0), g_in, in_);
  return g_in;
}

template <typename T>
void Dense<T>::assemble_jacobian(Backend<T>& backend, const T* in, std::size_t samples,
                                 std::size_t group, const T* g_out, T* j, std::size_t ldj) const {
  backend.dense_jacobian(samples * group, out_, in_, group, g_out, in, j + this->param_offset(),
                         ldj);
}

template class Dense<float>;
template class Dense<double>;

}  // namespace lmtrain
