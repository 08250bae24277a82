// GPU memory for the CUDA backend: cudaMalloc/cudaFree on one device.  cudaMalloc returns
// 256-byte aligned memory, more than MemoryResource's 64-byte promise.
#pragma once

#include <cstddef>

#include "lmtrain/core/buffer.h"

namespace lmtrain::cuda {

class DeviceMemory final : public MemoryResource {
 public:
  explicit DeviceMemory(int device) : device_(device) {}

  // Throws MemoryPlanError when the device is out of memory (with the requested size and what
  // cudaMemGetInfo reports), BackendError for any other CUDA failure.
  void* allocate(std::size_t bytes) override;
  // cudaFree synchronizes the device; a failure here (a context already destroyed at process
  // exit) is ignored because a destructor cannot report it.
  void deallocate(void* p, std::size_t bytes) noexcept override;

  int device() const noexcept { return device_; }

 private:
  int device_;
};

struct DeviceMemoryInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};

// cudaMemGetInfo for `device` (made current on the calling thread).  Throws BackendError.
DeviceMemoryInfo device_memory_info(int device);

}  // namespace lmtrain::cuda
