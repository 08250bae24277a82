// Host-side launchers of the convolution and pooling kernels (conv_kernels.cu), one launch each
// over a whole batch of samples or seed rows; backend.h documents every operation.  They enqueue
// on `stream` and return at once; pointers are device pointers.  The per-element formulas are
// backend/conv_math.h, shared with the CPU backend.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "lmtrain/core/image_shape.h"

namespace lmtrain::cuda {

template <typename T>
void im2col(cudaStream_t stream, const WindowGeometry& g, std::size_t samples, const T* x, T* cols);
template <typename T>
void col2im(cudaStream_t stream, const WindowGeometry& g, std::size_t samples, const T* cols, T* x);
template <typename T>
void add_channel_bias(cudaStream_t stream, std::size_t samples, std::size_t channels,
                      std::size_t spatial, const T* bias, T* z);
template <typename T>
void channel_sums(cudaStream_t stream, std::size_t rows, std::size_t channels, std::size_t spatial,
                  const T* g_out, T* j, std::size_t ldj);
template <typename T>
void max_pool_forward(cudaStream_t stream, const WindowGeometry& g, std::size_t samples, const T* x,
                      T* y, T* argmax);
template <typename T>
void max_pool_backward(cudaStream_t stream, const WindowGeometry& g, std::size_t rows,
                       std::size_t group, const T* argmax, const T* g_out, T* g_in);
template <typename T>
void avg_pool_forward(cudaStream_t stream, const WindowGeometry& g, std::size_t samples, const T* x,
                      T* y);
template <typename T>
void avg_pool_backward(cudaStream_t stream, const WindowGeometry& g, std::size_t rows,
                       const T* g_out, T* g_in);

}  // namespace lmtrain::cuda
