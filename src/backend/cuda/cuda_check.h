// Error checking for CUDA runtime, cuBLAS and cuSOLVER calls.  A failed call throws
// lmtrain::BackendError naming the call, its file:line and the library's own error name and
// text, e.g. "cudaMemcpyAsync(...) failed at cuda_backend.cpp:120: cudaErrorIllegalAddress (an
// illegal memory access was encountered)".  The throwing functions live in cuda_check.cpp so
// that kernel (.cu) files stay free of fmt and <string>.
//
// These checks are for calls that should never fail; recoverable numerical events (a matrix that
// is not positive definite) come back through cuSOLVER's `info`, never through an exception.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

namespace lmtrain::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                   int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);
[[noreturn]] void throw_cusolver_error(cusolverStatus_t status, const char* call, const char* file,
                                       int line);

// cuSOLVER has no status-to-string function of its own.
const char* cusolver_status_name(cusolverStatus_t status) noexcept;

}  // namespace lmtrain::cuda

#define CUDA_CHECK(call)                                                             \
  do {                                                                               \
    const cudaError_t lmtrain_status_ = (call);                                      \
    if (lmtrain_status_ != cudaSuccess)                                              \
      ::lmtrain::cuda::throw_cuda_error(lmtrain_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(call)                                                             \
  do {                                                                                 \
    const cublasStatus_t lmtrain_status_ = (call);                                     \
    if (lmtrain_status_ != CUBLAS_STATUS_SUCCESS)                                      \
      ::lmtrain::cuda::throw_cublas_error(lmtrain_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define CUSOLVER_CHECK(call)                                                             \
  do {                                                                                   \
    const cusolverStatus_t lmtrain_status_ = (call);                                     \
    if (lmtrain_status_ != CUSOLVER_STATUS_SUCCESS)                                      \
      ::lmtrain::cuda::throw_cusolver_error(lmtrain_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports a bad launch configuration at once (asynchronous faults inside
// the kernel surface at the next synchronizing call, which is checked too).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
