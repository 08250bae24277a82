// Reductions to one double (dot, max |x|, count of non-finite values); see reduce() in launch.h.
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

}  // namespace

template <typename T>
void first_zero_on_diagonal(cudaStream_t stream, std::size_t n, const T* a, double* partials) {
  reduce(stream, n, ZeroOnDiagonalLoad<T>{a, n}, MinOp{}, partials);
}

template <typename T>
void dot(cudaStream_t stream, std::size_t n, const T* x, const T* y, double* partials) {
  reduce(stream, n, ProductLoad<T>{x, y}, SumOp{}, partials);
}

template <typename T>
void max_abs(cudaStream_t stream, std::size_t n, const T* x, double* partials) {
  reduce(stream, n, AbsLoad<T>{x}, MaxOp{}, partials);
}

template <typename T>
void count_nonfinite(cudaStream_t stream, std::size_t n, const T* x, double* partials) {
  reduce(stream, n, NonFiniteLoad<T>{x}, SumOp{}, partials);
}

#define LMTRAIN_INSTANTIATE(T)                                                    \
  template void dot<T>(cudaStream_t, std::size_t, const T*, const T*, double*);   \
  template void max_abs<T>(cudaStream_t, std::size_t, const T*, double*);         \
  template void count_nonfinite<T>(cudaStream_t, std::size_t, const T*, double*); \
  template void first_zero_on_diagonal<T>(cudaStream_t, std::size_t, const T*, double*);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE

}  // namespace lmtrain::cuda
