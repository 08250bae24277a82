// Launch geometry and the block reduction shared by lmtrain's CUDA kernels.  Device code: include
// it from .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "cuda_check.h"
#include "kernels.h"

namespace lmtrain::cuda {

inline constexpr unsigned kThreads = 256;  // a multiple of the warp size (block_reduce needs it)
// Enough resident blocks to fill any current GPU (an H100 holds 132 SMs × 8 blocks of 256);
// larger inputs are covered by the grid-stride loops.
inline constexpr unsigned kMaxBlocks = 4096;
// The largest gridDim.y (and z) a launch may have.
inline constexpr std::size_t kMaxGridY = 65535;

inline unsigned blocks_for(std::size_t n, unsigned max_blocks = kMaxBlocks) {
  const std::size_t blocks = (n + kThreads - 1) / kThreads;
  return blocks == 0 ? 1u : (blocks < max_blocks ? static_cast<unsigned>(blocks) : max_blocks);
}

__device__ inline std::size_t thread_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t grid_size() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

struct SumOp {
  __device__ static double identity() { return 0.0; }
  __device__ double operator()(double a, double b) const { return a + b; }
};
// For non-negative values (max_abs), so 0 is the identity.
struct MaxOp {
  __device__ static double identity() { return 0.0; }
  __device__ double operator()(double a, double b) const { return fmax(a, b); }
};

// The least value; +∞ for none (first_zero_on_diagonal).
struct MinOp {
  __device__ static double identity() { return INFINITY; }
  __device__ double operator()(double a, double b) const { return fmin(a, b); }
};

// Reduces v over the block; the result is valid in thread 0.  Warp shuffles, then one warp over
// the per-warp values.
template <typename Op>
__device__ double block_reduce(double v, Op op) {
  __shared__ double warp_values[32];
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  for (unsigned offset = 16; offset > 0; offset /= 2)
    v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  if (lane == 0) warp_values[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < blockDim.x / 32 ? warp_values[lane] : Op::identity();
    for (unsigned offset = 16; offset > 0; offset /= 2)
      v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Pass 1: each block folds load(i) over its grid-stride share of [0, n) into partials[block].
template <typename Op, typename Load>
__global__ void __launch_bounds__(kThreads)
    reduce_to_partials(std::size_t n, Load load, Op op, double* partials) {
  double acc = Op::identity();
  for (std::size_t i = thread_index(); i < n; i += grid_size()) acc = op(acc, load(i));
  acc = block_reduce(acc, op);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// Pass 2: one block folds the `count` partials into *result.
template <typename Op>
__global__ void __launch_bounds__(kThreads)
    reduce_partials(unsigned count, Op op, const double* partials, double* result) {
  double acc = Op::identity();
  for (unsigned i = threadIdx.x; i < count; i += blockDim.x) acc = op(acc, partials[i]);
  acc = block_reduce(acc, op);
  if (threadIdx.x == 0) *result = acc;
}

// Enqueues both passes; the block count depends on n only, so the order of the additions (and
// hence the result's bits) is fixed for given inputs.  n = 0 leaves Op's identity in *result.
template <typename Op, typename Load>
void reduce(cudaStream_t stream, std::size_t n, Load load, Op op, double* partials,
            double* result) {
  const unsigned blocks = blocks_for(n, kReductionBlocks);
  reduce_to_partials<<<blocks, kThreads, 0, stream>>>(n, load, op, partials);
  CUDA_CHECK_LAUNCH();
  reduce_partials<<<1, kThreads, 0, stream>>>(blocks, op, partials, result);
  CUDA_CHECK_LAUNCH();
}

}  // namespace lmtrain::cuda
