// Activation loops of the CPU backend over [begin, end).  Compiled three times — for the x86-64
// baseline, for AVX2+FMA (activation_loops_avx2.cpp) and for AVX-512 (activation_loops_avx512.cpp)
// — and dispatched by the running CPU, so tanh, sigmoid and ELU (fast_math.h) vectorize 8 or 16
// floats (4 or 8 doubles) wide without building for one machine.
#pragma once

#include <cstddef>
#include <string_view>

#include "lmtrain/core/activation.h"

namespace lmtrain::cpu {

// The instruction-set build of the loops this process runs: the widest the CPU has, unless the
// environment variable LMTRAIN_SIMD (baseline | avx2 | avx512) forces one — so that tests cover
// every path on a machine that has the widest.  Throws InvalidArgument, saying why, for a path
// the CPU lacks or an unknown name.
enum class SimdPath { kBaseline, kAvx2, kAvx512 };
SimdPath simd_path();
std::string_view to_string(SimdPath path);
// Whether this CPU can run `path` (tests run every path it can).
bool cpu_has(SimdPath path);

// The loops of one path (the caller checks cpu_has); the two functions below dispatch to them.
template <typename T>
void activation_forward(SimdPath path, Activation f, std::size_t begin, std::size_t end, const T* z,
                        T* a);
template <typename T>
void activation_derivative(SimdPath path, Activation f, std::size_t begin, std::size_t end,
                           const T* z, const T* a, T* d);

template <typename T>
void activation_forward(Activation f, std::size_t begin, std::size_t end, const T* z, T* a);
template <typename T>
void activation_derivative(Activation f, std::size_t begin, std::size_t end, const T* z, const T* a,
                           T* d);

}  // namespace lmtrain::cpu
