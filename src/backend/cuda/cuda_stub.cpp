// Compiled instead of the CUDA backend when lmtrain is built without CUDA, so that
// lmtrain/backend/cuda_backend.h has the same meaning in every build.
#include <string>

#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/core/error.h"

namespace lmtrain {
namespace {

[[noreturn]] void throw_not_built() {
  throw BackendError(
      "lmtrain was built without CUDA; reconfigure with -DLMTRAIN_CUDA=ON on a machine with the "
      "CUDA toolkit (nvcc, cuBLAS, cuSOLVER) to use a GPU, or use the cpu backend");
}

}  // namespace

bool cuda_backend_built() noexcept {
  return false;
}

int cuda_device_count() noexcept {
  return 0;
}

void cuda_profiler_collect(bool /*on*/) noexcept {}

std::string cuda_device_description(int /*device*/) {
  throw_not_built();
}

double cuda_float64_rate(int /*device*/) {
  throw_not_built();
}

template <typename T>
std::unique_ptr<Backend<T>> make_cuda_backend(int /*device*/) {
  throw_not_built();
}

template <typename T>
std::unique_ptr<Backend<T>> make_cuda_backend(int /*device*/, std::size_t /*memory_limit_bytes*/) {
  throw_not_built();
}

template <typename T>
std::unique_ptr<Backend<T>> make_cuda_backend_on_stream(int /*device*/, void* /*stream*/) {
  throw_not_built();
}

template std::unique_ptr<Backend<float>> make_cuda_backend_on_stream<float>(int, void*);
template std::unique_ptr<Backend<double>> make_cuda_backend_on_stream<double>(int, void*);
template std::unique_ptr<Backend<float>> make_cuda_backend<float>(int);
template std::unique_ptr<Backend<double>> make_cuda_backend<double>(int);
template std::unique_ptr<Backend<float>> make_cuda_backend<float>(int, std::size_t);
template std::unique_ptr<Backend<double>> make_cuda_backend<double>(int, std::size_t);

}  // namespace lmtrain
