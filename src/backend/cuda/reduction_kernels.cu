// Reductions to one double (dot, max |x|, count of non-finite values); see reduce() in launch.h.
// vector_norms reduces three figures at once in the same two passes.
#include "launch.h"

namespace lmtrain::cuda {
namespace {

template <typename T>
struct ProductLoad {
  const T* x;
  const T* y;
  __device__ double operator()(std::size_t i) const {
    return static_cast<double>(x[i]) * static_cast<double>(y[i]);
  }
};

template <typename T>
struct AbsLoad {
  const T* x;
  __device__ double operator()(std::size_t i) const { return fabs(static_cast<double>(x[i])); }
};

template <typename T>
struct NonFiniteLoad {
  const T* x;
  __device__ double operator()(std::size_t i) const { return isfinite(x[i]) ? 0.0 : 1.0; }
};

template <typename T>
struct ZeroOnDiagonalLoad {
  const T* a;
  std::size_t n;
  __device__ double operator()(std::size_t i) const {
    return a[i * (n + 1)] == T(0) ? static_cast<double>(i) : MinOp::identity();
  }
};

// The three figures of vector_norms, each folded by one block_reduce.  Its shared values are
// reused by the next call, so each call waits (__syncthreads) until the last one's readers are
// done.  Thread 0 holds the block's figures.
struct Norms {
  double bad = 0.0, largest = 0.0, squares = 0.0;
};
__device__ Norms block_norms(Norms v) {
  v.bad = block_reduce(v.bad, SumOp{});
  __syncthreads();
  v.largest = block_reduce(v.largest, MaxOp{});
  __syncthreads();
  v.squares = block_reduce(v.squares, SumOp{});
  return v;
}

// Pass 1 of vector_norms, in reduce()'s geometry (the same blocks, the same grid-stride order,
// the same block_reduce), so that the sum of squares has dot(x, x)'s bits.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    norms_to_partials(std::size_t n, const T* x, std::size_t stride, double* partials) {
  Norms acc;
  for (std::size_t i = thread_index(); i < n; i += grid_size()) {
    const double v = static_cast<double>(x[i * stride]);
    acc.bad += isfinite(v) ? 0.0 : 1.0;
    acc.largest = fmax(acc.largest, fabs(v));
    acc.squares += v * v;
  }
  acc = block_norms(acc);
  if (threadIdx.x == 0) {
    partials[3 * blockIdx.x] = acc.bad;
    partials[3 * blockIdx.x + 1] = acc.largest;
    partials[3 * blockIdx.x + 2] = acc.squares;
  }
}

// Pass 2: one block over the `count` blocks' figures.
__global__ void __launch_bounds__(kThreads)
    norms_from_partials(unsigned count, const double* partials, double* result) {
  Norms acc;
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) {
    acc.bad += partials[3 * i];
    acc.largest = fmax(acc.largest, partials[3 * i + 1]);
    acc.squares += partials[3 * i + 2];
  }
  acc = block_norms(acc);
  if (threadIdx.x == 0) {
    result[0] = acc.bad;
    result[1] = acc.largest;
    result[2] = acc.squares;
  }
}

}  // namespace

template <typename T>
void first_zero_on_diagonal(cudaStream_t stream, std::size_t n, const T* a, double* partials,
                            double* result) {
  reduce(stream, n, ZeroOnDiagonalLoad<T>{a, n}, MinOp{}, partials, result);
}

template <typename T>
void dot(cudaStream_t stream, std::size_t n, const T* x, const T* y, double* partials,
         double* result) {
  reduce(stream, n, ProductLoad<T>{x, y}, SumOp{}, partials, result);
}

template <typename T>
void max_abs(cudaStream_t stream, std::size_t n, const T* x, double* partials, double* result) {
  reduce(stream, n, AbsLoad<T>{x}, MaxOp{}, partials, result);
}

template <typename T>
void count_nonfinite(cudaStream_t stream, std::size_t n, const T* x, double* partials,
                     double* result) {
  reduce(stream, n, NonFiniteLoad<T>{x}, SumOp{}, partials, result);
}

template <typename T>
void vector_norms(cudaStream_t stream, std::size_t n, const T* x, std::size_t stride,
                  double* partials, double* result) {
  const unsigned blocks = blocks_for(n, kReductionBlocks);
  norms_to_partials<<<blocks, kThreads, 0, stream>>>(n, x, stride, partials);
  CUDA_CHECK_LAUNCH();
  norms_from_partials<<<1, kThreads, 0, stream>>>(blocks, partials, result);
  CUDA_CHECK_LAUNCH();
}

#define LMTRAIN_INSTANTIATE(T)                                                                    \
  template void dot<T>(cudaStream_t, std::size_t, const T*, const T*, double*, double*);          \
  template void max_abs<T>(cudaStream_t, std::size_t, const T*, double*, double*);                \
  template void count_nonfinite<T>(cudaStream_t, std::size_t, const T*, double*, double*);        \
  template void first_zero_on_diagonal<T>(cudaStream_t, std::size_t, const T*, double*, double*); \
  template void vector_norms<T>(cudaStream_t, std::size_t, const T*, std::size_t, double*, double*);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE

}  // namespace lmtrain::cuda
