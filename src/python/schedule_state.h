// The step schedule's state as lmtrain.torch's state_dict holds it: the damping's (λ, ν, floor)
// and GeodesicBackoff's (skip, backoff), shared by the native step and the damped normal
// equations of the torch path.
#pragma once

#include <fmt/format.h>
#include <nanobind/nanobind.h>

#include <cmath>
#include <tuple>
#include <utility>

#include "lmtrain/solve/damping.h"
#include "lmtrain/solve/geodesic_acceleration.h"

namespace lmtrain::python {

using ScheduleTuple = std::tuple<double, double, double, int, int>;

inline ScheduleTuple schedule_tuple(const DampingStrategy::State& d,
                                    const GeodesicBackoff::State& g) {
  return {d.lambda, d.nu, d.floor, g.skip, g.backoff};
}

// The state a caller hands back, checked: ValueError naming what is out of range.
inline std::pair<DampingStrategy::State, GeodesicBackoff::State> schedule_state(
    double lambda, double nu, double floor, int skip, int backoff) {
  if (!(std::isfinite(lambda) && lambda > 0) || !(nu >= 1) || !(floor >= 0) || skip < 0 ||
      backoff < 0)
    throw nanobind::value_error(
        fmt::format("optimizer state lambda = {}, nu = {}, floor = {}, geodesic_skip = {}, "
                    "geodesic_backoff = {}: expected lambda > 0, nu ≥ 1, floor ≥ 0 and the "
                    "geodesic counts ≥ 0",
                    lambda, nu, floor, skip, backoff)
            .c_str());
  return {{lambda, nu, floor}, {skip, backoff}};
}

}  // namespace lmtrain::python
