#include "lmtrain/train/dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>

#include "lmtrain/core/error.h"
#include "lmtrain/core/sample_weights.h"

namespace lmtrain {

template <typename T>
void Dataset<T>::validate(const std::string& what) const {
  if (samples == 0) throw InvalidArgument(fmt::format("{}: no samples", what));
  if (x.size() != samples * inputs)
    throw InvalidArgument(fmt::format("{}: x holds {} values, expected samples × inputs = {} × {}",
                                      what, x.size(), samples, inputs));
  if (y.size() != samples * outputs)
    throw InvalidArgument(fmt::format("{}: y holds {} values, expected samples × outputs = {} × {}",
                                      what, y.size(), samples, outputs));
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i]))
      throw InvalidArgument(
          fmt::format("{}: input of sample {} column {} is {}; remove or impute "
                      "non-finite values before training",
                      what, i / inputs, i % inputs, x[i]));
  for (std::size_t i = 0; i < y.size(); ++i)
    if (!std::isfinite(y[i]))
      throw InvalidArgument(
          fmt::format("{}: target of sample {} column {} is {}; remove or impute "
                      "non-finite values before training",
                      what, i / outputs, i % outputs, y[i]));
  if (weights.empty()) return;
  if (weights.size() != samples)
    throw InvalidArgument(
        fmt::format("{}: {} sample weights for {} samples; give one weight per sample, or none",
                    what, weights.size(), samples));
  const std::optional<SampleWeightProblem> problem =
      sample_weight_problem(std::span<const T>(weights));
  if (!problem) return;
  if (problem->all_zero)
    throw InvalidArgument(fmt::format(
        "{}: every sample weight is 0; at least one sample must have a positive weight", what));
  throw InvalidArgument(
      fmt::format("{}: the weight of sample {} is {}; sample weights must be finite and ≥ 0", what,
                  problem->index, weights[problem->index]));
}

template <typename T>
double Dataset<T>::total_weight() const {
  if (weights.empty()) return static_cast<double>(samples);
  double total = 0;
  for (const T w : weights) total += static_cast<double>(w);
  return total;
}

template <typename T>
std::vector<T> Dataset<T>::targets_with_weights() const {
  std::vector<T> rows(samples * (outputs + 1));
  for (std::size_t i = 0; i < samples; ++i) {
    std::copy(y.begin() + static_cast<std::ptrdiff_t>(i * outputs),
              y.begin() + static_cast<std::ptrdiff_t>((i + 1) * outputs),
              rows.begin() + static_cast<std::ptrdiff_t>(i * (outputs + 1)));
    rows[i * (outputs + 1) + outputs] = weights.empty() ? T(1) : weights[i];
  }
  return rows;
}

template struct Dataset<float>;
template struct Dataset<double>;

}  // namespace lmtrain
