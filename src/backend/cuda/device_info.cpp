// Device discovery: the functions of lmtrain/backend/cuda_backend.h that need no backend.
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdlib>

#include "cuda_check.h"
#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/core/error.h"

namespace lmtrain {

bool cuda_backend_built() noexcept {
  return true;
}

int cuda_device_count() noexcept {
  int count = 0;
  // No driver (cudaErrorInsufficientDriver) or no device (cudaErrorNoDevice) both mean "none".
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

void cuda_profiler_collect(bool on) noexcept {
  if (cuda_device_count() == 0) return;
  if ((on ? cudaProfilerStart() : cudaProfilerStop()) != cudaSuccess) (void)cudaGetLastError();
}

std::string cuda_device_description(int device) {
  const int count = cuda_device_count();
  if (device < 0 || device >= count) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw BackendError(fmt::format(
        "CUDA device {} requested but {} device(s) are visible (CUDA_VISIBLE_DEVICES={}); pick "
        "a device in [0, {}) or use the cpu backend",
        device, count, visible != nullptr ? visible : "<unset>", count));
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB)", prop.name, prop.major, prop.minor,
                     prop.multiProcessorCount,
                     static_cast<double>(prop.totalGlobalMem) / (1 << 30));
}

double cuda_float64_rate(int device) {
  (void)cuda_device_description(device);  // the same check of the index, the same message
  int ratio = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&ratio, cudaDevAttrSingleToDoublePrecisionPerfRatio, device));
  return ratio > 0 ? 1.0 / ratio : 1.0;
}

}  // namespace lmtrain
