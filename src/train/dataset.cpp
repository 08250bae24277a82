#include "lmtrain/train/dataset.h"

#include <fmt/format.h>

#include <cmath>

#include "lmtrain/core/error.h"

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
}

template struct Dataset<float>;
template struct Dataset<double>;

}  // namespace lmtrain
