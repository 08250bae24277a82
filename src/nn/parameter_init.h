// The initialization schemes of model_spec.h's Init for a weight tensor and its bias, shared by
// Dense and Conv2d.  Draw order (all weights, then all biases) is part of the seeded result.
#pragma once

#include <cmath>
#include <span>

#include "lmtrain/core/rng.h"
#include "lmtrain/nn/model_spec.h"

namespace lmtrain {

template <typename T>
void initialize_weights_and_bias(std::span<T> weights, std::span<T> bias, double fan_in,
                                 double fan_out, Init init, Rng& rng) {
  switch (init) {
    case Init::kTorch: {
      const double bound = 1.0 / std::sqrt(fan_in);
      for (T& w : weights) w = static_cast<T>(rng.uniform(-bound, bound));
      for (T& b : bias) b = static_cast<T>(rng.uniform(-bound, bound));
      break;
    }
    case Init::kGlorot: {
      const double bound = std::sqrt(6.0 / (fan_in + fan_out));
      for (T& w : weights) w = static_cast<T>(rng.uniform(-bound, bound));
      for (T& b : bias) b = T(0);
      break;
    }
    case Init::kHe: {
      const double stddev = std::sqrt(2.0 / fan_in);
      for (T& w : weights) w = static_cast<T>(stddev * rng.normal());
      for (T& b : bias) b = T(0);
      break;
    }
  }
}

}  // namespace lmtrain
