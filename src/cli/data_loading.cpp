#include "data_loading.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "lmtrain/core/error.h"
#include "lmtrain/core/rng.h"
#include "lmtrain/io/column_ref.h"
#include "lmtrain/io/csv_reader.h"
#include "lmtrain/io/fann_reader.h"
#include "lmtrain/io/idx_reader.h"
#include "lmtrain/io/npy_reader.h"
#include "lmtrain/io/one_hot.h"
#include "lmtrain/train/dataset.h"

namespace lmtrain::cli {
namespace {

std::string detect_format(const DataSource& s) {
  if (s.format != "auto") return s.format;
  std::string name = std::filesystem::path(s.path).filename().string();
  if (name.size() > 3 && name.ends_with(".gz")) name.resize(name.size() - 3);
  auto ext = std::filesystem::path(name).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (ext == ".csv" || ext == ".tsv" || ext == ".txt") return "csv";
  if (ext == ".npy") return "npy";
  if (ext == ".data" || ext == ".train" || ext == ".test" || ext == ".fann") return "fann";
  if (name.find("idx") != std::string::npos || ext == ".idx") return "idx";
  throw InvalidArgument(fmt::format(
      "{}.path = \"{}\": cannot tell the format from the name; set {}.format to csv, npy, idx or fann",
      s.key, s.path, s.key));
}

io::ColumnRef column_ref(const std::string& name) {
  std::size_t index = 0;
  const auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (ec == std::errc{} && p == name.data() + name.size()) return io::ColumnRef::by_index(index);
  return io::ColumnRef::by_name(name);
}

io::NumericTable select_columns(const io::NumericTable& t, const std::vector<std::size_t>& cols) {
  io::NumericTable out;
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

io::NumericTable select_rows(const io::NumericTable& t, std::span<const std::size_t> rows) {
  io::NumericTable out;
  out.rows = rows.size();
  out.cols = t.cols;
  out.source = t.source;
  out.column_names = t.column_names;
  out.values.resize(out.rows * out.cols);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(t.values.begin() + static_cast<long>(rows[i] * t.cols), t.cols,
                out.values.begin() + static_cast<long>(i * t.cols));
    if (!t.source_lines.empty()) out.source_lines.push_back(t.source_lines[rows[i]]);
  }
  return out;
}

LabeledTable subset(const LabeledTable& t, std::span<const std::size_t> rows, std::string what) {
  return {select_rows(t.inputs, rows), select_rows(t.targets, rows),
          fmt::format("{} ({} rows of {})", what, rows.size(), t.description)};
}

}  // namespace

LabeledTable load_source(const DataSource& s, Task task, std::size_t classes) {
  if (!std::filesystem::exists(s.path))
    throw InvalidArgument(fmt::format("{}.path: {}: no such file; check the path (relative paths "
                                      "are relative to the config file's directory)",
                                      s.key, s.path));
  const std::string format = detect_format(s);
  LabeledTable out;
  if (format == "csv") {
    io::CsvOptions options;
    options.delimiter = s.delimiter;
    const io::NumericTable table = io::read_csv(s.path, options);
    std::vector<io::ColumnRef> target_refs, input_refs;
    for (const auto& t : s.targets) target_refs.push_back(column_ref(t));
    for (const auto& i : s.inputs) input_refs.push_back(column_ref(i));
    std::vector<std::size_t> target_cols =
        target_refs.empty() ? std::vector<std::size_t>{table.cols - 1}
                            : io::resolve_columns(target_refs, table.column_names, table.cols, s.path, 1);
    std::vector<std::size_t> input_cols;
    if (input_refs.empty()) {
      for (std::size_t c = 0; c < table.cols; ++c)
        if (std::find(target_cols.begin(), target_cols.end(), c) == target_cols.end()) input_cols.push_back(c);
    } else {
      input_cols = io::resolve_columns(input_refs, table.column_names, table.cols, s.path, 1);
    }
    if (input_cols.empty())
      throw InvalidArgument(fmt::format("{}: no input columns left after taking targets {}; set "
                                        "{}.inputs",
                                        s.path, fmt::join(s.targets, ", "), s.key));
    out.inputs = select_columns(table, input_cols);
    out.targets = select_columns(table, target_cols);
  } else if (format == "fann") {
    io::FannTrainData fann = io::read_fann(s.path);
    out.inputs = std::move(fann.inputs);
    out.targets = std::move(fann.outputs);
  } else {
    if (s.targets_path.empty())
      throw InvalidArgument(fmt::format("{}: a {} source holds inputs only; set {}.targets_path to "
                                        "the targets (or labels) file",
                                        s.path, format, s.key));
    auto read = [&](const std::string& p) {
      if (!std::filesystem::exists(p))
        throw InvalidArgument(fmt::format("{}.targets_path: {}: no such file", s.key, p));
      return format == "npy" ? io::read_npy(p) : io::read_idx(p);
    };
    out.inputs = read(s.path);
    out.targets = read(s.targets_path);
    if (out.inputs.rows != out.targets.rows)
      throw InvalidArgument(fmt::format("{} has {} rows but {} has {}; inputs and targets must "
                                        "have one row per sample",
                                        s.path, out.inputs.rows, s.targets_path, out.targets.rows));
  }
  if (s.rows > 0 && s.rows < out.inputs.rows) {
    std::vector<std::size_t> first(s.rows);
    std::iota(first.begin(), first.end(), std::size_t{0});
    out.inputs = select_rows(out.inputs, first);
    out.targets = select_rows(out.targets, first);
  }
  if (task == Task::kClassification && out.targets.cols == 1) {
    const std::size_t k = classes > 0 ? classes : io::count_classes(out.targets);
    out.targets = io::one_hot(out.targets, k);
  }
  out.description = fmt::format("{} ({} rows)", s.path, out.inputs.rows);
  return out;
}

Standardization Standardization::fit(const io::NumericTable& t) {
  Standardization s;
  s.mean.assign(t.cols, 0.0);
  s.scale.assign(t.cols, 0.0);
  for (std::size_t r = 0; r < t.rows; ++r)
    for (std::size_t c = 0; c < t.cols; ++c) s.mean[c] += t(r, c);
  for (auto& m : s.mean) m /= static_cast<double>(t.rows);
  for (std::size_t r = 0; r < t.rows; ++r)
    for (std::size_t c = 0; c < t.cols; ++c) {
      const double d = t(r, c) - s.mean[c];
      s.scale[c] += d * d;
    }
  for (auto& v : s.scale) {
    v = std::sqrt(v / static_cast<double>(t.rows));
    if (!(v > 1e-12)) v = 1.0;  // a constant column is left centred, not blown up
  }
  return s;
}

void Standardization::apply(io::NumericTable& t) const {
  if (empty()) return;
  for (std::size_t r = 0; r < t.rows; ++r)
    for (std::size_t c = 0; c < t.cols; ++c) t(r, c) = (t(r, c) - mean[c]) / scale[c];
}

void Standardization::invert(std::vector<double>& values, std::size_t cols) const {
  if (empty()) return;
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = values[i] * scale[i % cols] + mean[i % cols];
}

PreparedData prepare_data(const RunConfig& config, std::size_t expected_inputs) {
  const DataConfig& d = config.data;
  PreparedData out;
  LabeledTable all = load_source(d.train, d.task, d.classes);
  if (d.task == Task::kClassification) out.classes = all.targets.cols;

  auto load_other = [&](const std::optional<DataSource>& s) -> std::optional<LabeledTable> {
    if (!s) return std::nullopt;
    LabeledTable t = load_source(*s, d.task, out.classes);
    if (t.inputs.cols != all.inputs.cols || t.targets.cols != all.targets.cols)
      throw InvalidArgument(fmt::format(
          "{} has {} inputs and {} targets per row but the training data {} has {} and {}",
          s->path, t.inputs.cols, t.targets.cols, d.train.path, all.inputs.cols, all.targets.cols));
    return t;
  };
  out.validation = load_other(d.validation);
  out.test = load_other(d.test);

  // Fractions carved out of the training file, by a seeded permutation.
  const double vf = d.validation ? 0.0 : d.validation_fraction;
  const double tf = d.test ? 0.0 : d.test_fraction;
  if (vf > 0 || tf > 0) {
    std::vector<std::size_t> order(all.inputs.rows);
    std::iota(order.begin(), order.end(), std::size_t{0});
    Rng rng(config.seed ^ 0x5eed5711u);
    rng.shuffle(std::span<std::size_t>(order));
    const auto n = static_cast<double>(order.size());
    const auto nv = static_cast<std::size_t>(std::floor(vf * n));
    const auto nt = static_cast<std::size_t>(std::floor(tf * n));
    if (nv + nt >= order.size())
      throw InvalidArgument(fmt::format("data: the validation and test fractions leave no training "
                                        "rows out of {}",
                                        order.size()));
    std::span<const std::size_t> all_rows(order);
    if (nv > 0) out.validation = subset(all, all_rows.subspan(0, nv), "validation split");
    if (nt > 0) out.test = subset(all, all_rows.subspan(nv, nt), "test split");
    std::vector<std::size_t> rest(order.begin() + static_cast<long>(nv + nt), order.end());
    std::sort(rest.begin(), rest.end());
    out.train = subset(all, rest, "training split");
  } else {
    out.train = std::move(all);
  }

  if (expected_inputs > 0 && out.train.inputs.cols != expected_inputs)
    throw InvalidArgument(fmt::format(
        "{} has {} input columns but the model's input layer takes {}; fix model.inputs / "
        "model.input_shape or data.train.inputs",
        d.train.path, out.train.inputs.cols, expected_inputs));

  if (d.standardize_inputs) out.input_norm = Standardization::fit(out.train.inputs);
  if (d.standardize_targets) out.target_norm = Standardization::fit(out.train.targets);
  for (LabeledTable* t : {&out.train, out.validation ? &*out.validation : nullptr,
                          out.test ? &*out.test : nullptr}) {
    if (!t) continue;
    out.input_norm.apply(t->inputs);
    out.target_norm.apply(t->targets);
  }
  return out;
}

template <typename T>
Dataset<T> to_dataset(const LabeledTable& t) {
  Dataset<T> d(t.inputs.rows, t.inputs.cols, t.targets.cols);
  std::transform(t.inputs.values.begin(), t.inputs.values.end(), d.x.begin(),
                 [](double v) { return static_cast<T>(v); });
  std::transform(t.targets.values.begin(), t.targets.values.end(), d.y.begin(),
                 [](double v) { return static_cast<T>(v); });
  return d;
}

template Dataset<float> to_dataset<float>(const LabeledTable&);
template Dataset<double> to_dataset<double>(const LabeledTable&);

}  // namespace lmtrain::cli
