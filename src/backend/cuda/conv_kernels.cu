// Convolution and pooling kernels: one grid-stride loop over the flat *output* of each operation
// (row-major, so writes are coalesced), each element computed by the shared formula of
// backend/conv_math.h.  The adjoints (col2im, pooling backward) are gathers, so no atomics and
// the results are bit-reproducible.  channel_sums gives each (row, channel) pair one warp.
#include "../conv_math.h"
#include "conv_kernels.h"
#include "launch.h"

namespace lmtrain::cuda {
namespace {

// (row, channel, y, x) of a flat index into rows of C × H × W inputs: the element an adjoint
// kernel (col2im, pooling backward) writes.
struct InputPosition {
  std::size_t row, channel, y, x;
};
__device__ InputPosition input_position(const WindowGeometry& g, std::size_t idx) {
  const std::size_t hw = g.height * g.width;
  const std::size_t in = g.channels * hw;
  const std::size_t row = idx / in;
  const std::size_t rem = idx - row * in;
  const std::size_t c = rem / hw;
  const std::size_t yx = rem - c * hw;
  const std::size_t y = yx / g.width;
  return {row, c, y, yx - y * g.width};
}

// (sample, channel, oy, ox) of a flat index into samples of C × Ho × Wo outputs: the element a
// pooling kernel writes.
struct OutputPosition {
  std::size_t sample, channel, oy, ox;
};
__device__ OutputPosition output_position(const WindowGeometry& g, std::size_t idx) {
  const std::size_t P = g.out_height * g.out_width;
  const std::size_t sc = idx / P;
  const std::size_t p = idx - sc * P;
  const std::size_t s = sc / g.channels;
  const std::size_t oy = p / g.out_width;
  return {s, sc - s * g.channels, oy, p - oy * g.out_width};
}

template <typename T>
__global__ void im2col_kernel(WindowGeometry g, std::size_t samples, const T* x, T* cols) {
  const std::size_t P = g.out_height * g.out_width;
  const std::size_t kk = g.kernel_h * g.kernel_w;
  const std::size_t K = g.channels * kk;
  const std::size_t in = g.channels * g.height * g.width;
  const std::size_t n = samples * K * P;
  for (std::size_t idx = thread_index(); idx < n; idx += grid_size()) {
    const std::size_t s = idx / (K * P);
    const std::size_t rem = idx - s * K * P;
    const std::size_t row = rem / P;
    const std::size_t p = rem - row * P;
    const std::size_t c = row / kk;
    const std::size_t ij = row - c * kk;
    const std::size_t i = ij / g.kernel_w;
    const std::size_t oy = p / g.out_width;
    cols[idx] =
        kernels::im2col_entry(g, x + s * in, c, i, ij - i * g.kernel_w, oy, p - oy * g.out_width);
  }
}

template <typename T>
__global__ void col2im_kernel(WindowGeometry g, std::size_t samples, const T* cols, T* x) {
  const std::size_t P = g.out_height * g.out_width;
  const std::size_t K = g.channels * g.kernel_h * g.kernel_w;
  const std::size_t n = samples * g.channels * g.height * g.width;
  for (std::size_t idx = thread_index(); idx < n; idx += grid_size()) {
    const InputPosition at = input_position(g, idx);
    x[idx] = kernels::col2im_entry(g, cols + at.row * K * P, at.channel, at.y, at.x);
  }
}

template <typename T>
__global__ void add_channel_bias_kernel(std::size_t samples, std::size_t channels,
                                        std::size_t spatial, const T* bias, T* z) {
  const std::size_t n = samples * channels * spatial;
  for (std::size_t idx = thread_index(); idx < n; idx += grid_size())
    z[idx] += bias[(idx / spatial) % channels];
}

// One warp per (row, channel): lanes stride over the channel's `spatial` seeds (coalesced), then
// a shuffle reduction in a fixed order.  The loop bound is uniform across a warp, as the full
// shuffle mask requires.
template <typename T>
__global__ void channel_sums_kernel(std::size_t rows, std::size_t channels, std::size_t spatial,
                                    const T* g_out, T* j, std::size_t ldj) {
  const std::size_t pairs = rows * channels;
  const unsigned lane = threadIdx.x % 32;
  const std::size_t warps = grid_size() / 32;
  for (std::size_t w = thread_index() / 32; w < pairs; w += warps) {
    const T* g = g_out + w * spatial;
    T sum = T(0);
    for (std::size_t p = lane; p < spatial; p += 32) sum += g[p];
    for (unsigned offset = 16; offset > 0; offset /= 2)
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) {
      const std::size_t r = w / channels;
      j[r * ldj + (w - r * channels)] = sum;
    }
  }
}

template <typename T>
__global__ void max_pool_forward_kernel(WindowGeometry g, std::size_t samples, const T* x, T* y,
                                        T* argmax) {
  const std::size_t in = g.channels * g.height * g.width;
  const std::size_t n = samples * g.channels * g.out_height * g.out_width;
  for (std::size_t idx = thread_index(); idx < n; idx += grid_size()) {
    const OutputPosition at = output_position(g, idx);
    std::size_t index = 0;
    y[idx] = kernels::max_pool_entry(g, x + at.sample * in, at.channel, at.oy, at.ox, &index);
    if (argmax != nullptr) argmax[idx] = static_cast<T>(index);
  }
}

template <typename T>
__global__ void max_pool_backward_kernel(WindowGeometry g, std::size_t rows, std::size_t group,
                                         const T* argmax, const T* g_out, T* g_in) {
  const std::size_t out = g.channels * g.out_height * g.out_width;
  const std::size_t n = rows * g.channels * g.height * g.width;
  for (std::size_t idx = thread_index(); idx < n; idx += grid_size()) {
    const InputPosition at = input_position(g, idx);
    g_in[idx] = kernels::max_pool_backward_entry(g, argmax + (at.row / group) * out,
                                                 g_out + at.row * out, at.channel, at.y, at.x);
  }
}

template <typename T>
__global__ void avg_pool_forward_kernel(WindowGeometry g, std::size_t samples, const T* x, T* y) {
  const std::size_t in = g.channels * g.height * g.width;
  const std::size_t n = samples * g.channels * g.out_height * g.out_width;
  for (std::size_t idx = thread_index(); idx < n; idx += grid_size()) {
    const OutputPosition at = output_position(g, idx);
    y[idx] = kernels::avg_pool_entry(g, x + at.sample * in, at.channel, at.oy, at.ox);
  }
}

template <typename T>
__global__ void avg_pool_backward_kernel(WindowGeometry g, std::size_t rows, const T* g_out,
                                         T* g_in) {
  const std::size_t out = g.channels * g.out_height * g.out_width;
  const std::size_t n = rows * g.channels * g.height * g.width;
  for (std::size_t idx = thread_index(); idx < n; idx += grid_size()) {
    const InputPosition at = input_position(g, idx);
    g_in[idx] = kernels::avg_pool_backward_entry(g, g_out + at.row * out, at.channel, at.y, at.x);
  }
}

}  // namespace

template <typename T>
void im2col(cudaStream_t stream, const WindowGeometry& g, std::size_t samples, const T* x,
            T* cols) {
  const std::size_t n = samples * g.patch_size() * g.out_spatial();
  if (n == 0) return;
  im2col_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, samples, x, cols);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void col2im(cudaStream_t stream, const WindowGeometry& g, std::size_t samples, const T* cols,
            T* x) {
  const std::size_t n = samples * g.in_size();
  if (n == 0) return;
  col2im_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, samples, cols, x);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void add_channel_bias(cudaStream_t stream, std::size_t samples, std::size_t channels,
                      std::size_t spatial, const T* bias, T* z) {
  const std::size_t n = samples * channels * spatial;
  if (n == 0) return;
  add_channel_bias_kernel<<<blocks_for(n), kThreads, 0, stream>>>(samples, channels, spatial, bias,
                                                                  z);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void channel_sums(cudaStream_t stream, std::size_t rows, std::size_t channels, std::size_t spatial,
                  const T* g_out, T* j, std::size_t ldj) {
  const std::size_t pairs = rows * channels;
  if (pairs == 0) return;
  channel_sums_kernel<<<blocks_for(pairs * 32), kThreads, 0, stream>>>(rows, channels, spatial,
                                                                       g_out, j, ldj);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void max_pool_forward(cudaStream_t stream, const WindowGeometry& g, std::size_t samples, const T* x,
                      T* y, T* argmax) {
  const std::size_t n = samples * g.channels * g.out_spatial();
  if (n == 0) return;
  max_pool_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, samples, x, y, argmax);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void max_pool_backward(cudaStream_t stream, const WindowGeometry& g, std::size_t rows,
                       std::size_t group, const T* argmax, const T* g_out, T* g_in) {
  const std::size_t n = rows * g.in_size();
  if (n == 0) return;
  max_pool_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, rows, group, argmax, g_out,
                                                                   g_in);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void avg_pool_forward(cudaStream_t stream, const WindowGeometry& g, std::size_t samples, const T* x,
                      T* y) {
  const std::size_t n = samples * g.channels * g.out_spatial();
  if (n == 0) return;
  avg_pool_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, samples, x, y);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void avg_pool_backward(cudaStream_t stream, const WindowGeometry& g, std::size_t rows,
                       const T* g_out, T* g_in) {
  const std::size_t n = rows * g.in_size();
  if (n == 0) return;
  avg_pool_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(g, rows, g_out, g_in);
  CUDA_CHECK_LAUNCH();
}

#define LMTRAIN_INSTANTIATE(T)                                                                     \
  template void im2col<T>(cudaStream_t, const WindowGeometry&, std::size_t, const T*, T*);         \
  template void col2im<T>(cudaStream_t, const WindowGeometry&, std::size_t, const T*, T*);         \
  template void add_channel_bias<T>(cudaStream_t, std::size_t, std::size_t, std::size_t, const T*, \
                                    T*);                                                           \
  template void channel_sums<T>(cudaStream_t, std::size_t, std::size_t, std::size_t, const T*, T*, \
                                std::size_t);                                                      \
  template void max_pool_forward<T>(cudaStream_t, const WindowGeometry&, std::size_t, const T*,    \
                                    T*, T*);                                                       \
  template void max_pool_backward<T>(cudaStream_t, const WindowGeometry&, std::size_t,             \
                                     std::size_t, const T*, const T*, T*);                         \
  template void avg_pool_forward<T>(cudaStream_t, const WindowGeometry&, std::size_t, const T*,    \
                                    T*);                                                           \
  template void avg_pool_backward<T>(cudaStream_t, const WindowGeometry&, std::size_t, const T*,   \
                                     T*);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE

}  // namespace lmtrain::cuda
