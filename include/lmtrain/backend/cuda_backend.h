// The CUDA backend: cuBLAS and cuSOLVER (64-bit APIs) for the dense algebra, lmtrain's own
// kernels for everything elementwise, the loss and the Jacobian assembly.  All work of one
// backend is queued on one CUDA stream of one device; only scalars (losses, norms, factorization
// status) come back to the host.
//
// These declarations exist in every build.  When lmtrain was built without CUDA
// (LMTRAIN_HAVE_CUDA undefined, or -DLMTRAIN_CUDA=OFF) cuda_device_count() returns 0 and the
// other functions throw lmtrain::BackendError saying so, so callers need no #ifdef.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "lmtrain/backend/backend.h"

namespace lmtrain {

// True when this build of lmtrain contains the CUDA backend.
bool cuda_backend_built() noexcept;

// Number of CUDA devices visible to this process (honours CUDA_VISIBLE_DEVICES); 0 when lmtrain
// was built without CUDA, when no driver is installed, or when no device is visible.  Never throws.
int cuda_device_count() noexcept;

// e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)".  Throws BackendError for a device
// index outside [0, cuda_device_count()).
std::string cuda_device_description(int device);

// Turns the CUDA profiler's collection on or off for the whole process (cudaProfilerStart/Stop):
// a profiler started with it off (Nsight Compute's --profile-from-start off) records only the
// kernels launched in between — a benchmark's steps after its warm-up.  Does nothing where
// lmtrain was built without CUDA or no profiler is attached.
void cuda_profiler_collect(bool on) noexcept;

// The device's float64 throughput over its float32 throughput, from the driver's
// cudaDevAttrSingleToDoublePrecisionPerfRatio: ½ on P100, V100, A100 and H100, 1/32–1/64 on
// consumer GPUs.  Throws BackendError as cuda_device_description does.
double cuda_float64_rate(int device);

// A backend bound to `device` (an index among the visible devices) with its own stream, cuBLAS
// and cuSOLVER handles.  Throws BackendError when the device does not exist or cannot be
// initialized.  Instantiated for float and double.
//
// When the environment sets LMTRAIN_CUDA_MEMORY_LIMIT_BYTES (a positive integer), the backend
// behaves like a device of that many bytes, as the overload below does; its name() says so.
// This is how a run through the command-line tool exercises the planner and the trainer's
// slice halving on a large GPU.  Any other value throws InvalidArgument.
template <typename T>
std::unique_ptr<Backend<T>> make_cuda_backend(int device = 0);

// The same, behaving like a device of `memory_limit_bytes`: available_memory_bytes() is at most
// the limit minus the bytes in use, and an allocation beyond it throws OutOfMemory (as
// make_cpu_backend(limit) does; 0: no limit, not even the environment's).  cuBLAS', cuSOLVER's
// and the CUDA context's own memory are not counted; the solver workspaces lmtrain allocates are.
// A float64 sibling for mixed precision (make_sibling_backend) takes the environment's limit,
// not this one, and counts its own bytes.
template <typename T>
std::unique_ptr<Backend<T>> make_cuda_backend(int device, std::size_t memory_limit_bytes);

// A backend that queues its work on `stream`, a stream of `device` that the caller owns and keeps
// alive longer than the backend (PyTorch's current stream, say: lmtrain.torch hands it over, so
// that the step is ordered after the kernels that computed its Jacobian slices and before those
// that read the parameters it updates, with no synchronization of the device and no context or
// stream of lmtrain's own).  The backend never destroys `stream`; its destructor waits for the
// stream's work, not the device's.  Memory limit as make_cuda_backend(device).  `stream` may be
// cudaStreamLegacy ((void*)1), the legacy default stream: PyTorch's default stream, whose
// `cuda_stream` reads 0 — a value this function refuses, as it could mean "none".
template <typename T>
std::unique_ptr<Backend<T>> make_cuda_backend_on_stream(int device, void* stream);

}  // namespace lmtrain
