// Column-wise standardization x' = (x − mean)/scale with the training rows' mean and population
// standard deviation (a constant column is only centred: scale 1).  The one definition: `lmtrain
// fit` fits it on the training split and applies it to every split, the model file stores it and
// `predict` applies it, the bench and the Python package call the same functions.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "lmtrain/io/numeric_table.h"

namespace lmtrain::io {

struct Standardization {
  std::vector<double> mean;   // one per column; empty: no standardization
  std::vector<double> scale;  // every entry > 0

  bool empty() const { return mean.empty(); }
  std::size_t columns() const { return mean.size(); }

  // Fitted on `values`, rows of `cols` values (row-major; at least one row).  With `weights` (one
  // per row, ≥ 0, not all 0: sample weights) the mean and standard deviation are weighted — those
  // of the rows repeated as often as integer weights say.
  static Standardization fit(std::span<const double> values, std::size_t cols);
  template <typename T>
  static Standardization fit(std::span<const T> values, std::size_t cols,
                             std::span<const double> weights = {});
  static Standardization fit(const NumericTable& table) {
    return fit(std::span<const double>(table.values), table.cols);
  }

  // values ← (values − mean)/scale per column, in place, computed in double and rounded to T once.
  // Nothing when empty(); throws InvalidArgument when values.size() is not a whole number of rows
  // of columns() values.
  template <typename T>
  void apply(std::span<T> values) const;
  void apply(NumericTable& table) const { apply(std::span<double>(table.values)); }
  // values ← values·scale + mean: back to the original units.
  template <typename T>
  void invert(std::span<T> values) const;
};

}  // namespace lmtrain::io
