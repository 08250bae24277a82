#include "lmtrain/nn/pool2d.h"

#include <fmt/format.h>

#include <type_traits>

#include "lmtrain/core/error.h"

namespace lmtrain {

template <typename T>
Pool2d<T>::Pool2d(PoolKind kind, ImageShape input, Window2d window)
    : kind_(kind), geometry_(make_window_geometry(input, window)) {
  constexpr std::size_t kExactFloatIntegers = std::size_t{1} << 24;
  if (std::is_same_v<T, float> && kind_ == PoolKind::kMax && input.size() > kExactFloatIntegers)
    throw InvalidArgument(fmt::format(
        "max_pool2d over {}×{}×{} = {} values per sample: in float precision its argmax indices "
        "are exact only up to 2^24 = {}; use precision \"double\" or a smaller input",
        input.channels, input.height, input.width, input.size(), kExactFloatIntegers));
}

template <typename T>
std::string Pool2d<T>::describe() const {
  const WindowGeometry& g = geometry_;
  return fmt::format("{} k{}×{} s{}×{} p{}×{} ({}×{}×{}→{}×{}×{})",
                     kind_ == PoolKind::kMax ? "max_pool2d" : "avg_pool2d", g.kernel_h, g.kernel_w,
                     g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.channels, g.height, g.width,
                     g.channels, g.out_height, g.out_width);
}

template <typename T>
void Pool2d<T>::forward(Backend<T>& backend, const T* /*params*/, const T* in, std::size_t batch,
                        T* out, T* saved) const {
  if (kind_ == PoolKind::kMax)
    backend.max_pool_forward(geometry_, batch, in, out, saved);
  else
    backend.avg_pool_forward(geometry_, batch, in, out);
}

template <typename T>
T* Pool2d<T>::backward(Backend<T>& backend, const T* /*params*/, const T* saved,
                       std::size_t samples, std::size_t group, T* g_out, T* g_in) const {
  if (kind_ == PoolKind::kMax)
    backend.max_pool_backward(geometry_, samples * group, group, saved, g_out, g_in);
  else
    backend.avg_pool_backward(geometry_, samples * group, g_out, g_in);
  return g_in;
}

template class Pool2d<float>;
template class Pool2d<double>;

}  // namespace lmtrain
