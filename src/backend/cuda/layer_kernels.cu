// Kernels of the network layers: batch gathering, bias, seed scaling and the dense layer's block
// of a Jacobian slice.  Each is one grid-stride loop over the flat output (row-major), so writes
// are coalesced whatever the shape; the index arithmetic is cheap next to the memory traffic.
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
template <typename T>
__global__ void dense_jacobian_kernel(std::size_t rows, std::size_t out, std::size_t in,
                                      std::size_t group, const T* g_out, const T* a_in, T* j,
                                      std::size_t ldj) {
  const std::size_t weights = out * in;
  const std::size_t width = weights + out;
  const std::size_t n = rows * width;
  for (std::size_t idx = thread_index(); idx < n; idx += grid_size()) {
    const std::size_t r = idx / width;
    const std::size_t col = idx - r * width;
    const T* g = g_out + r * out;
    T value;
    if (col < weights) {
      const std::size_t o = col / in;
      value = g[o] * a_in[(r / group) * in + (col - o * in)];
    } else {
      value = g[col - weights];
    }
    j[r * ldj + col] = value;
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
  dense_jacobian_kernel<<<blocks_for(rows * out * (in + 1)), kThreads, 0, stream>>>(
      rows, out, in, group, g_out, a_in, j, ldj);
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
