// Kernels on the n × n normal matrix (row-major; only the upper triangle is meaningful, see
// backend.h).
#include "launch.h"

namespace lmtrain::cuda {
namespace {

constexpr unsigned kTile = 32;
constexpr unsigned kTileRows = 8;  // a 32 × 8 block moves a 32 × 32 tile, 4 rows per thread

// Lower tile (tr, tc), tc ≤ tr, is the transpose of upper tile (tc, tr).  The source tile is
// read with coalesced row loads into shared memory and written back transposed with coalesced
// row stores (the +1 column avoids shared-memory bank conflicts).  Only strictly-off-diagonal
// elements of the source triangle are read and only those of the other triangle written, so on a
// diagonal tile no element is both read and written.  `from_lower` copies the strict lower
// triangle into the upper one instead (the last step of potri).
template <typename T>
__global__ void __launch_bounds__(kTile* kTileRows)
    mirror_triangle_kernel(std::size_t n, T* a, bool from_lower) {
  __shared__ T tile[kTile][kTile + 1];
  const std::size_t tiles = (n + kTile - 1) / kTile;
  for (std::size_t tr = blockIdx.y; tr < tiles; tr += gridDim.y) {
    for (std::size_t tc = blockIdx.x; tc <= tr; tc += gridDim.x) {
      // Source element (row, col) of the tile pair, strictly inside its triangle.
      for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
        const std::size_t row = (from_lower ? tr : tc) * kTile + k;
        const std::size_t col = (from_lower ? tc : tr) * kTile + threadIdx.x;
        if (row < n && col < n && (from_lower ? col < row : row < col))
          tile[k][threadIdx.x] = a[row * n + col];
      }
      __syncthreads();
      for (unsigned k = threadIdx.y; k < kTile; k += kTileRows) {
        const std::size_t i = (from_lower ? tc : tr) * kTile + k;
        const std::size_t j = (from_lower ? tr : tc) * kTile + threadIdx.x;
        if (i < n && j < n && (from_lower ? i < j : j < i)) a[i * n + j] = tile[threadIdx.x][k];
      }
      __syncthreads();
    }
  }
}

void launch_mirror(cudaStream_t stream, std::size_t n, auto* a, bool from_lower) {
  if (n < 2) return;
  const std::size_t tiles = (n + kTile - 1) / kTile;
  const unsigned g = tiles < 65535 ? static_cast<unsigned>(tiles) : 65535u;
  mirror_triangle_kernel<<<dim3(g, g), dim3(kTile, kTileRows), 0, stream>>>(n, a, from_lower);
  CUDA_CHECK_LAUNCH();
}

// Column block [j0, j0 + count) of the n × n identity, column-major with leading dimension n.
template <typename T>
__global__ void identity_columns_kernel(std::size_t n, std::size_t j0, std::size_t count, T* b) {
  const std::size_t total = n * count;
  for (std::size_t idx = thread_index(); idx < total; idx += grid_size()) {
    const std::size_t c = idx / n;
    const std::size_t i = idx - c * n;
    b[idx] = i == j0 + c ? T(1) : T(0);
  }
}

// Column j = j0 + c of the inverse X (column-major in `block`, leading dimension n): the entries
// above its diagonal go to the strictly upper triangle (column-major) of `a`, which the lower
// factor leaves free, and X_jj to diagonal[j].
template <typename T>
__global__ void store_inverse_columns_kernel(std::size_t n, std::size_t j0, std::size_t count,
                                             const T* block, T* a, T* diagonal) {
  const std::size_t total = n * count;
  for (std::size_t idx = thread_index(); idx < total; idx += grid_size()) {
    const std::size_t c = idx / n;
    const std::size_t i = idx - c * n;
    const std::size_t j = j0 + c;
    if (i < j)
      a[j * n + i] = block[idx];
    else if (i == j)
      diagonal[j] = block[idx];
  }
}

template <typename T>
__global__ void set_diagonal_kernel(std::size_t n, const T* d, T* a) {
  for (std::size_t i = thread_index(); i < n; i += grid_size()) a[i * n + i] = d[i];
}

template <typename T>
__global__ void add_diagonal_kernel(std::size_t n, T* a, T lambda, const T* d) {
  for (std::size_t i = thread_index(); i < n; i += grid_size())
    a[i * n + i] += lambda * (d != nullptr ? d[i] : T(1));
}

// add_diagonal_kernel's arithmetic with λ loaded from device memory, rounded to T once.
template <typename T>
__global__ void add_diagonal_from_kernel(std::size_t n, T* a, const double* lambda, const T* d) {
  const T l = static_cast<T>(*lambda);
  for (std::size_t i = thread_index(); i < n; i += grid_size())
    a[i * n + i] += l * (d != nullptr ? d[i] : T(1));
}

template <typename T>
__global__ void scale_symmetric_kernel(std::size_t n, T* a, const T* s) {
  const std::size_t count = n * n;
  for (std::size_t idx = thread_index(); idx < count; idx += grid_size()) {
    const std::size_t i = idx / n;
    const std::size_t j = idx - i * n;
    if (j >= i) a[idx] *= s[i] * s[j];
  }
}

// Same comparisons as std::clamp, so a NaN diagonal passes through as on the CPU.
template <typename T>
__global__ void clamp_strided_kernel(std::size_t n, const T* x, std::size_t stride, T lo, T hi,
                                     T* y) {
  for (std::size_t i = thread_index(); i < n; i += grid_size()) {
    const T v = x[i * stride];
    y[i] = v < lo ? lo : (hi < v ? hi : v);
  }
}

__global__ void store_status_kernel(const int* info, double* status) {
  *status = static_cast<double>(*info);
}

}  // namespace

template <typename T>
void symmetrize_upper(cudaStream_t stream, std::size_t n, T* a) {
  launch_mirror(stream, n, a, false);
}

template <typename T>
void identity_columns(cudaStream_t stream, std::size_t n, std::size_t j0, std::size_t count, T* b) {
  if (n == 0 || count == 0) return;
  identity_columns_kernel<<<blocks_for(n * count), kThreads, 0, stream>>>(n, j0, count, b);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void store_inverse_columns(cudaStream_t stream, std::size_t n, std::size_t j0, std::size_t count,
                           const T* block, T* a, T* diagonal) {
  if (n == 0 || count == 0) return;
  store_inverse_columns_kernel<<<blocks_for(n * count), kThreads, 0, stream>>>(n, j0, count, block,
                                                                               a, diagonal);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void finish_inverse(cudaStream_t stream, std::size_t n, const T* diagonal, T* a) {
  if (n == 0) return;
  launch_mirror(stream, n, a, true);
  set_diagonal_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, diagonal, a);
  CUDA_CHECK_LAUNCH();
}

void store_status(cudaStream_t stream, const int* info, double* status) {
  store_status_kernel<<<1, 1, 0, stream>>>(info, status);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void add_diagonal(cudaStream_t stream, std::size_t n, T* a, T lambda, const T* d) {
  if (n == 0) return;
  add_diagonal_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, a, lambda, d);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void add_diagonal_from(cudaStream_t stream, std::size_t n, T* a, const double* lambda, const T* d) {
  if (n == 0) return;
  add_diagonal_from_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, a, lambda, d);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void scale_symmetric(cudaStream_t stream, std::size_t n, T* a, const T* s) {
  if (n == 0) return;
  scale_symmetric_kernel<<<blocks_for(n * n), kThreads, 0, stream>>>(n, a, s);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void clamp_strided(cudaStream_t stream, std::size_t n, const T* x, std::size_t stride, T lo, T hi,
                   T* y) {
  if (n == 0) return;
  clamp_strided_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, stride, lo, hi, y);
  CUDA_CHECK_LAUNCH();
}

// c[i, j] (j ≥ i) = β c[i, j] + Σ_b partials[b·stride + i·ldp + j], the b-sum in double in the
// order b = 0, 1, …: split-K's fixed-order reduction (linear_algebra.h, reduce_upper).  Rows on
// the grid's y, each row's columns from its diagonal on along x, so a warp reads 32 consecutive
// entries of every partial (coalesced) and the lower triangle costs no thread.
template <typename T>
__global__ void reduce_upper_kernel(std::size_t n, std::size_t count, const T* partials,
                                    std::size_t ldp, std::size_t stride, T beta, T* c) {
  for (std::size_t i = blockIdx.y; i < n; i += gridDim.y) {
    for (std::size_t j = i + static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n;
         j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
      const T* p = partials + i * ldp + j;
      double s = 0;
#pragma unroll 4
      for (std::size_t b = 0; b < count; ++b) s += static_cast<double>(p[b * stride]);
      T* cij = c + i * n + j;
      *cij = beta == T(0)
                 ? static_cast<T>(s)
                 : static_cast<T>(static_cast<double>(beta) * static_cast<double>(*cij) + s);
    }
  }
}

// Row i of the upper triangle starts at packed offset i·n − i(i−1)/2.  One thread per packed
// element; the row is recovered from the offset by the closed-form inverse of that formula, then
// corrected for rounding.
__device__ inline std::size_t packed_row(std::size_t idx, std::size_t n) {
  const double nn = static_cast<double>(n) + 0.5;
  auto i = static_cast<std::size_t>(nn - sqrt(nn * nn - 2.0 * static_cast<double>(idx)));
  auto start = [n](std::size_t r) { return r * n - r * (r == 0 ? 0 : r - 1) / 2; };
  while (i > 0 && start(i) > idx) --i;
  while (i + 1 < n && start(i + 1) <= idx) ++i;
  return i;
}

template <typename T>
__global__ void pack_upper_kernel(std::size_t n, const T* a, T* packed, bool unpack) {
  const std::size_t count = n * (n + 1) / 2;
  for (std::size_t idx = thread_index(); idx < count; idx += grid_size()) {
    const std::size_t i = packed_row(idx, n);
    const std::size_t j = i + (idx - (i * n - i * (i == 0 ? 0 : i - 1) / 2));
    if (unpack) {
      const_cast<T*>(a)[i * n + j] = packed[idx];
    } else {
      packed[idx] = a[i * n + j];
    }
  }
}

// dst's upper triangle = src's: one thread per entry of the packed upper triangle (none for the
// lower one), the row recovered as pack_upper does.
template <typename T>
__global__ void copy_upper_kernel(std::size_t n, const T* src, T* dst) {
  const std::size_t count = n * (n + 1) / 2;
  for (std::size_t idx = thread_index(); idx < count; idx += grid_size()) {
    const std::size_t i = packed_row(idx, n);
    const std::size_t j = i + (idx - (i * n - i * (i == 0 ? 0 : i - 1) / 2));
    dst[i * n + j] = src[i * n + j];
  }
}

// out_c = Σ_r J[r, c]², parallel over rows as well as columns: block (x, y) covers kTile columns
// and row chunk y, its kTileRows row lanes striding through the chunk (a warp reads kTile
// consecutive columns of one row: coalesced), summing in double.  The lanes' sums are added in
// lane order, then the chunks' in chunk order by the second kernel: a fixed order, so the same J
// gives the same bits on every run.  With one chunk the first kernel writes `out` itself.
template <typename T>
__global__ void __launch_bounds__(kTile* kTileRows)
    column_squares_kernel(std::size_t m, std::size_t n, const T* j, std::size_t ldj,
                          std::size_t rows_per_chunk, double* partials, T* out) {
  __shared__ double lanes[kTileRows][kTile];
  const std::size_t c = static_cast<std::size_t>(blockIdx.x) * kTile + threadIdx.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.y) * rows_per_chunk;
  const std::size_t last = first + rows_per_chunk < m ? first + rows_per_chunk : m;
  double sum = 0.0;
  if (c < n)
    for (std::size_t r = first + threadIdx.y; r < last; r += kTileRows) {
      const double v = static_cast<double>(j[r * ldj + c]);
      sum += v * v;
    }
  lanes[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < n) {
    double total = lanes[0][threadIdx.x];
    for (unsigned lane = 1; lane < kTileRows; ++lane) total += lanes[lane][threadIdx.x];
    if (gridDim.y == 1)
      out[c] = static_cast<T>(total);
    else
      partials[static_cast<std::size_t>(blockIdx.y) * n + c] = total;
  }
}

template <typename T>
__global__ void sum_column_chunks_kernel(std::size_t n, std::size_t chunks, const double* partials,
                                         T* out) {
  for (std::size_t c = thread_index(); c < n; c += grid_size()) {
    double total = 0.0;
    for (std::size_t k = 0; k < chunks; ++k) total += partials[k * n + c];
    out[c] = static_cast<T>(total);
  }
}

template <typename T>
void pack_upper(cudaStream_t stream, std::size_t n, const T* a, T* packed) {
  if (n == 0) return;
  pack_upper_kernel<<<blocks_for(n * (n + 1) / 2), kThreads, 0, stream>>>(n, a, packed, false);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void unpack_upper(cudaStream_t stream, std::size_t n, const T* packed, T* a) {
  if (n == 0) return;
  pack_upper_kernel<<<blocks_for(n * (n + 1) / 2), kThreads, 0, stream>>>(
      n, a, const_cast<T*>(packed), true);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void copy_upper(cudaStream_t stream, std::size_t n, const T* src, T* dst) {
  if (n == 0) return;
  copy_upper_kernel<<<blocks_for(n * (n + 1) / 2), kThreads, 0, stream>>>(n, src, dst);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void reduce_upper(cudaStream_t stream, std::size_t n, std::size_t count, const T* partials,
                  std::size_t ldp, std::size_t stride, T beta, T* c) {
  if (n == 0) return;
  const unsigned rows = n < 65535 ? static_cast<unsigned>(n) : 65535u;
  reduce_upper_kernel<<<dim3(blocks_for(n, 65535), rows), kThreads, 0, stream>>>(
      n, count, partials, ldp, stride, beta, c);
  CUDA_CHECK_LAUNCH();
}

std::size_t column_sum_chunks(std::size_t m, std::size_t n) {
  // Enough blocks to fill a GPU (132 SMs × 8 resident blocks of 256 threads on an H100) when
  // n alone gives too few, each chunk at least 64 rows (8 per lane); never more than the grid's
  // y limit.  A function of m and n only, so the summation order is too.
  constexpr std::size_t kTargetBlocks = 2048;
  constexpr std::size_t kMinRows = 64;
  const std::size_t column_blocks = (n + kTile - 1) / kTile;
  const std::size_t by_blocks = column_blocks >= kTargetBlocks ? 1 : kTargetBlocks / column_blocks;
  const std::size_t by_rows = (m + kMinRows - 1) / kMinRows;
  const std::size_t chunks = by_blocks < by_rows ? by_blocks : by_rows;
  return chunks == 0 ? 1 : (chunks < 65535 ? chunks : 65535);
}

template <typename T>
void column_sums_of_squares(cudaStream_t stream, std::size_t m, std::size_t n, const T* j,
                            std::size_t ldj, double* partials, T* out) {
  if (n == 0) return;
  const std::size_t chunks = column_sum_chunks(m, n);
  const std::size_t rows_per_chunk = m == 0 ? 1 : (m + chunks - 1) / chunks;
  const std::size_t column_blocks = (n + kTile - 1) / kTile;
  column_squares_kernel<<<dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks)),
                          dim3(kTile, kTileRows), 0, stream>>>(m, n, j, ldj, rows_per_chunk,
                                                               partials, out);
  CUDA_CHECK_LAUNCH();
  if (chunks == 1) return;
  sum_column_chunks_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, chunks, partials, out);
  CUDA_CHECK_LAUNCH();
}

#define LMTRAIN_INSTANTIATE(T)                                                                 \
  template void pack_upper<T>(cudaStream_t, std::size_t, const T*, T*);                        \
  template void unpack_upper<T>(cudaStream_t, std::size_t, const T*, T*);                      \
  template void column_sums_of_squares<T>(cudaStream_t, std::size_t, std::size_t, const T*,    \
                                          std::size_t, double*, T*);                           \
  template void symmetrize_upper<T>(cudaStream_t, std::size_t, T*);                            \
  template void copy_upper<T>(cudaStream_t, std::size_t, const T*, T*);                        \
  template void reduce_upper<T>(cudaStream_t, std::size_t, std::size_t, const T*, std::size_t, \
                                std::size_t, T, T*);                                           \
  template void identity_columns<T>(cudaStream_t, std::size_t, std::size_t, std::size_t, T*);  \
  template void store_inverse_columns<T>(cudaStream_t, std::size_t, std::size_t, std::size_t,  \
                                         const T*, T*, T*);                                    \
  template void finish_inverse<T>(cudaStream_t, std::size_t, const T*, T*);                    \
  template void add_diagonal<T>(cudaStream_t, std::size_t, T*, T, const T*);                   \
  template void add_diagonal_from<T>(cudaStream_t, std::size_t, T*, const double*, const T*);  \
  template void scale_symmetric<T>(cudaStream_t, std::size_t, T*, const T*);                   \
  template void clamp_strided<T>(cudaStream_t, std::size_t, const T*, std::size_t, T, T, T*);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE

}  // namespace lmtrain::cuda
