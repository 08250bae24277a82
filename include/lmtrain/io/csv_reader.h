// Reading numeric CSV files (RFC 4180 quoting, plus the habits of real files: '#' comment lines,
// blank lines, CRLF line ends, spaces around fields, gzip compression).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lmtrain/io/column_ref.h"
#include "lmtrain/io/numeric_table.h"

namespace lmtrain::io {

enum class CsvHeader {
  // The first record is a header when one of its fields is neither empty nor a number.
  kAuto,
  kPresent,  // the first record names the columns
  kAbsent,   // every record is data
};

// A column of class labels, which may be text ("setosa", "virginica") as well as class indices.
struct CsvLabels {
  std::optional<ColumnRef> column;  // nothing: the last column
  // true: this file decides — numbers are class indices as they are, and when any cell is not a
  // number every cell is a name and the classes are the sorted distinct names (byte order, as
  // numpy's np.unique and scikit-learn's LabelEncoder sort them).  false: the cells name
  // `classes` (a number also matches a name that is the same number's text: "3.0" matches "3"),
  // or are class indices when `classes` is empty (training data or a model that named none).
  bool file_decides = true;
  std::vector<std::string> classes;
};

struct CsvOptions {
  // Field separator: ',' (default), ';', '\t', ' ', '|' …  Runs of the delimiter are not merged:
  // "1,,2" has an empty middle field (an error in a selected column).
  char delimiter = ',';
  CsvHeader header = CsvHeader::kAuto;
  // Lines whose first non-blank character is this one are skipped; '\0' disables comments.
  char comment = '#';
  // Columns to read, in the order wanted.  Empty: every column.  Only selected columns must be
  // numeric, so a text column (an id, a date) can be left out.
  std::vector<ColumnRef> columns;
  // NaN and ±Inf cells ("nan", "inf", "-Infinity") are errors unless allowed here: a non-finite
  // value in training data silently poisons JᵀJ.
  bool allow_non_finite = false;
  // A label column (among those read) whose cells become class indices, with the names in
  // NumericTable::class_names when they were text.  With kAuto, the label column's cell of the
  // first record does not make it a header: "5.1,3.5,setosa" is data.
  std::optional<CsvLabels> labels;
};

// Reads `path` (gzip-compressed or plain).  Every row has the same number of fields; each
// selected cell must be a number.  The result holds the selected columns, their header names
// (when there is a header) and the line each row starts on.
//
// Throws InvalidArgument naming the file, the line, the field and what was found, for: a file
// that cannot be opened or read (with the system's reason), a ragged row, a non-numeric or empty
// cell, a non-finite cell (unless allowed), a number out of double's range, an unterminated
// quote, an unknown column name (with the closest header name), a file without data rows, and a
// label that names none of CsvLabels::classes (listing them) or is text where indices are
// expected.
NumericTable read_csv(const std::string& path, const CsvOptions& options = {});

// The header's fields of `path` (options.header decides, as for read_csv), or nothing when the
// file has no header.  Reads the file's start, not all of it (a large or compressed file costs
// what its first records do).  Throws as read_csv for a file whose start it cannot read, or
// without data rows; damage past the header is read_csv's to find.
std::vector<std::string> read_csv_header(const std::string& path, const CsvOptions& options = {});

// The same on text already in memory; `source` names it in messages and in the result.
NumericTable parse_csv(std::string_view text, const std::string& source,
                       const CsvOptions& options = {});

}  // namespace lmtrain::io
