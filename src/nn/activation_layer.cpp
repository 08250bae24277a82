#include "lmtrain/nn/activation_layer.h"

#include <fmt/format.h>

namespace lmtrain {

template <typename T>
std::string ActivationLayer<T>::describe() const {
  return fmt::format("{} ({})", to_string(f_), width_);
}

template <typename T>
void ActivationLayer<T>::forward(Backend<T>& backend, const T* /*params*/, const T* in,
                                 std::size_t batch, T* out, T* saved) const {
  backend.activation_forward(f_, batch * width_, in, out);
  if (saved != nullptr) backend.activation_derivative(f_, batch * width_, in, out, saved);
}

template <typename T>
T* ActivationLayer<T>::backward(Backend<T>& backend, const T* /*params*/, const T* saved,
                                std::size_t samples, std::size_t group, T* g_out,
                                T* /*g_in*/) const {
  backend.scale_row_groups(samples * group, width_, group, saved, g_out);
  return g_out;
}

template class ActivationLayer<float>;
template class ActivationLayer<double>;

}  // namespace lmtrain
