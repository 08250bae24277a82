// Row-major ↔ column-major as in cuda_backend.cpp: row-major C = op(A) op(B) is column-major
// Cᵀ = op(B)ᵀ op(A)ᵀ, so the operands (and their strides) swap and the transpose flags do not.
#include "batched_gemm.h"

#include <cstdint>

#include "cuda_check.h"

namespace lmtrain::cuda {
namespace {

cublasOperation_t op(Trans t) {
  return t == Trans::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
}
std::int64_t i64(std::size_t v) {
  return static_cast<std::int64_t>(v);
}
long long ll(std::size_t v) {
  return static_cast<long long>(v);
}

cublasStatus_t batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, std::int64_t m,
                       std::int64_t n, std::int64_t k, const float* alpha, const float* a,
                       std::int64_t lda, long long sa, const float* b, std::int64_t ldb,
                       long long sb, const float* beta, float* c, std::int64_t ldc, long long sc,
                       std::int64_t count) {
  return cublasSgemmStridedBatched_64(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c,
                                      ldc, sc, count);
}
cublasStatus_t batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, std::int64_t m,
                       std::int64_t n, std::int64_t k, const double* alpha, const double* a,
                       std::int64_t lda, long long sa, const double* b, std::int64_t ldb,
                       long long sb, const double* beta, double* c, std::int64_t ldc, long long sc,
                       std::int64_t count) {
  return cublasDgemmStridedBatched_64(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c,
                                      ldc, sc, count);
}

}  // namespace

template <typename T>
void gemm_strided_batched(cublasHandle_t handle, Trans ta, Trans tb, std::size_t m, std::size_t n,
                          std::size_t k, T alpha, const T* a, std::size_t lda, std::size_t stride_a,
                          const T* b, std::size_t ldb, std::size_t stride_b, T beta, T* c,
                          std::size_t ldc, std::size_t stride_c, std::size_t count) {
  if (m == 0 || n == 0 || count == 0) return;
  CUBLAS_CHECK(batched(handle, op(tb), op(ta), i64(n), i64(m), i64(k), &alpha, b, i64(ldb),
                       ll(stride_b), a, i64(lda), ll(stride_a), &beta, c, i64(ldc), ll(stride_c),
                       i64(count)));
}

template void gemm_strided_batched<float>(cublasHandle_t, Trans, Trans, std::size_t, std::size_t,
                                          std::size_t, float, const float*, std::size_t,
                                          std::size_t, const float*, std::size_t, std::size_t,
                                          float, float*, std::size_t, std::size_t, std::size_t);
template void gemm_strided_batched<double>(cublasHandle_t, Trans, Trans, std::size_t, std::size_t,
                                           std::size_t, double, const double*, std::size_t,
                                           std::size_t, const double*, std::size_t, std::size_t,
                                           double, double*, std::size_t, std::size_t, std::size_t);

}  // namespace lmtrain::cuda
