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

// One sample's columns through cpu_conv.cpp's im2col table (K·P entries: the input element each
// column entry copies, or `in` for the padding where `padded`): C[k, p] at cols + k·ldc + p.  The
// one gather of im2col (ldc = P) and of the direct kernel (ldc = conv_column_stride), each build
// compiling its own copy: internal linkage, because an inline function that TUs built with
// different -m flags share may be linked to the AVX-512 copy on any CPU.
namespace {
template <typename T>
void gather_columns(const std::uint32_t* index, std::size_t in, bool padded, std::size_t K,
                    std::size_t P, std::size_t ldc, const T* __restrict x, T* __restrict cols) {
  for (std::size_t k = 0; k < K; ++k) {
    const std::uint32_t* ik = index + k * P;
    T* ck = cols + k * ldc;
    if (padded) {
      for (std::size_t p = 0; p < P; ++p) ck[p] = ik[p] < in ? x[ik[p]] : T(0);
    } else {
      for (std::size_t p = 0; p < P; ++p) ck[p] = x[ik[p]];
    }
  }
}
}  // namespace

// conv_columns_product: Z (out × P, row-major) = W (out × K) · C + bias (null: none), C's rows at
// stride ldc = conv_column_stride<T>(P).  conv_gather_columns: gather_columns compiled for the
// build (the tails past P are left as they are).
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
