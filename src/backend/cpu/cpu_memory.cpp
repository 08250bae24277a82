#include "cpu_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
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

std::optional<std::size_t> meminfo_available_bytes(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  for (std::size_t at = 0; at < meminfo.size();) {
    const std::size_t end = std::min(meminfo.find('\n', at), meminfo.size());
    const std::string_view line = meminfo.substr(at, end - at);
    at = end + 1;
    if (line.substr(0, kKey.size()) != kKey) continue;
    std::size_t i = kKey.size();
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t kib = 0, digits = 0;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i, ++digits) {
      if (kib > (std::numeric_limits<std::size_t>::max() / 1024 - 9) / 10) return std::nullopt;
      kib = kib * 10 + static_cast<std::size_t>(line[i] - '0');
    }
    if (digits == 0) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

std::size_t available_host_memory_bytes() {
  // Read whole with the C library and parsed by hand: no C++ stream, so nothing a host program
  // does to the C++ global locale (an interpreter embedding lmtrain) can change how it reads.
  std::string text;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char chunk[4096];
    std::size_t got = 0;
    while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0) text.append(chunk, got);
    std::fclose(f);
  }
  return meminfo_available_bytes(text).value_or(std::size_t{1} << 30);
}

}  // namespace lmtrain::cpu
