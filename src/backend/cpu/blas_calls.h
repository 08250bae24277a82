// Typed row-major CBLAS calls shared by the CPU backend (cpu_backend.cpp) and its convolution
// kernels (cpu_conv.cpp), so each is written once for float and double.
#pragma once

#include <cblas.h>

#include <cstddef>

#include "lmtrain/backend/backend.h"

namespace lmtrain::cpu {

inline CBLAS_TRANSPOSE cblas_trans(Trans t) {
  return t == Trans::kYes ? CblasTrans : CblasNoTrans;
}
inline blasint bi(std::size_t v) {
  return static_cast<blasint>(v);
}

inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k,
                      float al, const float* a, blasint lda, const float* b, blasint ldb, float be,
                      float* c, blasint ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
}
inline void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k,
                      double al, const double* a, blasint lda, const double* b, blasint ldb,
                      double be, double* c, blasint ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
}

}  // namespace lmtrain::cpu
