// Reading a labeled table — inputs and targets, row-aligned — from any supported data file, and
// telling the format from the file name.  The one definition: `lmtrain fit`, `predict` and `eval`,
// the bench and the Python package call these.
//
// Formats: CSV (also .tsv, .txt; a header names the columns), NPY, IDX (the MNIST family; a name
// containing "idx" also counts), FANN's text format (.data, .train, .test, .fann); a trailing .gz
// is read through zlib.  NPY and IDX files hold inputs only: the targets come from a second file.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lmtrain/io/numeric_table.h"

namespace lmtrain::io {

enum class DataFormat { kCsv, kNpy, kIdx, kFann };
std::string_view to_string(DataFormat format);
std::optional<DataFormat> parse_data_format(std::string_view name);  // "csv", "npy", "idx", "fann"
// From the file name, case-insensitively, ignoring a trailing .gz; nothing when it does not tell.
std::optional<DataFormat> detect_data_format(const std::string& path);

// Where a table comes from.
struct TableSource {
  std::string what = "data";  // how messages name this source ("data.train", "--data")
  std::string path;
  std::string targets_path;          // npy / idx: the targets (or class labels) file
  std::optional<DataFormat> format;  // nothing: from the file name
  std::vector<std::string> inputs;   // csv: column names or 0-based indices; empty: all but targets
  std::vector<std::string> targets;  // csv: column names or indices; empty: the last column
  char delimiter = ',';
  std::size_t rows = 0;  // only the first rows (0: all)
  // Sample weights (train/dataset.h): a csv column (name or 0-based index; not an input by
  // default), or an NPY file of one value per row, for any format.  Both empty: unweighted.
  std::string weights;
  std::string weights_path;
};

// Inputs and targets of one source, row-aligned.  For classification, targets are one-hot rows.
struct LabeledTable {
  NumericTable inputs;
  NumericTable targets;
  std::string description;  // "train.csv (800 rows)"
  // Classification: class k's name (a CSV's text labels, sorted), or empty (class indices).
  std::vector<std::string> class_names;
  // Sample weights: rows × 1 (each finite, ≥ 0, not all 0), or no columns when unweighted.
  NumericTable weights;

  bool weighted() const { return weights.cols > 0; }
};

// Reads `source`.  With `classification` a single target column holds class labels, turned into
// one-hot rows of `classes` columns (0: the largest label + 1, or the number of names).  A CSV's
// labels may be text (io::CsvLabels): `class_names` null — this file decides (the sorted distinct
// names when any label is not a number); non-null — the names the training data or the model
// gave (empty: class indices only).  The source's sample weights, when it names them, are
// checked here (a negative, non-finite or all-zero weight names its file and line).  Throws
// InvalidArgument naming the file, the line or column and what to do.
LabeledTable read_labeled_table(const TableSource& source, bool classification,
                                std::size_t classes = 0,
                                const std::vector<std::string>* class_names = nullptr);

// The inputs alone, for a model that takes `expected_inputs` features: the named columns, or —
// for a CSV with more columns than that and none named — the first `expected_inputs` (the
// targets, when the file has them, come last).
NumericTable read_input_table(const TableSource& source, std::size_t expected_inputs);

// The rows `rows` of a table (in that order), described as `what`.
LabeledTable select_rows(const LabeledTable& table, std::span<const std::size_t> rows,
                         const std::string& what);

}  // namespace lmtrain::io
