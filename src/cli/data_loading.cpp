#include "data_loading.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string_view>
#include <vector>

#include "lmtrain/core/error.h"
#include "lmtrain/io/row_split.h"
#include "lmtrain/train/dataset.h"

namespace lmtrain::cli {

io::TableSource table_source(const DataSource& d) {
  io::TableSource s;
  s.what = d.key;
  s.path = d.path;
  s.targets_path = d.targets_path;
  if (d.format != "auto") s.format = io::parse_data_format(d.format);
  s.inputs = d.inputs;
  s.targets = d.targets;
  s.delimiter = d.delimiter;
  s.rows = d.rows;
  s.weights = d.weights;
  s.weights_path = d.weights_path;
  return s;
}

PreparedData prepare_data(const RunConfig& config, std::size_t expected_inputs) {
  const DataConfig& d = config.data;
  PreparedData out;
  const bool classification = d.task == Task::kClassification;
  io::LabeledTable all = io::read_labeled_table(table_source(d.train), classification, d.classes);
  if (d.task == Task::kClassification) out.classes = all.targets.cols;
  out.class_names = all.class_names;

  auto load_other = [&](const std::optional<DataSource>& s) -> std::optional<io::LabeledTable> {
    if (!s) return std::nullopt;
    // Its labels name the training data's classes (or are indices, as the training data's are).
    io::LabeledTable t =
        io::read_labeled_table(table_source(*s), classification, out.classes, &out.class_names);
    if (t.inputs.cols != all.inputs.cols || t.targets.cols != all.targets.cols)
      throw InvalidArgument(fmt::format(
          "{} has {} inputs and {} targets per row but the training data {} has {} and {}", s->path,
          t.inputs.cols, t.targets.cols, d.train.path, all.inputs.cols, all.targets.cols));
    return t;
  };
  out.validation = load_other(d.validation);
  out.test = load_other(d.test);

  // Fractions carved out of the training file, by a seeded permutation (io/row_split.h).
  const double vf = d.validation ? 0.0 : d.validation_fraction;
  const double tf = d.test ? 0.0 : d.test_fraction;
  if (vf > 0 || tf > 0) {
    io::RowSplit split;
    try {
      split = io::split_rows(all.inputs.rows, vf, tf, config.seed);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("data: {}", e.what()));
    }
    if (!split.validation.empty())
      out.validation = io::select_rows(all, split.validation, "validation split");
    if (!split.test.empty()) {
      out.test = io::select_rows(all, split.test, "test split");
      out.test->weights = {};  // the held-out figures are unweighted, as data.test's
    }
    out.train = io::select_rows(all, split.train, "training split");
  } else {
    out.train = std::move(all);
  }

  if (expected_inputs > 0 && out.train.inputs.cols != expected_inputs)
    throw InvalidArgument(fmt::format(
        "{} has {} input columns but the model's input layer takes {}; fix model.inputs / "
        "model.input_shape or data.train.inputs",
        d.train.path, out.train.inputs.cols, expected_inputs));

  // With sample weights the statistics are weighted: those of the rows repeated.
  io::Normalization& n = out.normalization;
  const std::span<const double> weights(out.train.weights.values);
  auto fit = [&](const io::NumericTable& t) {
    return io::Standardization::fit(std::span<const double>(t.values), t.cols, weights);
  };
  if (d.standardize_inputs) n.inputs = fit(out.train.inputs);
  if (d.standardize_targets) n.targets = fit(out.train.targets);
  for (io::LabeledTable* t :
       {&out.train, out.validation ? &*out.validation : nullptr, out.test ? &*out.test : nullptr}) {
    if (!t) continue;
    n.inputs.apply(t->inputs);
    n.targets.apply(t->targets);
  }
  return out;
}

namespace {

// The table's values in T; a value that T cannot hold (1e39 in float32) is an error naming its
// file, line and column, where the training data's check would only see an infinity.
template <typename T>
void narrow(const io::NumericTable& table, const char* what, std::vector<T>& out) {
  for (std::size_t i = 0; i < table.values.size(); ++i) {
    const double v = table.values[i];
    out[i] = static_cast<T>(v);
    if (!std::isfinite(v) || std::isfinite(out[i])) continue;
    const std::size_t row = i / table.cols, col = i % table.cols;
    const std::string_view kind(what);
    throw InvalidArgument(fmt::format(
        "{}{}, {} {}: {:g} is beyond float32's range (±3.4e38){}; train in float64 (precision = "
        "\"float64\"){}",
        table.source,
        row < table.source_lines.size() ? fmt::format(" line {}", table.source_lines[row]) : "",
        what,
        col < table.column_names.size() ? fmt::format("\"{}\"", table.column_names[col])
                                        : fmt::format("column {}", col),
        v, kind == "weight" ? "" : " after normalization",
        kind == "weight" ? ""
                         : fmt::format(" or standardize it (data.normalize_{} = \"standardize\")",
                                       kind == "input" ? "inputs" : "targets")));
  }
}

}  // namespace

template <typename T>
Dataset<T> to_dataset(const io::LabeledTable& t) {
  Dataset<T> d(t.inputs.rows, t.inputs.cols, t.targets.cols);
  narrow(t.inputs, "input", d.x);
  narrow(t.targets, "target", d.y);
  if (t.weighted()) {
    d.weights.resize(t.weights.rows);
    narrow(t.weights, "weight", d.weights);
  }
  return d;
}

template Dataset<float> to_dataset<float>(const io::LabeledTable&);
template Dataset<double> to_dataset<double>(const io::LabeledTable&);

}  // namespace lmtrain::cli
