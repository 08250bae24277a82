// The result of every data-file reader in io/: a dense table of doubles, row-major, with where
// each row came from so that later errors (a label out of range, a NaN found by validation) can
// point the user at the file and line to fix.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace lmtrain::io {

struct NumericTable {
  std::size_t rows = 0;
  std::size_t cols = 0;
  // rows × cols values, row-major: value (r, c) is values[r * cols + c].
  std::vector<double> values;
  // One name per column when the file has them (a CSV header row); empty otherwise.
  std::vector<std::string> column_names;
  // The array's shape as stored in the file before it was flattened to rows × cols
  // (NPY: the `shape` tuple; IDX: the dimensions; text formats: {rows, cols}).  A convolutional
  // model reads the image height and width from here.
  std::vector<std::size_t> shape;
  // The path the table was read from (or the name given to an in-memory parser).
  std::string source;
  // Text formats: the 1-based line on which each row starts (rows entries).  Binary formats
  // (NPY, IDX) have no lines and leave this empty.
  std::vector<std::size_t> source_lines;
  // A label column read as text (CsvOptions::labels): its values are indices into these class
  // names.  Empty otherwise.
  std::vector<std::string> class_names;

  double operator()(std::size_t r, std::size_t c) const { return values[r * cols + c]; }
  double& operator()(std::size_t r, std::size_t c) { return values[r * cols + c]; }
  std::span<const double> row(std::size_t r) const {
    return std::span<const double>(values).subspan(r * cols, cols);
  }

  // Where row r came from, for error messages: "data.csv:17" (line 17) for text files,
  // "images.idx row 5" (0-based) for binary files.
  std::string row_location(std::size_t r) const;
  // "column index 2 (\"price\")": c is 0-based as in column selection; the name when known.
  std::string column_label(std::size_t c) const;
};

}  // namespace lmtrain::io
