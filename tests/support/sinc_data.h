// W1's data shape for the tests: y = sinc(f·x) = sin(πf·x)/(πf·x) on `samples` equispaced points
// of x ∈ [−1, 1] (W1 and W2 use f = 10).
#pragma once

#include <cmath>
#include <cstddef>
#include <numbers>

#include "lmtrain/train/dataset.h"

namespace lmtrain::testing {

template <typename T>
Dataset<T> sinc_on_grid(std::size_t samples, double frequency = 10.0) {
  Dataset<T> d(samples, 1, 1);
  for (std::size_t i = 0; i < samples; ++i) {
    const double x = -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(samples - 1);
    const double t = std::numbers::pi * frequency * x;
    d.x[i] = static_cast<T>(x);
    d.y[i] = static_cast<T>(t == 0 ? 1.0 : std::sin(t) / t);
  }
  return d;
}

}  // namespace lmtrain::testing
