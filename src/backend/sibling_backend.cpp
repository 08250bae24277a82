// make_sibling_backend: the same device in another precision (mixed precision's float64 side).
#include "cpu/cpu_threads.h"
#include "lmtrain/backend/backend.h"
#include "lmtrain/backend/cuda_backend.h"

namespace lmtrain {

template <typename S, typename T>
std::unique_ptr<Backend<S>> make_sibling_backend(Backend<T>& backend) {
  if (backend.device_kind() == DeviceKind::kCuda)
    return make_cuda_backend<S>(backend.device_index());
  return cpu::make_cpu_sibling<S>(backend);  // counting its threads with `backend`'s
}

template std::unique_ptr<Backend<double>> make_sibling_backend<double, float>(Backend<float>&);
template std::unique_ptr<Backend<float>> make_sibling_backend<float, double>(Backend<double>&);
template std::unique_ptr<Backend<float>> make_sibling_backend<float, float>(Backend<float>&);
template std::unique_ptr<Backend<double>> make_sibling_backend<double, double>(Backend<double>&);

}  // namespace lmtrain
