// Host memory for the CPU backend: 64-byte aligned, and a planner-friendly estimate of free RAM.
#pragma once

#include <cstddef>

#include "lmtrain/core/buffer.h"

namespace lmtrain::cpu {

class HostMemory final : public MemoryResource {
 public:
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) noexcept override;
};

// MemAvailable from /proc/meminfo (what the kernel can give without swapping), or a conservative
// 1 GiB when that file cannot be read.
std::size_t available_host_memory_bytes();

}  // namespace lmtrain::cpu
