// Decisions of the LM step that a backend takes on the device, so that the step reads their
// outcome with its other scalars instead of waiting for the device to decide (issue 36): one
// formula for the CPU and CUDA backends (compiled as __host__ __device__ under nvcc).
#pragma once

#include <cmath>

#include "activation_math.h"

namespace lmtrain::kernels {

#if !defined(__CUDACC__)
using std::isfinite;
using std::sqrt;
#endif

// Geodesic acceleration's ratio test (include/lmtrain/solve/geodesic_acceleration.h): the
// correction a (Σa² = `a_squares`) is kept for the velocity v = lr·δ (Σδ² = `delta_squares`)
// when ‖a‖ is finite and 2‖a‖ ≤ ratio·‖v‖.
LMTRAIN_HD bool geodesic_ratio_holds(double a_squares, double delta_squares, double lr,
                                     double ratio) {
  const double a = sqrt(a_squares);
  const double v = lr * sqrt(delta_squares);
  return isfinite(a) && 2 * a <= ratio * v;
}

}  // namespace lmtrain::kernels
