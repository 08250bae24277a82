// The activation loops for the x86-64 baseline, and the dispatch to the AVX2 and AVX-512 builds.
#include "activation_loops.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

#include "lmtrain/core/error.h"

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

bool cpu_has(SimdPath path) {
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (path) {
    case SimdPath::kBaseline:
      return true;
    case SimdPath::kAvx2:
      return avx2;
    // The subsets activation_loops_avx512.cpp is compiled for.  On a Xeon (2 vCPUs) float32 tanh
    // runs 1.8× faster than the AVX2 build, with the same bits.
    case SimdPath::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  }
  return false;
}

namespace {

// The widest path the CPU has, or the one LMTRAIN_SIMD names.  Decided once per process.
SimdPath choose_simd_path() {
  const char* forced = std::getenv("LMTRAIN_SIMD");
  if (forced == nullptr || *forced == '\0') {
    if (cpu_has(SimdPath::kAvx512)) return SimdPath::kAvx512;
    return cpu_has(SimdPath::kAvx2) ? SimdPath::kAvx2 : SimdPath::kBaseline;
  }
  const std::string_view name(forced);
  for (const SimdPath path : {SimdPath::kBaseline, SimdPath::kAvx2, SimdPath::kAvx512}) {
    if (name != to_string(path)) continue;
    if (!cpu_has(path))
      throw InvalidArgument(fmt::format(
          "LMTRAIN_SIMD = {}: this CPU lacks the instructions of that path (avx2 needs AVX2 and "
          "FMA; avx512 needs AVX-512 F, DQ, VL and BW); unset it or choose baseline",
          name));
    return path;
  }
  throw InvalidArgument(fmt::format(
      "LMTRAIN_SIMD = {}: expected baseline, avx2 or avx512 (or unset it: the widest path the "
      "CPU has)",
      name));
}

}  // namespace

std::string_view to_string(SimdPath path) {
  switch (path) {
    case SimdPath::kBaseline:
      return "baseline";
    case SimdPath::kAvx2:
      return "avx2";
    case SimdPath::kAvx512:
      return "avx512";
  }
  return "?";
}

SimdPath simd_path() {
  static const SimdPath path = choose_simd_path();
  return path;
}

template <typename T>
void activation_forward(SimdPath path, Activation f, std::size_t begin, std::size_t end, const T* z,
                        T* a) {
  switch (path) {
    case SimdPath::kAvx512:
      return avx512::forward(f, begin, end, z, a);
    case SimdPath::kAvx2:
      return avx2::forward(f, begin, end, z, a);
    case SimdPath::kBaseline:
      return baseline::forward(f, begin, end, z, a);
  }
}

template <typename T>
void activation_derivative(SimdPath path, Activation f, std::size_t begin, std::size_t end,
                           const T* z, const T* a, T* d) {
  switch (path) {
    case SimdPath::kAvx512:
      return avx512::derivative(f, begin, end, z, a, d);
    case SimdPath::kAvx2:
      return avx2::derivative(f, begin, end, z, a, d);
    case SimdPath::kBaseline:
      return baseline::derivative(f, begin, end, z, a, d);
  }
}

template <typename T>
void activation_forward(Activation f, std::size_t begin, std::size_t end, const T* z, T* a) {
  activation_forward(simd_path(), f, begin, end, z, a);
}

template <typename T>
void activation_derivative(Activation f, std::size_t begin, std::size_t end, const T* z, const T* a,
                           T* d) {
  activation_derivative(simd_path(), f, begin, end, z, a, d);
}

template void activation_forward<float>(SimdPath, Activation, std::size_t, std::size_t,
                                        const float*, float*);
template void activation_forward<double>(SimdPath, Activation, std::size_t, std::size_t,
                                         const double*, double*);
template void activation_derivative<float>(SimdPath, Activation, std::size_t, std::size_t,
                                           const float*, const float*, float*);
template void activation_derivative<double>(SimdPath, Activation, std::size_t, std::size_t,
                                            const double*, const double*, double*);
template void activation_forward<float>(Activation, std::size_t, std::size_t, const float*, float*);
template void activation_forward<double>(Activation, std::size_t, std::size_t, const double*,
                                         double*);
template void activation_derivative<float>(Activation, std::size_t, std::size_t, const float*,
                                           const float*, float*);
template void activation_derivative<double>(Activation, std::size_t, std::size_t, const double*,
                                            const double*, double*);

}  // namespace lmtrain::cpu
