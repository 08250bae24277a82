#include "device_memory.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "cuda_check.h"
#include "lmtrain/core/error.h"

namespace lmtrain::cuda {
namespace {

double mib(std::size_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

void* DeviceMemory::allocate(std::size_t bytes) {
  if (limit_ > 0 && bytes_in_use() + bytes > limit_)
    throw OutOfMemory(fmt::format(
        "CUDA allocation of {:.3f} MiB on device {} exceeds the backend's limit of {:.3f} MiB "
        "({:.3f} MiB in use; LMTRAIN_CUDA_MEMORY_LIMIT_BYTES or make_cuda_backend's limit); lower "
        "memory_budget_bytes or the batch size",
        mib(bytes), device_, mib(limit_), mib(bytes_in_use())));
  CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status == cudaSuccess) {
    count_allocation(bytes);
    return p;
  }
  (void)cudaGetLastError();  // clear the (non-sticky) error so later checks do not see it
  if (status == cudaErrorMemoryAllocation) {
    const DeviceMemoryInfo info = device_memory_info(device_);
    throw OutOfMemory(fmt::format(
        "CUDA allocation of {:.1f} MiB on device {} failed ({:.1f} MiB free of {:.1f} MiB); "
        "lower memory_budget_bytes or the batch size, use precision = \"float32\", or train on "
        "more devices",
        mib(bytes), device_, mib(info.free_bytes), mib(info.total_bytes)));
  }
  throw_cuda_error(status, "cudaMalloc", __FILE__, __LINE__);
}

void DeviceMemory::deallocate(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  count_deallocation(bytes);
  if (cudaSetDevice(device_) != cudaSuccess || cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}

DeviceMemoryInfo device_memory_info(int device) {
  CUDA_CHECK(cudaSetDevice(device));
  DeviceMemoryInfo info;
  CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

}  // namespace lmtrain::cuda
