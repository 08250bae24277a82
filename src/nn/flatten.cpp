#include "lmtrain/nn/flatten.h"

#include <fmt/format.h>

namespace lmtrain {

template <typename T>
std::string Flatten<T>::describe() const {
  return fmt::format("flatten ({})", width_);
}

template <typename T>
void Flatten<T>::forward(Backend<T>& backend, const T* /*params*/, const T* in, std::size_t batch,
                         T* out, T* /*saved*/) const {
  backend.copy(in, out, batch * width_);
}

template <typename T>
T* Flatten<T>::backward(Backend<T>& /*backend*/, const T* /*params*/, const T* /*saved*/,
                        std::size_t /*samples*/, std::size_t /*group*/, T* g_out,
                        T* /*g_in*/) const {
  return g_out;
}

template class Flatten<float>;
template class Flatten<double>;

}  // namespace lmtrain
