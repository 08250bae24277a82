// Which device a process trains on: the one place that turns a device string ("cpu", "cuda",
// "cuda:N", "auto") and the process's node-local rank into a backend.  The command-line tool,
// the benchmark drivers and the C++ API all call it (DESIGN.md §9: one engine, several front
// ends), so a rank of `mpirun -np 4` on a node with 4 GPUs gets the same GPU everywhere.
//
// Rule (DESIGN.md §6, one rank per device):
//   "cpu"     the CPU backend.
//   "cuda"    CUDA device (node-local rank mod visible devices): ranks 0..3 of a node with 4
//             visible GPUs get cuda:0..3; 8 ranks on 4 GPUs share them round-robin.
//   "cuda:N"  device N, whatever the rank (explicit wins; with CUDA_VISIBLE_DEVICES set per rank
//             this is how a launcher pins devices itself).
//   "auto"    "cuda" when a CUDA device is visible, else "cpu".
// The node-local rank comes from the communicator (dist::Communicator::local_rank(), which asks
// MPI for the ranks sharing this node) or, without one, from the launcher's environment
// (dist::local_rank_from_environment()).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "lmtrain/backend/backend.h"

namespace lmtrain {

// What the user asked for, parsed.
struct DeviceRequest {
  enum class Kind { kCpu, kCuda, kAuto };
  Kind kind = Kind::kCpu;
  std::optional<int> index;  // cuda:N; empty: chosen from the node-local rank
};

// Parses "cpu" | "cuda" | "cuda:N" (N a decimal device index) | "auto".  Throws InvalidArgument
// naming the text and the accepted forms otherwise ("gpu", "cuda:", "cuda:-1", "cuda:x").
DeviceRequest parse_device(std::string_view text);

// The device one process trains on, and why.
struct DeviceChoice {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;       // CUDA device index among the visible ones; 0 for the CPU
  std::string reason;  // e.g. "node-local rank 3 mod 2 visible CUDA devices", "asked for cuda:1"

  // "cpu" or "cuda:N".
  std::string label() const;
};

// The CUDA device of the process with node-local rank `local_rank` (≥ 0) among
// `visible_devices` (> 0): local_rank mod visible_devices.  Throws InvalidArgument otherwise.
int cuda_device_for_local_rank(int local_rank, int visible_devices);

// The device `request` means for a process of node-local rank `local_rank` when
// `visible_cuda_devices` CUDA devices are visible and the CUDA backend was built
// (`cuda_built`).  Pure: no device is touched, so it is tested with made-up counts.  Throws
// InvalidArgument when "cuda" or "cuda:N" cannot be met (none visible, N out of range, a build
// without CUDA), saying how many devices are visible and what to do instead.
DeviceChoice choose_device(const DeviceRequest& request, int local_rank, int visible_cuda_devices,
                           bool cuda_built);

// parse_device + choose_device with this process's visible devices (cuda_device_count()).
DeviceChoice choose_device(std::string_view device, int local_rank);

// The device's float64 throughput over its float32 throughput: ½ on a CPU (a SIMD register holds
// half as many doubles), cuda_float64_rate(index) on a CUDA device.  What SystemPrecision::kAuto
// weighs (solve/solver_options.h).
double float64_rate(DeviceKind kind, int index);

// The backend of a choice: make_cpu_backend<T>() or make_cuda_backend<T>(choice.index).
template <typename T>
std::unique_ptr<Backend<T>> make_backend(const DeviceChoice& choice);

}  // namespace lmtrain
