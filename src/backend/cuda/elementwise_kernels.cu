// Elementwise kernels: one grid-stride loop per operation over a flat array.  The activation
// formulas are the ones the CPU backend runs (backend/activation_math.h), compiled for the device.
#include "../activation_math.h"
#include "../step_math.h"
#include "launch.h"

namespace lmtrain::cuda {
namespace {

template <typename T>
__global__ void fill_kernel(T* x, std::size_t n, T value) {
  for (std::size_t i = thread_index(); i < n; i += grid_size()) x[i] = value;
}

template <typename S, typename D>
__global__ void convert_kernel(std::size_t n, const S* src, D* dst) {
  for (std::size_t i = thread_index(); i < n; i += grid_size()) dst[i] = static_cast<D>(src[i]);
}

template <typename T>
__global__ void axpy_kernel(std::size_t n, T alpha, const T* x, T* y) {
  for (std::size_t i = thread_index(); i < n; i += grid_size()) y[i] += alpha * x[i];
}

// Every thread decides the test from the same two device doubles; the first writes the outcome.
template <typename T>
__global__ void axpy_if_ratio_holds_kernel(std::size_t n, T alpha, const T* x, T* y,
                                           const double* x_norms, const double* y_norms, double lr,
                                           double ratio, double* applied) {
  const bool holds = kernels::geodesic_ratio_holds(x_norms[2], y_norms[2], lr, ratio);
  if (thread_index() == 0) *applied = holds ? 1.0 : 0.0;
  if (!holds) return;
  for (std::size_t i = thread_index(); i < n; i += grid_size()) y[i] += alpha * x[i];
}

// z may alias x or y: each element is read before it is written by the same thread.
template <typename T>
__global__ void add_scaled_kernel(std::size_t n, const T* x, T alpha, const T* y, T* z) {
  for (std::size_t i = thread_index(); i < n; i += grid_size()) z[i] = x[i] + alpha * y[i];
}

template <typename T>
__global__ void scale_elementwise_kernel(std::size_t n, const T* x, const T* s, bool divide, T* y) {
  for (std::size_t i = thread_index(); i < n; i += grid_size())
    y[i] = divide ? x[i] / s[i] : x[i] * s[i];
}

template <typename T>
__global__ void inverse_sqrt_kernel(std::size_t n, const T* x, T* y) {
  // 1/sqrt rather than rsqrt: rsqrt is not correctly rounded and the CPU backend divides.
  for (std::size_t i = thread_index(); i < n; i += grid_size()) y[i] = T(1) / sqrt(x[i]);
}

template <typename T>
__global__ void activation_forward_kernel(Activation f, std::size_t n, const T* z, T* a) {
  for (std::size_t i = thread_index(); i < n; i += grid_size()) a[i] = kernels::activate(f, z[i]);
}

template <typename T>
__global__ void activation_derivative_kernel(Activation f, std::size_t n, const T* z, const T* a,
                                             T* d) {
  for (std::size_t i = thread_index(); i < n; i += grid_size())
    d[i] = kernels::activate_derivative(f, z[i], a[i]);
}

}  // namespace

template <typename T>
void fill(cudaStream_t stream, T* x, std::size_t n, T value) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, n, value);
  CUDA_CHECK_LAUNCH();
}

template <typename S, typename D>
void convert(cudaStream_t stream, std::size_t n, const S* src, D* dst) {
  if (n == 0) return;
  convert_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, src, dst);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void axpy(cudaStream_t stream, std::size_t n, T alpha, const T* x, T* y) {
  if (n == 0) return;
  axpy_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, alpha, x, y);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void axpy_if_ratio_holds(cudaStream_t stream, std::size_t n, T alpha, const T* x, T* y,
                         const double* x_norms, const double* y_norms, double lr, double ratio,
                         double* applied) {
  // One block at least, so that `applied` is written for n = 0 too.
  axpy_if_ratio_holds_kernel<<<n == 0 ? 1 : blocks_for(n), kThreads, 0, stream>>>(
      n, alpha, x, y, x_norms, y_norms, lr, ratio, applied);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void add_scaled(cudaStream_t stream, std::size_t n, const T* x, T alpha, const T* y, T* z) {
  if (n == 0) return;
  add_scaled_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, alpha, y, z);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void scale_elementwise(cudaStream_t stream, std::size_t n, const T* x, const T* s, bool divide,
                       T* y) {
  if (n == 0) return;
  scale_elementwise_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, s, divide, y);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void inverse_sqrt(cudaStream_t stream, std::size_t n, const T* x, T* y) {
  if (n == 0) return;
  inverse_sqrt_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, y);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void activation_forward(cudaStream_t stream, Activation f, std::size_t n, const T* z, T* a) {
  if (n == 0) return;
  activation_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(f, n, z, a);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void activation_derivative(cudaStream_t stream, Activation f, std::size_t n, const T* z, const T* a,
                           T* d) {
  if (n == 0) return;
  activation_derivative_kernel<<<blocks_for(n), kThreads, 0, stream>>>(f, n, z, a, d);
  CUDA_CHECK_LAUNCH();
}

#define LMTRAIN_INSTANTIATE(T)                                                                    \
  template void fill<T>(cudaStream_t, T*, std::size_t, T);                                        \
  template void axpy<T>(cudaStream_t, std::size_t, T, const T*, T*);                              \
  template void add_scaled<T>(cudaStream_t, std::size_t, const T*, T, const T*, T*);              \
  template void axpy_if_ratio_holds<T>(cudaStream_t, std::size_t, T, const T*, T*, const double*, \
                                       const double*, double, double, double*);                   \
  template void scale_elementwise<T>(cudaStream_t, std::size_t, const T*, const T*, bool, T*);    \
  template void inverse_sqrt<T>(cudaStream_t, std::size_t, const T*, T*);                         \
  template void activation_forward<T>(cudaStream_t, Activation, std::size_t, const T*, T*);       \
  template void activation_derivative<T>(cudaStream_t, Activation, std::size_t, const T*,         \
                                         const T*, T*);
LMTRAIN_INSTANTIATE(float)
LMTRAIN_INSTANTIATE(double)
#undef LMTRAIN_INSTANTIATE
template void convert<float, float>(cudaStream_t, std::size_t, const float*, float*);
template void convert<float, double>(cudaStream_t, std::size_t, const float*, double*);
template void convert<double, float>(cudaStream_t, std::size_t, const double*, float*);
template void convert<double, double>(cudaStream_t, std::size_t, const double*, double*);

}  // namespace lmtrain::cuda
