// The CPU backend's convolution and pooling kernels (backend.h documents each operation):
// OpenBLAS GEMMs and OpenMP loops over the per-element formulas of backend/conv_math.h, which the
// CUDA kernels share.  Defined in cpu_conv.cpp for float and double; CpuBackend forwards to them.
#pragma once

#include <cstddef>

#include "activation_loops.h"
#include "lmtrain/backend/backend.h"
#include "lmtrain/core/image_shape.h"

namespace lmtrain::cpu {

template <typename T>
void gemm_strided_batched(Trans ta, Trans tb, std::size_t m, std::size_t n, std::size_t k, T alpha,
                          const T* a, std::size_t lda, std::size_t stride_a, const T* b,
                          std::size_t ldb, std::size_t stride_b, T beta, T* c, std::size_t ldc,
                          std::size_t stride_c, std::size_t count);
template <typename T>
void im2col(const WindowGeometry& g, std::size_t samples, const T* x, T* cols);
// Backend::conv2d_forward by the direct kernel of `path` (conv_loops.h): each thread gathers one
// sample's columns into its own K × ldc part of `cols` and multiplies them in registers, the bias
// fused.  Returns false, having done nothing, where the GEMM path is the one to take: the baseline
// path, more than kDirectConvMaxOut output channels, or `cols` smaller than one sample's padded
// columns.
template <typename T>
bool conv2d_forward_direct(SimdPath path, const WindowGeometry& g, std::size_t out,
                           std::size_t samples, const T* x, const T* w, const T* bias, T* z,
                           T* cols, std::size_t cols_elements);
template <typename T>
void col2im(const WindowGeometry& g, std::size_t samples, const T* cols, T* x);
template <typename T>
void add_channel_bias(std::size_t samples, std::size_t channels, std::size_t spatial, const T* bias,
                      T* z);
template <typename T>
void channel_sums(std::size_t rows, std::size_t channels, std::size_t spatial, const T* g_out, T* j,
                  std::size_t ldj);
template <typename T>
void max_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y, T* argmax);
template <typename T>
void max_pool_backward(const WindowGeometry& g, std::size_t rows, std::size_t group,
                       const T* argmax, const T* g_out, T* g_in);
template <typename T>
void avg_pool_forward(const WindowGeometry& g, std::size_t samples, const T* x, T* y);
template <typename T>
void avg_pool_backward(const WindowGeometry& g, std::size_t rows, const T* g_out, T* g_in);

}  // namespace lmtrain::cpu
