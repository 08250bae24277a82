// Activation loops of the CPU backend over [begin, end).  Compiled three times — for the x86-64
// baseline, for AVX2+FMA (activation_loops_avx2.cpp) and for AVX-512 (activation_loops_avx512.cpp)
// — and dispatched by the running CPU, so float32 tanh and sigmoid (fast_math.h) vectorize 8 or
// 16 wide without building for one machine.
#pragma once

#include <cstddef>

#include "lmtrain/core/activation.h"

namespace lmtrain::cpu {

template <typename T>
void activation_forward(Activation f, std::size_t begin, std::size_t end, const T* z, T* a);
template <typename T>
void activation_derivative(Activation f, std::size_t begin, std::size_t end, const T* z,
                           const T* a, T* d);

}  // namespace lmtrain::cpu
