// GPU memory for the CUDA backend: cudaMalloc/cudaFree on one device.  cudaMalloc returns
// 256-byte aligned memory, more than MemoryResource's 64-byte promise.
#pragma once

#include <cstddef>

#include "lmtrain/core/buffer.h"

namespace lmtrain::cuda {

class DeviceMemory final : public MemoryResource {
 public:
  // limit_bytes > 0 makes this resource behave like a device of that size (as the CPU backend's
  // byte limit does): an allocation that would take the bytes in use above it throws
  // OutOfMemory without asking CUDA.  For tests of the planner and the trainer's slice halving.
  explicit DeviceMemory(int device, std::size_t limit_bytes = 0)
      : device_(device), limit_(limit_bytes) {}

  // Throws OutOfMemory (a MemoryPlanError) when the device is out of memory (with the requested
  // size and what cudaMemGetInfo reports) or the limit is reached, BackendError for any other
  // CUDA failure.
  void* allocate(std::size_t bytes) override;
  // cudaFree synchronizes the device; a failure here (a context already destroyed at process
  // exit) is ignored because a destructor cannot report it.
  void deallocate(void* p, std::size_t bytes) noexcept override;

  int device() const noexcept { return device_; }
  std::size_t limit_bytes() const noexcept { return limit_; }  // 0: none

 private:
  int device_;
  std::size_t limit_ = 0;
};

struct DeviceMemoryInfo {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};

// cudaMemGetInfo for `device` (made current on the calling thread).  Throws BackendError.
DeviceMemoryInfo device_memory_info(int device);

}  // namespace lmtrain::cuda
