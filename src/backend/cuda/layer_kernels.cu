// Kernels of the network layers: batch gathering, bias, seed scaling and the dense layer's block
// of a Jacobian slice.  Each but the last is one grid-stride loop over the flat output
// (row-major), so writes are coalesced whatever the shape; the Jacobian block, the largest
// output, runs on a 2-D grid (rows × columns) with 32-bit column arithmetic.
#include <algorithm>

#include "launch.h"

namespace lmtrain::cuda {
namespace {

template <typename T>
__global__ void gather_rows_kernel(const T* src, std::size_t cols, const std::int64_t* rows,
                                   std::size_t count, T* dst) {
  const std::size_t n = count * cols;
  for (std::size_t i = thread_index(); i < n; i += grid_size()) {
    const std::size_t r = i / cols;
    const std::size_t c = i - r * cols;
    dst[i] = src[static_cast<std::size_t>(rows[r]) * cols + c];
  }
}

template <typename T>
__global__ void add_bias_rows_kernel(std::size_t rows, std::size_t cols, const T* bias, T* z) {
  const std::size_t n = rows * cols;
  for (std::size_t i = thread_index(); i < n; i += grid_size()) z[i] += bias[i % cols];
}

template <typename T>
__global__ void scale_row_groups_kernel(std::size_t rows, std::size_t cols, std::size_t group,
                                        const T* d, T* g) {
  const std::size_t n = rows * cols;
  for (std::size_t i = thread_index(); i < n; i += grid_size()) {
    const std::size_t r = i / cols;
    const std::size_t c = i - r * cols;
    g[i] *= d[(r / group) * cols + c];
  }
}

// Row r of the slice holds out·in weight columns (PyTorch's (out, in) order) then out bias columns.
// A 2-D grid: blockIdx.y strides over the rows, x over a row's columns, so a row's pointers and
// its sample's index (r / group) are formed once per row, and the per-element arithmetic is one
// 32-bit division (the layer's width out·(in + 1) < 2³², checked by the caller) where the flat
// loop made three 64-bit ones.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    dense_jacobian_kernel(std::size_t rows, unsigned out, unsigned in, std::size_t group,
                          const T* g_out, const T* a_in, T* j, std::size_t ldj) {
  const unsigned weights = out * in;
  const unsigned width = weights + out;
  for (std::size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const T* g = g_out + r * out;
    const T* a = a_in + (r / group) * in;
    T* row = j + r * ldj;
    for (unsigned col = blockIdx.x * blockDim.x + threadIdx.x; col < width;
         col += gridDim.x * blockDim.x) {
      if (col < weights) {
        const unsigned o = col / in;
        row[col] = g[o] * a[col - o * in];
      } else {
        row[col] = g[col - weights];
      }
    }
  }
}

}  // namespace

template <typename T>
void gather_rows(cudaStream_t stream, const T* src, std::size_t cols, const std::int64_t* rows,
                 std::size_t count, T* dst) {
  if (count == 0 || cols == 0) return;
  gather_rows_kernel<<<blocks_for(count * cols), kThreads, 0, stream>>>(src, cols, rows, count,
                                                                        dst);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void add_bias_rows(cudaStream_t stream, std::size_t rows, std::size_t cols, const T* bias, T* z) {
  if (rows == 0 || cols == 0) return;
  add_bias_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(rows, cols, bias, z);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void scale_row_groups(cudaStream_t stream, std::size_t rows, std::size_t cols, std::size_t group,
                      const T* d, T* g) {
  if (rows == 0 || cols == 0) return;
  scale_row_groups_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(rows, cols, group, d,
                                                                            g);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void dense_jacobian(cudaStream_t stream, std::size_t rows, std::size_t out, std::size_t in,
                    std::size_t group, const T* g_out, const T* a_in, T* j, std::size_t ldj) {
  if (rows == 0 || out == 0) return;
  // x: enough blocks for a row's columns (at most kMaxBlocks); y: one block row per slice row,
  // up to the grid's limit of 65 535 (the kernel strides over the rest).
  const unsigned x = blocks_for(out * (in + 1));
  const dim3 grid(x, static_cast<unsigned>(std::min<std::size_t>(rows, kMaxGridY)));
  dense_jacobian_kernel<<<grid, kThreads, 0, stream>>>(
      rows, static_cast<unsigned>(out), static_cast<unsigned>(in), group, g_out, a_in, j, ldj);
  CUDA_CHECK_LAUNCH();
}

#define LMTRAIN_INSTANTIATE(T)                                                                     \
  template void gather_rows<T>(cudaStream_t, const T*, std::size_t, const std::int64_t*,           \
                               std::size_t, T*);                                                   \
  template void add_bias_rows<T>(cudaStream_t, std::size_t, std::size_t, const T*, T*);            \
  template void scale_row_groups<T>(cudaStream_t, std::size_t, std::size_t, std::size_t, const T*, \
                                    T*);                                                           \
  template void dense_jacobian<T>(cudaStream_t, std::size_t, std::size_t, std::size_t,             \
                                  std::size_t, const T*, const T*, T*, std::size_t);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE

}  // namespace lmtrain::cuda
