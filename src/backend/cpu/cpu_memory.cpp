#include "cpu_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
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
    std::string_view line = meminfo.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(std::min(line.find_first_not_of(" \t", kKey.size()), line.size()));
    std::size_t kib = 0;
    const auto [rest, error] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (error != std::errc{} || kib > std::numeric_limits<std::size_t>::max() / 1024)
      return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

std::size_t available_host_memory_bytes() {
  // Read whole with the C library and parsed by std::from_chars, not with C++ streams: on the H200
  // of 2026-11-27 the stream read (`>> kib`) gave 0 inside a Python process holding PyTorch while
  // `lmtrain fit` on the same machine read 123 GiB (why was not found; tests/backend/
  // cpu_memory_test.cpp, scripts/gpu-python/host_memory.py).
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
