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
inline void blas_gemv(CBLAS_TRANSPOSE t, blasint m, blasint n, float al, const float* a,
                      blasint lda, const float* x, blasint incx, float be, float* y, blasint incy) {
  cblas_sgemv(CblasRowMajor, t, m, n, al, a, lda, x, incx, be, y, incy);
}
inline void blas_gemv(CBLAS_TRANSPOSE t, blasint m, blasint n, double al, const double* a,
                      blasint lda, const double* x, blasint incx, double be, double* y,
                      blasint incy) {
  cblas_dgemv(CblasRowMajor, t, m, n, al, a, lda, x, incx, be, y, incy);
}

// Row-major C (m × n) = α op(A) op(B) + β C for the shapes a small network's layers produce
// and GEMM handles worst: k = 1 (a one-input layer's forward pass, the seeds through a
// one-output layer: an outer product) and n = 1 or m = 1 (a one-output layer: a matrix-vector
// product).  OpenBLAS's GEMM pays its packing and β-scaling passes for them (W1: 27 µs for the
// 1000 × 20 × 1 product that the loop below does in a few); returns false for every other shape.
template <typename T>
bool degenerate_gemm(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, T alpha,
                     const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c,
                     std::size_t ldc) {
  if (k == 1) {
    // op(A)(i, 0) and op(B)(0, j).
    const std::size_t a_step = ta == Trans::kNo ? lda : 1, b_step = tb == Trans::kNo ? 1 : ldb;
#pragma omp parallel for if (m * n > (std::size_t{1} << 17))
    for (std::size_t i = 0; i < m; ++i) {
      const T ai = alpha * a[i * a_step];
      T* ci = c + i * ldc;
      if (beta == T(0)) {
        for (std::size_t j = 0; j < n; ++j) ci[j] = ai * b[j * b_step];
      } else {
        for (std::size_t j = 0; j < n; ++j) ci[j] = ai * b[j * b_step] + beta * ci[j];
      }
    }
    return true;
  }
  if (n == 1) {  // c (column, stride ldc) = α op(A) x, x = op(B)(·, 0)
    const bool no_a = ta == Trans::kNo;
    blas_gemv(cblas_trans(ta), bi(no_a ? m : k), bi(no_a ? k : m), alpha, a, bi(lda), b,
              bi(tb == Trans::kNo ? ldb : 1), beta, c, bi(ldc));
    return true;
  }
  if (m == 1) {  // c (row) = α op(B)ᵀ x, x = op(A)(0, ·)
    const bool no_b = tb == Trans::kNo;
    blas_gemv(no_b ? CblasTrans : CblasNoTrans, bi(no_b ? k : n), bi(no_b ? n : k), alpha, b,
              bi(ldb), a, bi(ta == Trans::kNo ? 1 : lda), beta, c, 1);
    return true;
  }
  return false;
}

}  // namespace lmtrain::cpu
