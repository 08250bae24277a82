// The CPU's direct convolution forward kernel: Z (out × P) = W (out × K) · C (+ bias) for one
// sample's columns C (K × P, row stride ldc), with the out × (a few vectors of P) accumulators in
// registers.  OpenBLAS runs W4's per-sample products (8 × 169 × 16, 4 × 25 × 128) at a third of its
// large-GEMM rate (packing both operands and scaling C for each call); this kernel reads the
// columns once per eight rows of W straight from L1.  Compiled for AVX2 + FMA and for AVX-512 and
// dispatched like the activation loops (activation_loops.h); the baseline build keeps the GEMM.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lmtrain::cpu {

// Rows of the columns are padded to a multiple of this many bytes (the widest vector), so that
// every vector load of a row stays inside it; the padding must hold zeros or finite values.
inline constexpr std::size_t kConvColumnAlignment = 64;

// ldc for P columns of T: P rounded up to kConvColumnAlignment bytes.
template <typename T>
constexpr std::size_t conv_column_stride(std::size_t P) {
  constexpr std::size_t lanes = kConvColumnAlignment / sizeof(T);
  return (P + lanes - 1) / lanes * lanes;
}

// conv_columns_product: Z (out × P, row-major) = W (out × K) · C + bias (null: none), C's rows at
// stride ldc = conv_column_stride<T>(P).  conv_gather_columns: C[k, p] = x[index[k·P + p]], or 0
// where the index is `in` and `padded` (the im2col table of cpu_conv.cpp); the tails are left as
// they are.
#define LMTRAIN_CONV_LOOPS_DECLARE(isa)                                                            \
  namespace isa {                                                                                  \
  template <typename T>                                                                            \
  void conv_columns_product(std::size_t out, std::size_t K, std::size_t P, std::size_t ldc,        \
                            const T* cols, const T* w, const T* bias, T* z);                       \
  template <typename T>                                                                            \
  void conv_gather_columns(const std::uint32_t* index, std::size_t in, bool padded, std::size_t K, \
                           std::size_t P, std::size_t ldc, const T* x, T* cols);                   \
  }
LMTRAIN_CONV_LOOPS_DECLARE(avx2)
LMTRAIN_CONV_LOOPS_DECLARE(avx512)
#undef LMTRAIN_CONV_LOOPS_DECLARE

}  // namespace lmtrain::cpu
