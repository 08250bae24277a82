#include "cpu_memory.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "lmtrain/core/error.h"

namespace lmtrain::cpu {

void* HostMemory::allocate(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  const std::size_t used = bytes_in_use();
  if (limit_ > 0 && used + bytes > limit_)
    throw OutOfMemory(fmt::format(
        "host allocation of {:.3f} MiB exceeds the backend's limit of {:.3f} MiB ({:.3f} MiB in "
        "use); lower memory_budget_bytes or the batch size",
        static_cast<double>(bytes) / (1 << 20), static_cast<double>(limit_) / (1 << 20),
        static_cast<double>(used) / (1 << 20)));
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) {
    throw OutOfMemory(
        fmt::format("host allocation of {:.1f} MiB failed ({:.1f} MiB reported available); lower "
                    "memory_budget_bytes or the batch size",
                    static_cast<double>(bytes) / (1 << 20),
                    static_cast<double>(available_host_memory_bytes()) / (1 << 20)));
  }
  count_allocation(bytes);
  return p;
}

void HostMemory::deallocate(void* p, std::size_t bytes) noexcept {
  if (p != nullptr) count_deallocation(bytes);
  std::free(p);
}

std::size_t available_host_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    std::size_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return std::size_t{1} << 30;
}

}  // namespace lmtrain::cpu
