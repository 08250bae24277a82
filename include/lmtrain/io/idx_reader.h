// Reading IDX files, the format of MNIST, Fashion-MNIST, EMNIST and KMNIST
// (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT").
#pragma once

#include <string>
#include <string_view>

#include "lmtrain/io/numeric_table.h"

namespace lmtrain::io {

// Reads an IDX file, plain or gzip-compressed (the .gz files as distributed).  Layout: two zero
// bytes, a type code (0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64), the number of
// dimensions, then each dimension as a big-endian uint32, then the big-endian values in C order.
//
// Dimensions → table: (n) → n × 1, a column (labels: class indices); (n, h, w) → n × (h·w)
// (images: one row of pixels per image); generally n × (product of the rest).  Values are
// converted to double as they are: no scaling (that is normalization's job).  The dimensions are
// kept in NumericTable::shape.
//
// Throws InvalidArgument naming the file for: a wrong magic (not IDX), an unknown type code,
// zero dimensions, a file shorter (truncated) or longer than its dimensions say, no rows.
NumericTable read_idx(const std::string& path);

// The same on bytes already in memory; `source` names them in messages and in the result.
NumericTable parse_idx(std::string_view bytes, const std::string& source);

}  // namespace lmtrain::io
