// The one rule for sample weights (train/dataset.h): each finite and ≥ 0, and not all 0.  The
// engine (Dataset::validate), `lmtrain fit`'s reader (io/table.h) and the Python front end check
// it with this function and each names the culprit in its own terms (a sample's index, a file's
// line, `sample_weight[i]`).
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <span>

namespace lmtrain {

struct SampleWeightProblem {
  std::size_t index = 0;  // the first weight that is not finite or is negative
  bool all_zero = false;  // every weight is valid but they sum to 0 (index unused)
};

template <typename T>
std::optional<SampleWeightProblem> sample_weight_problem(std::span<const T> weights) {
  double total = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double w = static_cast<double>(weights[i]);
    if (!std::isfinite(w) || w < 0) return SampleWeightProblem{i, false};
    total += w;
  }
  if (!(total > 0)) return SampleWeightProblem{0, true};
  return std::nullopt;
}

}  // namespace lmtrain
