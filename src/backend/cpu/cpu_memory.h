// Host memory for the CPU backend: 64-byte aligned, and a planner-friendly estimate of free RAM.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "lmtrain/core/buffer.h"

namespace lmtrain::cpu {

// With a limit, allocations that would take the bytes in use above it throw OutOfMemory: a
// device of that size, for testing the planner and the trainer's recovery on any machine.
class HostMemory final : public MemoryResource {
 public:
  explicit HostMemory(std::size_t limit_bytes = 0) : limit_(limit_bytes) {}
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p, std::size_t bytes) noexcept override;

  std::size_t limit_bytes() const noexcept { return limit_; }  // 0: none

 private:
  std::size_t limit_ = 0;
};

// MemAvailable from /proc/meminfo (what the kernel can give without swapping), or a conservative
// 1 GiB when that file cannot be read.
std::size_t available_host_memory_bytes();

// The "MemAvailable:" line of a /proc/meminfo text in bytes (the kernel writes kB, meaning KiB);
// nullopt when the text has no such line or its number is missing or too large.
std::optional<std::size_t> meminfo_available_bytes(std::string_view meminfo);

}  // namespace lmtrain::cpu
