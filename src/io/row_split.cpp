#include "lmtrain/io/row_split.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

#include "lmtrain/core/error.h"
#include "lmtrain/core/rng.h"

namespace lmtrain::io {

RowSplit split_rows(std::size_t rows, double validation_fraction, double test_fraction,
                    std::uint64_t seed) {
  for (const auto& [name, value] : {std::pair{"validation_fraction", validation_fraction},
                                    std::pair{"test_fraction", test_fraction}})
    if (!(value >= 0.0 && value < 1.0))
      throw InvalidArgument(fmt::format(
          "{} = {}: expected a fraction in [0, 1) of the rows to hold out", name, value));
  std::vector<std::size_t> order(rows);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Rng rng(seed ^ 0x5eed5711u);
  rng.shuffle(std::span<std::size_t>(order));
  const auto n = static_cast<double>(rows);
  const auto nv = static_cast<std::size_t>(std::floor(validation_fraction * n));
  const auto nt = static_cast<std::size_t>(std::floor(test_fraction * n));
  if (nv + nt >= rows)
    throw InvalidArgument(fmt::format(
        "the validation and test fractions ({} and {}) leave no training rows out of {}",
        validation_fraction, test_fraction, rows));
  RowSplit split;
  const auto v_end = order.begin() + static_cast<long>(nv);
  const auto t_end = v_end + static_cast<long>(nt);
  split.validation.assign(order.begin(), v_end);
  split.test.assign(v_end, t_end);
  split.train.assign(t_end, order.end());
  std::sort(split.train.begin(), split.train.end());
  return split;
}

}  // namespace lmtrain::io
