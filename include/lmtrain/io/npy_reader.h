// Reading NumPy .npy files (format versions 1.0, 2.0 and 3.0, as specified in
// numpy/lib/format.py and NEP 1).
#pragma once

#include <string>
#include <string_view>

#include "lmtrain/io/numeric_table.h"

namespace lmtrain::io {

// Reads one array saved by numpy.save (plain or gzip-compressed).  Supported element types are
// the little-endian (or byte-order-free) numeric ones: <f4 <f8 <i1 <i2 <i4 <i8 <u1 <u2 <u4 <u8,
// |i1 |u1 (and =… / native spellings of the same on this little-endian host).  Values are
// converted to double exactly, except 64-bit integers beyond ±2⁵³, which round to the nearest
// double.  Array layout: C order only.
//
// Shape → table: (n,) → n × 1 (a column); (n, k) → n × k; (n, d1, …, dk) → n × (d1·…·dk) with
// the trailing dimensions flattened in C order (images → rows of pixels); () → 1 × 1.  The
// original shape is kept in NumericTable::shape.
//
// Throws InvalidArgument naming the file for: bad magic (not an .npy file), an unknown format
// version, a header that does not parse, fortran_order True, an unsupported or big-endian dtype,
// a file shorter or longer than the header's shape promises, and an array with no rows.
NumericTable read_npy(const std::string& path);

// The same on bytes already in memory; `source` names them in messages and in the result.
NumericTable parse_npy(std::string_view bytes, const std::string& source);

}  // namespace lmtrain::io
