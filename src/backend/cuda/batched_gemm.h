// Strided-batched GEMM on row-major matrices through cuBLAS's 64-bit API (Backend<T>::
// gemm_strided_batched), used by the convolution layers: one launch for every sample's GEMM.
#pragma once

#include <cublas_v2.h>

#include <cstddef>

#include "lmtrain/backend/backend.h"

namespace lmtrain::cuda {

template <typename T>
void gemm_strided_batched(cublasHandle_t handle, Trans ta, Trans tb, std::size_t m, std::size_t n,
                          std::size_t k, T alpha, const T* a, std::size_t lda, std::size_t stride_a,
                          const T* b, std::size_t ldb, std::size_t stride_b, T beta, T* c,
                          std::size_t ldc, std::size_t stride_c, std::size_t count);

}  // namespace lmtrain::cuda
