// The activation loops for the x86-64 baseline, and the dispatch to the AVX2 and AVX-512 builds.
#include "activation_loops.h"

#define LMTRAIN_ISA baseline
#include "activation_loops.inc"
#undef LMTRAIN_ISA

namespace lmtrain::cpu {

namespace avx2 {
template <typename T>
void forward(Activation f, std::size_t begin, std::size_t end, const T* z, T* a);
template <typename T>
void derivative(Activation f, std::size_t begin, std::size_t end, const T* z, const T* a, T* d);
}  // namespace avx2
namespace avx512 {
template <typename T>
void forward(Activation f, std::size_t begin, std::size_t end, const T* z, T* a);
template <typename T>
void derivative(Activation f, std::size_t begin, std::size_t end, const T* z, const T* a, T* d);
}  // namespace avx512

namespace {
const bool kHasAvx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
// The subsets activation_loops_avx512.cpp is compiled for.  On a Xeon (2 vCPUs) float32 tanh
// runs 1.8× faster than the AVX2 build, with the same bits.
const bool kHasAvx512 = kHasAvx2 && __builtin_cpu_supports("avx512f") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512bw");
}  // namespace

template <typename T>
void activation_forward(Activation f, std::size_t begin, std::size_t end, const T* z, T* a) {
  if (kHasAvx512) {
    avx512::forward(f, begin, end, z, a);
  } else if (kHasAvx2) {
    avx2::forward(f, begin, end, z, a);
  } else {
    baseline::forward(f, begin, end, z, a);
  }
}

template <typename T>
void activation_derivative(Activation f, std::size_t begin, std::size_t end, const T* z,
                           const T* a, T* d) {
  if (kHasAvx512) {
    avx512::derivative(f, begin, end, z, a, d);
  } else if (kHasAvx2) {
    avx2::derivative(f, begin, end, z, a, d);
  } else {
    baseline::derivative(f, begin, end, z, a, d);
  }
}

template void activation_forward<float>(Activation, std::size_t, std::size_t, const float*, float*);
template void activation_forward<double>(Activation, std::size_t, std::size_t, const double*,
                                         double*);
template void activation_derivative<float>(Activation, std::size_t, std::size_t, const float*,
                                           const float*, float*);
template void activation_derivative<double>(Activation, std::size_t, std::size_t, const double*,
                                            const double*, double*);

}  // namespace lmtrain::cpu
