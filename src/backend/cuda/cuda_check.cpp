#include "cuda_check.h"

#include <fmt/format.h>

#include <string_view>

#include "lmtrain/core/error.h"

namespace lmtrain::cuda {
namespace {

// __FILE__ is an absolute path under most generators; the file name is enough to find the call.
std::string_view base_name(const char* file) {
  const std::string_view path(file);
  const auto slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

// Allocation failures inside a library call (its workspace) are OutOfMemory, which the trainer
// answers by halving the Jacobian slice; every other failure is a BackendError.
void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaErrorMemoryAllocation)
    throw OutOfMemory(fmt::format("{} failed at {}:{}: {} ({})", call, base_name(file), line,
                                  cudaGetErrorName(status), cudaGetErrorString(status)));
  throw BackendError(fmt::format("{} failed at {}:{}: {} ({})", call, base_name(file), line,
                                 cudaGetErrorName(status), cudaGetErrorString(status)));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    throw OutOfMemory(fmt::format("{} failed at {}:{}: {} ({})", call, base_name(file), line,
                                  cublasGetStatusName(status), cublasGetStatusString(status)));
  throw BackendError(fmt::format("{} failed at {}:{}: {} ({})", call, base_name(file), line,
                                 cublasGetStatusName(status), cublasGetStatusString(status)));
}

void throw_cusolver_error(cusolverStatus_t status, const char* call, const char* file, int line) {
  if (status == CUSOLVER_STATUS_ALLOC_FAILED)
    throw OutOfMemory(fmt::format("{} failed at {}:{}: {} (status {})", call, base_name(file), line,
                                  cusolver_status_name(status), static_cast<int>(status)));
  throw BackendError(fmt::format("{} failed at {}:{}: {} (status {})", call, base_name(file), line,
                                 cusolver_status_name(status), static_cast<int>(status)));
}

const char* cusolver_status_name(cusolverStatus_t status) noexcept {
  switch (status) {
    case CUSOLVER_STATUS_SUCCESS:
      return "CUSOLVER_STATUS_SUCCESS";
    case CUSOLVER_STATUS_NOT_INITIALIZED:
      return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED:
      return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE:
      return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH:
      return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_MAPPING_ERROR:
      return "CUSOLVER_STATUS_MAPPING_ERROR";
    case CUSOLVER_STATUS_EXECUTION_FAILED:
      return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR:
      return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case CUSOLVER_STATUS_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_NOT_SUPPORTED";
    case CUSOLVER_STATUS_ZERO_PIVOT:
      return "CUSOLVER_STATUS_ZERO_PIVOT";
    case CUSOLVER_STATUS_INVALID_LICENSE:
      return "CUSOLVER_STATUS_INVALID_LICENSE";
    case CUSOLVER_STATUS_INVALID_WORKSPACE:
      return "CUSOLVER_STATUS_INVALID_WORKSPACE";
    default:
      return "cusolverStatus_t (unlisted value)";
  }
}

}  // namespace lmtrain::cuda
