// Checks every fuzz target applies to a table a reader returned: the shape fields agree with the
// data, so no consumer can index out of bounds.
#pragma once

#include <cstdlib>

#include "lmtrain/io/numeric_table.h"

namespace lmtrain::io::fuzzing {

inline void check_table(const NumericTable& t, bool has_lines) {
  std::size_t shape_count = 1;
  for (std::size_t d : t.shape) shape_count *= d;
  if (t.values.size() != t.rows * t.cols || t.rows == 0 || shape_count != t.values.size() ||
      (!t.column_names.empty() && t.column_names.size() != t.cols) ||
      (has_lines ? t.source_lines.size() != t.rows : !t.source_lines.empty()))
    std::abort();
}

}  // namespace lmtrain::io::fuzzing
