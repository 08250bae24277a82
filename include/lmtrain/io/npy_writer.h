// Writing NumPy .npy files (format 1.0, or 2.0 when the header outgrows 1.0's 64 KiB) so that
// predictions load with numpy.load.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "lmtrain/io/numeric_table.h"

namespace lmtrain::io {

// The complete .npy file for `values` (C order) with the given shape, dtype '<f8' for double and
// '<f4' for float.  The header is padded with spaces and a final '\n' so the data starts on a
// 64-byte boundary, as numpy itself writes it.  Throws InvalidArgument when the shape's product
// differs from values.size().
template <typename T>
std::string encode_npy(std::span<const T> values, std::span<const std::size_t> shape);

// Writes encode_npy(values, shape) to `path` atomically (see write_file_atomically): readers see
// the old file or the complete new one, never a partial file.  Throws lmtrain::Error when the
// file cannot be written.
template <typename T>
void write_npy(const std::string& path, std::span<const T> values,
               std::span<const std::size_t> shape);

// A table as a 2-D rows × cols array of doubles.
void write_npy(const std::string& path, const NumericTable& table);

}  // namespace lmtrain::io
