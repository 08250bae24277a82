#include "lmtrain/io/table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "lmtrain/core/error.h"
#include "lmtrain/core/sample_weights.h"
#include "lmtrain/io/column_ref.h"
#include "lmtrain/io/csv_reader.h"
#include "lmtrain/io/fann_reader.h"
#include "lmtrain/io/idx_reader.h"
#include "lmtrain/io/npy_reader.h"
#include "lmtrain/io/one_hot.h"

namespace lmtrain::io {
namespace {

namespace fs = std::filesystem;

ColumnRef column_ref(const std::string& name) {
  std::size_t index = 0;
  const auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (ec == std::errc{} && p == name.data() + name.size()) return ColumnRef::by_index(index);
  return ColumnRef::by_name(name);
}

std::vector<ColumnRef> column_refs(const std::vector<std::string>& names) {
  std::vector<ColumnRef> refs;
  for (const auto& n : names) refs.push_back(column_ref(n));
  return refs;
}

NumericTable select_columns(const NumericTable& t, const std::vector<std::size_t>& cols) {
  NumericTable out;
  out.rows = t.rows;
  out.cols = cols.size();
  out.source = t.source;
  out.source_lines = t.source_lines;
  out.values.resize(out.rows * out.cols);
  for (std::size_t r = 0; r < t.rows; ++r)
    for (std::size_t c = 0; c < cols.size(); ++c) out.values[r * out.cols + c] = t(r, cols[c]);
  for (std::size_t c : cols)
    out.column_names.push_back(c < t.column_names.size() ? t.column_names[c] : std::to_string(c));
  return out;
}

NumericTable select_table_rows(const NumericTable& t, std::span<const std::size_t> rows) {
  NumericTable out;
  out.rows = rows.size();
  out.cols = t.cols;
  out.source = t.source;
  out.column_names = t.column_names;
  out.class_names = t.class_names;
  out.values.resize(out.rows * out.cols);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(t.values.begin() + static_cast<long>(rows[i] * t.cols), t.cols,
                out.values.begin() + static_cast<long>(i * t.cols));
    if (!t.source_lines.empty()) out.source_lines.push_back(t.source_lines[rows[i]]);
  }
  return out;
}

DataFormat format_of(const TableSource& s) {
  if (s.format) return *s.format;
  if (const auto f = detect_data_format(s.path)) return *f;
  throw InvalidArgument(fmt::format(
      "{}.path = \"{}\": cannot tell the format from the name; set {}.format to csv, npy, idx or "
      "fann",
      s.what, s.path, s.what));
}

void require_file(const std::string& path, const std::string& what) {
  if (!fs::exists(path))
    throw InvalidArgument(fmt::format("{}: {}: no such file; check the path", what, path));
}

LabeledTable read_csv_source(const TableSource& s, std::optional<CsvLabels> labels) {
  CsvOptions options;
  options.delimiter = s.delimiter;
  if (labels && s.targets.size() == 1) labels->column = column_ref(s.targets[0]);
  if (s.targets.size() <= 1) options.labels = std::move(labels);
  NumericTable table = read_csv(s.path, options);
  std::vector<std::string> class_names = std::move(table.class_names);
  const std::vector<std::size_t> target_cols =
      s.targets.empty()
          ? std::vector<std::size_t>{table.cols - 1}
          : resolve_columns(column_refs(s.targets), table.column_names, table.cols, s.path, 1);
  std::vector<std::size_t> weight_cols;
  if (!s.weights.empty()) {
    const std::vector<ColumnRef> weight_ref = {column_ref(s.weights)};
    weight_cols = resolve_columns(weight_ref, table.column_names, table.cols, s.path, 1);
    if (std::find(target_cols.begin(), target_cols.end(), weight_cols[0]) != target_cols.end())
      throw InvalidArgument(fmt::format(
          "{}: {}.weights = \"{}\" is a target column; name the weights' own column (the "
          "targets default to the last column: set {}.targets)",
          s.path, s.what, s.weights, s.what));
  }
  std::vector<std::size_t> input_cols;
  if (s.inputs.empty()) {
    for (std::size_t c = 0; c < table.cols; ++c)
      if (std::find(target_cols.begin(), target_cols.end(), c) == target_cols.end() &&
          (weight_cols.empty() || c != weight_cols[0]))
        input_cols.push_back(c);
  } else {
    input_cols = resolve_columns(column_refs(s.inputs), table.column_names, table.cols, s.path, 1);
  }
  if (input_cols.empty())
    throw InvalidArgument(
        fmt::format("{}: no input columns left after taking targets {}; set "
                    "{}.inputs",
                    s.path, fmt::join(s.targets, ", "), s.what));
  LabeledTable out{
      select_columns(table, input_cols), select_columns(table, target_cols), "", {}, {}};
  out.targets.class_names = std::move(class_names);
  if (!weight_cols.empty()) out.weights = select_columns(table, weight_cols);
  return out;
}

// The weights of an NPY file (one value per row of `rows`).
NumericTable read_weights_file(const TableSource& s, std::size_t rows) {
  require_file(s.weights_path, s.what + ".weights_path");
  NumericTable w = read_npy(s.weights_path);
  if (w.cols != 1 || w.rows != rows)
    throw InvalidArgument(fmt::format(
        "{}.weights_path = {}: {} × {} values; expected one weight per row of {} ({} rows)", s.what,
        s.weights_path, w.rows, w.cols, s.path, rows));
  return w;
}

// The weights' rule (core/sample_weights.h), or an error at the first bad one's file and line.
void check_weights(const TableSource& s, const NumericTable& w) {
  const std::optional<SampleWeightProblem> problem =
      sample_weight_problem(std::span<const double>(w.values));
  if (!problem) return;
  if (problem->all_zero)
    throw InvalidArgument(fmt::format(
        "{}: every sample weight of {} is 0; at least one sample must weigh more than 0", s.what,
        s.path));
  throw InvalidArgument(
      fmt::format("{}: {}: sample weight {} ({}); sample weights must be finite and ≥ 0", s.what,
                  w.row_location(problem->index), w(problem->index, 0),
                  s.weights.empty() ? s.weights_path : "column " + s.weights));
}

LabeledTable read_array_source(const TableSource& s, DataFormat format) {
  if (s.targets_path.empty())
    throw InvalidArgument(
        fmt::format("{}: a {} source holds inputs only; set {}.targets_path to "
                    "the targets (or labels) file",
                    s.path, to_string(format), s.what));
  auto read = [&](const std::string& p) {
    return format == DataFormat::kNpy ? read_npy(p) : read_idx(p);
  };
  require_file(s.targets_path, s.what + ".targets_path");
  LabeledTable out{read(s.path), read(s.targets_path), "", {}, {}};
  if (out.inputs.rows != out.targets.rows)
    throw InvalidArgument(
        fmt::format("{} has {} rows but {} has {}; inputs and targets must "
                    "have one row per sample",
                    s.path, out.inputs.rows, s.targets_path, out.targets.rows));
  return out;
}

}  // namespace

std::string_view to_string(DataFormat format) {
  switch (format) {
    case DataFormat::kCsv:
      return "csv";
    case DataFormat::kNpy:
      return "npy";
    case DataFormat::kIdx:
      return "idx";
    case DataFormat::kFann:
      return "fann";
  }
  return "?";
}

std::optional<DataFormat> parse_data_format(std::string_view name) {
  for (const DataFormat f :
       {DataFormat::kCsv, DataFormat::kNpy, DataFormat::kIdx, DataFormat::kFann})
    if (name == to_string(f)) return f;
  return std::nullopt;
}

std::optional<DataFormat> detect_data_format(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (name.size() > 3 && name.ends_with(".gz")) name.resize(name.size() - 3);
  const std::string ext = fs::path(name).extension().string();
  if (ext == ".csv" || ext == ".tsv" || ext == ".txt") return DataFormat::kCsv;
  if (ext == ".npy") return DataFormat::kNpy;
  if (ext == ".data" || ext == ".train" || ext == ".test" || ext == ".fann")
    return DataFormat::kFann;
  if (ext == ".idx" || name.find("idx") != std::string::npos) return DataFormat::kIdx;
  return std::nullopt;
}

LabeledTable read_labeled_table(const TableSource& s, bool classification, std::size_t classes,
                                const std::vector<std::string>* class_names) {
  require_file(s.path, s.what + ".path");
  const DataFormat format = format_of(s);
  if (!s.weights.empty() && format != DataFormat::kCsv)
    throw InvalidArgument(fmt::format(
        "{}.weights = \"{}\" names a column, but {} is a {} file; give the weights as an NPY "
        "file with {}.weights_path",
        s.what, s.weights, s.path, to_string(format), s.what));
  if (!s.weights.empty() && !s.weights_path.empty())
    throw InvalidArgument(
        fmt::format("{}: both weights (a column) and weights_path are set; give one", s.what));
  LabeledTable out;
  if (format == DataFormat::kCsv) {
    std::optional<CsvLabels> labels;
    if (classification) {
      labels.emplace();
      labels->file_decides = class_names == nullptr;
      if (class_names != nullptr) labels->classes = *class_names;
    }
    out = read_csv_source(s, std::move(labels));
  } else if (format == DataFormat::kFann) {
    FannTrainData fann = read_fann(s.path);
    out.inputs = std::move(fann.inputs);
    out.targets = std::move(fann.outputs);
  } else {
    out = read_array_source(s, format);
  }
  if (!s.weights_path.empty()) out.weights = read_weights_file(s, out.inputs.rows);
  if (s.rows > 0 && s.rows < out.inputs.rows) {
    std::vector<std::size_t> first(s.rows);
    std::iota(first.begin(), first.end(), std::size_t{0});
    out.inputs = select_table_rows(out.inputs, first);
    out.targets = select_table_rows(out.targets, first);
    if (out.weighted()) out.weights = select_table_rows(out.weights, first);
  }
  if (out.weighted()) check_weights(s, out.weights);
  out.class_names = std::move(out.targets.class_names);
  if (!out.class_names.empty() && classes > 0 && classes != out.class_names.size())
    throw InvalidArgument(fmt::format(
        "{}: {} classes are expected but the labels name {} ({}); with class names, the classes "
        "are the names the training data holds",
        s.path, classes, out.class_names.size(), fmt::join(out.class_names, ", ")));
  if (classification && out.targets.cols == 1)
    out.targets = one_hot(out.targets, classes > 0 ? classes : count_classes(out.targets));
  if (classification && out.class_names.empty() && class_names != nullptr)
    out.class_names = *class_names;
  out.description =
      fmt::format("{} ({} rows{})", s.path, out.inputs.rows, out.weighted() ? ", weighted" : "");
  return out;
}

NumericTable read_input_table(const TableSource& s, std::size_t expected_inputs) {
  require_file(s.path, s.what);
  const DataFormat format = format_of(s);
  NumericTable table;
  if (format == DataFormat::kNpy) {
    table = read_npy(s.path);
  } else if (format == DataFormat::kIdx) {
    table = read_idx(s.path);
  } else if (format == DataFormat::kFann) {
    table = read_fann(s.path).inputs;
  } else {
    CsvOptions options;
    options.delimiter = s.delimiter;
    options.columns = column_refs(s.inputs);
    table = read_csv(s.path, options);
    if (s.inputs.empty() && table.cols > expected_inputs) {
      // The first columns, as the model was trained on (targets usually come last).
      std::vector<std::size_t> first(expected_inputs);
      std::iota(first.begin(), first.end(), std::size_t{0});
      table = select_columns(table, first);
    }
  }
  if (table.cols != expected_inputs)
    throw InvalidArgument(
        fmt::format("{} has {} input columns but the model takes {}; choose the "
                    "columns with --columns",
                    s.path, table.cols, expected_inputs));
  return table;
}

LabeledTable select_rows(const LabeledTable& t, std::span<const std::size_t> rows,
                         const std::string& what) {
  return {select_table_rows(t.inputs, rows), select_table_rows(t.targets, rows),
          fmt::format("{} ({} rows of {})", what, rows.size(), t.description), t.class_names,
          t.weighted() ? select_table_rows(t.weights, rows) : NumericTable{}};
}

}  // namespace lmtrain::io
