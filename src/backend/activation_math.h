// Scalar activation functions and derivatives, shared by the CPU and CUDA kernels so both
// backends compute the same thing (compiled as __host__ __device__ under nvcc).
#pragma once

#include <cmath>

#include "lmtrain/core/activation.h"

#if defined(__CUDACC__)
#define LMTRAIN_HD __host__ __device__ inline
#else
#define LMTRAIN_HD inline
#endif

namespace lmtrain::kernels {

#if !defined(__CUDACC__)
// Unqualified calls below pick the float or double overload (nvcc provides both globally).
using std::cos;
using std::erf;
using std::exp;
using std::expm1;
using std::fabs;
using std::fmax;
using std::log;
using std::log1p;
using std::sin;
using std::sqrt;
using std::tanh;
#endif

template <typename T>
LMTRAIN_HD T sigmoid(T z) {
  // Two branches so exp never overflows.
  if (z >= T(0)) return T(1) / (T(1) + exp(-z));
  const T e = exp(z);
  return e / (T(1) + e);
}

template <typename T>
LMTRAIN_HD T softplus(T z) {
  return z > T(0) ? z + log1p(exp(-z)) : log1p(exp(z));
}

template <typename T>
LMTRAIN_HD T activate(Activation f, T z) {
  switch (f) {
    case Activation::kIdentity:
      return z;
    case Activation::kTanh:
      return tanh(z);
    case Activation::kSigmoid:
      return sigmoid(z);
    case Activation::kRelu:
      return z > T(0) ? z : T(0);
    case Activation::kElu:
      return z > T(0) ? z : expm1(z);
    case Activation::kGelu:
      return T(0.5) * z * (T(1) + erf(z * T(0.70710678118654752440)));
    case Activation::kSoftplus:
      return softplus(z);
    case Activation::kSin:
      return sin(z);
  }
  return z;
}

// φ'(z) given z and a = φ(z).
template <typename T>
LMTRAIN_HD T activate_derivative(Activation f, T z, T a) {
  switch (f) {
    case Activation::kIdentity:
      return T(1);
    case Activation::kTanh:
      return T(1) - a * a;
    case Activation::kSigmoid:
      return a * (T(1) - a);
    case Activation::kRelu:
      return z > T(0) ? T(1) : T(0);
    case Activation::kElu:
      return z > T(0) ? T(1) : a + T(1);
    case Activation::kGelu: {
      // Φ(z) + z φ(z)
      const T cdf = T(0.5) * (T(1) + erf(z * T(0.70710678118654752440)));
      const T pdf = T(0.39894228040143267794) * exp(T(-0.5) * z * z);
      return cdf + z * pdf;
    }
    case Activation::kSoftplus:
      return sigmoid(z);
    case Activation::kSin:
      return cos(z);
  }
  return T(1);
}

}  // namespace lmtrain::kernels
