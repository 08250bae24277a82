// The CPU backend's estimate of free host memory (src/backend/cpu/cpu_memory.h): /proc/meminfo's
// MemAvailable read without C++ streams.  On the H200 of 2026-11-27 every CPU step planned inside
// a Python process with torch loaded was refused with "0 B cpu … has available" while `lmtrain
// fit` on the same machine read 123 GiB (scripts/gpu-run.sh's torch and pinn stages).
#include "backend/cpu/cpu_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "lmtrain/backend/backend.h"

namespace lmtrain::cpu {
namespace {

// A meminfo of a 128 GiB machine, as Linux 6.x writes it (the kernel pads the numbers to a
// column; kB means KiB).
constexpr const char* kMeminfo =
    "MemTotal:       131891736 kB\n"
    "MemFree:        120003884 kB\n"
    "MemAvailable:   129543212 kB\n"
    "Buffers:          214724 kB\n"
    "Cached:          8403368 kB\n";

TEST(CpuMemory, ReadsMemAvailableInBytes) {
  EXPECT_EQ(meminfo_available_bytes(kMeminfo), std::size_t{129543212} * 1024);
  // The line anywhere, a tab or no padding, no newline at the end.
  EXPECT_EQ(meminfo_available_bytes("MemTotal: 9 kB\nMemAvailable:\t42 kB"), 42 * 1024);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable:7 kB\n"), 7 * 1024);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable:          0 kB\n"), 0);
}

TEST(CpuMemory, NoUsableLineIsNoFigure) {
  EXPECT_EQ(meminfo_available_bytes(""), std::nullopt);
  EXPECT_EQ(meminfo_available_bytes("MemTotal:       131891736 kB\nMemFree: 1 kB\n"), std::nullopt);
  EXPECT_EQ(meminfo_available_bytes("MemAvailable:   kB\n"), std::nullopt);
  EXPECT_EQ(meminfo_available_bytes("XMemAvailable: 5 kB\n"), std::nullopt);
  // More KiB than a size_t of bytes holds.
  EXPECT_EQ(meminfo_available_bytes("MemAvailable: 99999999999999999999 kB\n"), std::nullopt);
}

// This machine's figure against the same line read a second way (a C++ stream) moments apart:
// free memory moves, so within 5% or 256 MiB.
TEST(CpuMemory, TheBackendReportsThisMachinesMemAvailable) {
  std::ifstream meminfo("/proc/meminfo");
  if (!meminfo) GTEST_SKIP() << "no /proc/meminfo here";
  std::string line;
  std::size_t reference = 0;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    std::size_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") reference = kib * 1024;
  }
  ASSERT_GT(reference, 0u);
  const auto backend = make_cpu_backend<double>();
  const double read = static_cast<double>(backend->available_memory_bytes());
  const double ref = static_cast<double>(reference);
  EXPECT_NEAR(read, ref, std::max(0.05 * ref, 256.0 * (1 << 20)));
  EXPECT_NEAR(static_cast<double>(available_host_memory_bytes()), ref,
              std::max(0.05 * ref, 256.0 * (1 << 20)));
}

}  // namespace
}  // namespace lmtrain::cpu
