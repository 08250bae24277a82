#include "arrays.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace lmtrain::python {

namespace nb = nanobind;

MatrixView::MatrixView(const HostArray& array, std::string what) : what_(std::move(what)) {
  if (array.dtype() == nb::dtype<double>())
    is_double_ = true;
  else if (array.dtype() == nb::dtype<float>())
    is_double_ = false;
  else
    throw nb::type_error(
        fmt::format("{}: expected a float32 or float64 array, got another dtype", what_).c_str());
  if (array.ndim() != 2)
    throw nb::value_error(
        fmt::format("{}: expected a 2-D array (samples × columns), got {} dimensions", what_,
                    array.ndim())
            .c_str());
  data_ = array.data();
  rows_ = array.shape(0);
  cols_ = array.shape(1);
}

namespace {

template <typename S>
io::Standardization fit_on(const MatrixView& m, const std::vector<std::size_t>* rows,
                           std::span<const double> weights) {
  const std::span<const S> all = m.values<S>();
  if (rows == nullptr) return io::Standardization::fit<S>(all, m.cols(), weights);
  std::vector<S> chosen;
  std::vector<double> chosen_weights;
  chosen.reserve(rows->size() * m.cols());
  for (std::size_t r : *rows) {
    chosen.insert(chosen.end(), all.begin() + static_cast<long>(r * m.cols()),
                  all.begin() + static_cast<long>((r + 1) * m.cols()));
    if (!weights.empty()) chosen_weights.push_back(weights[r]);
  }
  return io::Standardization::fit<S>(std::span<const S>(chosen), m.cols(), chosen_weights);
}

}  // namespace

io::Standardization fit_standardization(const MatrixView& m, const std::vector<std::size_t>* rows,
                                        std::span<const double> weights) {
  return m.is_double() ? fit_on<double>(m, rows, weights) : fit_on<float>(m, rows, weights);
}

template <typename T>
std::vector<T> library_values(const MatrixView& m, const std::vector<std::size_t>* rows,
                              const io::Standardization& s) {
  const std::size_t n = rows != nullptr ? rows->size() : m.rows(), cols = m.cols();
  std::vector<T> out(n * cols);
  // Rows in blocks through a double buffer: standardize in double, round to T once.
  constexpr std::size_t kBlock = 256;
  std::vector<double> block;
  for (std::size_t first = 0; first < n; first += kBlock) {
    const std::size_t count = std::min(kBlock, n - first);
    block.resize(count * cols);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t r = rows != nullptr ? (*rows)[first + i] : first + i;
      for (std::size_t c = 0; c < cols; ++c) block[i * cols + c] = m.at(r, c);
    }
    s.apply(std::span<double>(block));
    std::transform(block.begin(), block.end(), out.begin() + static_cast<long>(first * cols),
                   [](double v) { return static_cast<T>(v); });
  }
  return out;
}

template <typename T>
std::vector<T> one_hot_rows(const HostArray& labels, std::size_t classes,
                            const std::vector<std::size_t>* rows) {
  if (labels.dtype() != nb::dtype<std::int64_t>() || labels.ndim() != 1)
    throw nb::type_error("y: expected a 1-D int64 array of class indices");
  const auto* codes = static_cast<const std::int64_t*>(labels.data());
  const std::size_t n = rows != nullptr ? rows->size() : labels.shape(0);
  std::vector<T> out(n * classes, T(0));
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t k = codes[rows != nullptr ? (*rows)[i] : i];
    if (k < 0 || static_cast<std::size_t>(k) >= classes)
      throw nb::value_error(
          fmt::format("y: class index {} at row {} is outside [0, {})", k, i, classes).c_str());
    out[i * classes + static_cast<std::size_t>(k)] = T(1);
  }
  return out;
}

template std::vector<float> library_values<float>(const MatrixView&,
                                                  const std::vector<std::size_t>*,
                                                  const io::Standardization&);
template std::vector<double> library_values<double>(const MatrixView&,
                                                    const std::vector<std::size_t>*,
                                                    const io::Standardization&);
template std::vector<float> one_hot_rows<float>(const HostArray&, std::size_t,
                                                const std::vector<std::size_t>*);
template std::vector<double> one_hot_rows<double>(const HostArray&, std::size_t,
                                                  const std::vector<std::size_t>*);

}  // namespace lmtrain::python
