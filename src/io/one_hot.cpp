#include "lmtrain/io/one_hot.h"

#include <fmt/format.h>

#include <cmath>

#include "lmtrain/core/error.h"

namespace lmtrain::io {
namespace {

void check_single_column(const NumericTable& labels) {
  if (labels.cols != 1)
    throw InvalidArgument(fmt::format(
        "{}: class labels must be one column of class indices, the table has {} columns; select "
        "the label column (or, if the targets are already one-hot, use them as they are)",
        labels.source, labels.cols));
}

// The label of row r as a class index, or a message-bearing exception.
std::size_t class_of(const NumericTable& labels, std::size_t r, std::size_t num_classes) {
  const double v = labels.values[r];
  if (!(v >= 0.0) || v != std::floor(v) || v >= static_cast<double>(num_classes))
    throw InvalidArgument(fmt::format(
        "{}: label {} is not a class index in 0..{}: labels must be integers from 0 to "
        "num_classes − 1; renumber the classes or raise num_classes{}",
        labels.row_location(r), v, num_classes - 1,
        num_classes > 0 && v == static_cast<double>(num_classes) ? " (1-based labels? subtract 1)"
                                                                 : ""));
  return static_cast<std::size_t>(v);
}

}  // namespace

std::size_t count_classes(const NumericTable& labels) {
  check_single_column(labels);
  double largest = 0.0;
  for (std::size_t r = 0; r < labels.rows; ++r) {
    const double v = labels.values[r];
    if (!(v >= 0.0) || v != std::floor(v) || v > 1e9)
      throw InvalidArgument(
          fmt::format("{}: label {} is not a class index: labels must be integers from 0 to "
                      "num_classes − 1 (at most 1e9)",
                      labels.row_location(r), v));
    largest = std::max(largest, v);
  }
  return static_cast<std::size_t>(largest) + 1;
}

NumericTable one_hot(const NumericTable& labels, std::size_t num_classes) {
  check_single_column(labels);
  if (num_classes == 0)
    throw InvalidArgument(fmt::format("{}: one_hot needs num_classes ≥ 1, got 0", labels.source));
  NumericTable out;
  out.rows = labels.rows;
  out.cols = num_classes;
  out.source = labels.source;
  out.source_lines = labels.source_lines;
  out.shape = {out.rows, out.cols};
  out.values.assign(out.rows * out.cols, 0.0);
  out.column_names.reserve(num_classes);
  for (std::size_t c = 0; c < num_classes; ++c)
    out.column_names.push_back(fmt::format("class_{}", c));
  for (std::size_t r = 0; r < labels.rows; ++r) out(r, class_of(labels, r, num_classes)) = 1.0;
  return out;
}

}  // namespace lmtrain::io
