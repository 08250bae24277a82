// make_sibling_backend: the same device in another precision (mixed precision's float64 side).
#include "cpu/cpu_threads.h"
#include "lmtrain/backend/backend.h"
#include "lmtrain/backend/cuda_backend.h"

namespace lmtrain {

template <typename S>
std::unique_ptr<LinearAlgebra<S>> make_sibling_backend(const DeviceQueue& device) {
  if (device.device_kind() == DeviceKind::kCuda) return make_cuda_backend<S>(device.device_index());
  return cpu::make_cpu_sibling<S>(device);  // counting its threads with `device`'s
}

template std::unique_ptr<LinearAlgebra<double>> make_sibling_backend<double>(const DeviceQueue&);
template std::unique_ptr<LinearAlgebra<float>> make_sibling_backend<float>(const DeviceQueue&);

}  // namespace lmtrain
