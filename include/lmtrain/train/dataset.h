// Samples in host memory, row-major: x (samples × inputs), y (samples × outputs).  For
// classification y holds one-hot rows (or class probabilities).
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

  Dataset() = default;
  Dataset(std::size_t n, std::size_t in, std::size_t out)
      : samples(n), inputs(in), outputs(out), x(n * in), y(n * out) {}

  // Throws InvalidArgument if the sizes disagree or a value is NaN/±∞ (naming `what`, the
  // sample and the column).
  void validate(const std::string& what) const;
};

}  // namespace lmtrain
