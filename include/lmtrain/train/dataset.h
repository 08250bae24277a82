// Samples in host memory, row-major: x (samples × inputs), y (samples × outputs).  For
// classification y holds one-hot rows (or class probabilities).  `weights` (empty: all 1) are the
// samples' weights, scikit-learn's sample_weight: a sample of weight w counts as w copies of
// itself in the loss, its gradient and JᵀJ (core/loss_kind.h), and the reported losses are
// weighted means.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lmtrain {

template <typename T>
struct Dataset {
  std::size_t samples = 0;
  std::size_t inputs = 0;
  std::size_t outputs = 0;
  std::vector<T> x;
  std::vector<T> y;
  std::vector<T> weights;

  Dataset() = default;
  Dataset(std::size_t n, std::size_t in, std::size_t out)
      : samples(n), inputs(in), outputs(out), x(n * in), y(n * out) {}

  // Throws InvalidArgument if the sizes disagree or a value is NaN/±∞ (naming `what`, the
  // sample and the column), a weight is negative, or every weight is 0.
  void validate(const std::string& what) const;
  // Σ weights (the sample count when unweighted).
  double total_weight() const;
  // The target rows a sample-weighted loss reads (nn/loss.h): each sample's targets followed by
  // its weight (1 when the set has none).  An unweighted loss reads y itself.
  std::vector<T> targets_with_weights() const;
};

}  // namespace lmtrain
