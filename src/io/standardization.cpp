#include "lmtrain/io/standardization.h"

#include <fmt/format.h>

#include <cmath>

#include "lmtrain/core/error.h"

namespace lmtrain::io {
namespace {

void check_rows(std::size_t values, std::size_t cols, const char* what) {
  if (cols == 0 || values % cols != 0)
    throw InvalidArgument(
        fmt::format("{}: {} values are not whole rows of the standardization's {} columns", what,
                    values, cols));
}

}  // namespace

template <typename T>
Standardization Standardization::fit(std::span<const T> values, std::size_t cols,
                                     std::span<const double> weights) {
  check_rows(values.size(), cols, "Standardization::fit");
  const std::size_t rows = values.size() / cols;
  if (rows == 0) throw InvalidArgument("Standardization::fit: no rows to fit on");
  if (!weights.empty() && weights.size() != rows)
    throw InvalidArgument(
        fmt::format("Standardization::fit: {} weights for {} rows", weights.size(), rows));
  // Without weights every row weighs 1: the sums below are then the plain ones, bit for bit.
  auto weight = [&](std::size_t r) { return weights.empty() ? 1.0 : weights[r]; };
  double total = 0;
  for (std::size_t r = 0; r < rows; ++r) total += weight(r);
  if (!(total > 0)) throw InvalidArgument("Standardization::fit: the rows' weights sum to 0");
  Standardization s;
  s.mean.assign(cols, 0.0);
  s.scale.assign(cols, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c)
      s.mean[c] += weight(r) * static_cast<double>(values[r * cols + c]);
  for (auto& m : s.mean) m /= total;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const double d = static_cast<double>(values[r * cols + c]) - s.mean[c];
      s.scale[c] += weight(r) * d * d;
    }
  for (auto& v : s.scale) {
    v = std::sqrt(v / total);
    if (!(v > 1e-12)) v = 1.0;  // a constant column is left centred, not blown up
  }
  return s;
}

Standardization Standardization::fit(std::span<const double> values, std::size_t cols) {
  return fit<double>(values, cols);
}

template <typename T>
void Standardization::apply(std::span<T> values) const {
  if (empty()) return;
  check_rows(values.size(), columns(), "Standardization::apply");
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::size_t c = i % columns();
    values[i] = static_cast<T>((static_cast<double>(values[i]) - mean[c]) / scale[c]);
  }
}

template <typename T>
void Standardization::invert(std::span<T> values) const {
  if (empty()) return;
  check_rows(values.size(), columns(), "Standardization::invert");
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::size_t c = i % columns();
    values[i] = static_cast<T>(static_cast<double>(values[i]) * scale[c] + mean[c]);
  }
}

template Standardization Standardization::fit<float>(std::span<const float>, std::size_t,
                                                     std::span<const double>);
template Standardization Standardization::fit<double>(std::span<const double>, std::size_t,
                                                      std::span<const double>);
template void Standardization::apply<float>(std::span<float>) const;
template void Standardization::apply<double>(std::span<double>) const;
template void Standardization::invert<float>(std::span<float>) const;
template void Standardization::invert<double>(std::span<double>) const;

}  // namespace lmtrain::io
