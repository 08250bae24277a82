#include "lmtrain/io/numeric_table.h"

#include <fmt/format.h>

namespace lmtrain::io {

std::string NumericTable::row_location(std::size_t r) const {
  if (r < source_lines.size()) return fmt::format("{}:{}", source, source_lines[r]);
  return fmt::format("{} row {}", source, r);
}

std::string NumericTable::column_label(std::size_t c) const {
  if (c < column_names.size()) return fmt::format("column index {} (\"{}\")", c, column_names[c]);
  return fmt::format("column index {}", c);
}

}  // namespace lmtrain::io
