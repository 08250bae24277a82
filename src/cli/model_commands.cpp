// `lmtrain predict`, `eval`, `info`, `info --devices` and `plot`: everything that starts from a
// model file or a run directory.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "data_loading.h"
#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"
#include "lmtrain/io/atomic_write.h"
#include "lmtrain/io/csv_reader.h"
#include "lmtrain/io/npy_writer.h"
#include "lmtrain/io/table.h"
#include "lmtrain/lmtrain.h"
#include "lmtrain/records/model_evaluation.h"
#include "lmtrain/records/model_file.h"
#include "plots.h"

namespace lmtrain::cli {
namespace {

namespace fs = std::filesystem;

io::ModelFile load_model(const std::string& path) {
  if (!fs::exists(path))
    throw InvalidArgument(
        fmt::format("{}: no such model file; give the model.safetensors of a "
                    "run directory",
                    path));
  return io::read_model_file(path);
}

// Network outputs (samples × outputs, normalized units) for inputs in the data's units, on the
// CPU (records/model_evaluation.h).
std::vector<double> network_outputs(const io::ModelFile& model, const io::NumericTable& inputs) {
  return io::model_outputs(model, std::span<const double>(inputs.values), inputs.rows);
}

// The header of a CSV data file, or nothing (no header, or another format).
std::vector<std::string> csv_header(const std::string& path) {
  const std::optional<io::DataFormat> format = io::detect_data_format(path);
  if (format && *format != io::DataFormat::kCsv) return {};
  return io::read_csv_header(path);
}

// The columns a model's inputs are read from when --columns names none: the names it was
// trained on, where the file's header has them all; none (the first columns, by position) for a
// file without a header or a model without names.  A header that lacks one of them is an error:
// reading other columns by position would predict from the wrong data without a word.
std::vector<std::string> input_columns(const io::ModelFile& model, const std::string& path,
                                       const std::vector<std::string>& header,
                                       const std::vector<std::string>& given) {
  if (!given.empty() || model.input_names.empty() || header.empty()) return given;
  for (const std::string& name : model.input_names)
    if (std::find(header.begin(), header.end(), name) == header.end())
      throw InvalidArgument(fmt::format(
          "{}: its header ({}) has no column \"{}\", and the model was trained on the columns "
          "{}; rename the file's columns, or choose the inputs with --columns (in training's "
          "order)",
          path, fmt::join(header, ", "), name, fmt::join(model.input_names, ", ")));
  return model.input_names;
}

// Inputs of a data file for `model`.
io::NumericTable read_inputs(const std::string& path, const std::vector<std::string>& columns,
                             const io::ModelFile& model) {
  io::TableSource source;
  source.what = "--data";
  source.path = path;
  source.inputs = input_columns(model, path, csv_header(path), columns);
  return io::read_input_table(source, model.architecture.inputs());
}

// `text` as one CSV field that io::read_csv reads back as it is (RFC 4180 quotes where a delimiter,
// a quote, a line end, surrounding spaces or a leading comment character would change it).
std::string csv_field(const std::string& text) {
  const bool plain = text.find_first_of(",\"\r\n") == std::string::npos && !text.empty() &&
                     text.front() != ' ' && text.back() != ' ' && text.front() != '#';
  if (plain) return text;
  std::string quoted = "\"";
  for (const char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + '"';
}

}  // namespace

int run_predict(const PredictArgs& args) {
  const io::ModelFile model = load_model(args.model);
  const io::NumericTable inputs = read_inputs(args.data, args.columns, model);
  std::vector<double> out = network_outputs(model, inputs);
  io::undo_target_normalization<double>(model.normalization, out);
  const bool probabilities = io::apply_output_link(model, out);
  const std::size_t k = model.architecture.outputs();
  io::NumericTable result;
  result.rows = inputs.rows;
  result.cols = k;
  if (model.task == io::Task::kClassification) {
    result.cols = k + 1;
    result.column_names.push_back("class");
    for (std::size_t r = 0; r < inputs.rows; ++r) {
      const auto row = out.begin() + static_cast<long>(r * k);
      result.values.push_back(
          static_cast<double>(std::max_element(row, row + static_cast<long>(k)) - row));
      result.values.insert(result.values.end(), row, row + static_cast<long>(k));
    }
  } else {
    result.values = std::move(out);
  }
  // Probabilities (a classifier's, or bce's sigmoids) are p0, p1, …; a regression's outputs y0, ….
  for (std::size_t c = 0; c < k; ++c)
    result.column_names.push_back(fmt::format("{}{}", probabilities ? "p" : "y", c));
  if (args.out.ends_with(".npy")) {
    io::write_npy(args.out, result);  // numbers only: the class column holds the class's index
  } else {
    // A model with class names (trained on text labels, or in Python) predicts names.
    const std::vector<std::string>& names = model.class_names;
    std::string csv = fmt::format("{}\n", fmt::join(result.column_names, ","));
    for (std::size_t r = 0; r < result.rows; ++r) {
      for (std::size_t c = 0; c < result.cols; ++c) {
        const bool named = c == 0 && model.task == io::Task::kClassification && !names.empty();
        csv += named ? csv_field(names[static_cast<std::size_t>(result(r, c))])
                     : fmt::format("{:.9g}", result(r, c));
        csv += c + 1 < result.cols ? ',' : '\n';
      }
    }
    io::write_file_atomically(args.out, csv);
  }
  fmt::print("wrote {} predictions to {}\n", result.rows, args.out);
  return 0;
}

int run_eval(const EvalArgs& args) {
  const io::ModelFile model = load_model(args.model);
  const bool classification = model.task == io::Task::kClassification;
  io::TableSource source;
  source.what = "--data";
  source.path = args.data;
  source.targets_path = args.targets;
  const std::vector<std::string> header =
      args.targets.empty() ? csv_header(args.data) : std::vector<std::string>{};
  source.inputs = input_columns(model, args.data, header, args.columns);
  source.targets = args.target_columns;
  if (args.columns.empty() && !source.inputs.empty() && source.targets.empty()) {
    // Inputs found by name: the targets are the header's other columns.
    for (const std::string& name : header)
      if (std::find(source.inputs.begin(), source.inputs.end(), name) == source.inputs.end())
        source.targets.push_back(name);
    const std::size_t expected = classification ? 1 : model.architecture.outputs();
    if (source.targets.size() != expected)
      throw InvalidArgument(fmt::format(
          "{}: besides the model's inputs ({}) its header has the columns {}; the model has {} "
          "target column{}: choose {} with --target-columns",
          args.data, fmt::join(source.inputs, ", "), fmt::join(source.targets, ", "), expected,
          expected == 1 ? "" : "s", expected == 1 ? "it" : "them"));
  }
  // A CSV's labels name the model's classes when it has names (text labels, or Python's).
  const io::LabeledTable table =
      io::read_labeled_table(source, classification, model.num_classes, &model.class_names);
  if (table.inputs.cols != model.architecture.inputs() ||
      table.targets.cols != model.architecture.outputs())
    throw InvalidArgument(
        fmt::format("{} gives {} inputs and {} targets per row; the model takes {} and produces {}",
                    args.data, table.inputs.cols, table.targets.cols, model.architecture.inputs(),
                    model.architecture.outputs()));
  const io::ModelEvaluation e = io::evaluate_outputs(model, network_outputs(model, table.inputs),
                                                     table.targets.values, table.inputs.rows);
  const io::Metrics& m = e.metrics;
  const double value = e.loss;
  // The loss as training reports it (on standardized targets when it standardized them); the
  // metrics below are in the targets' own units.
  if (args.json) {
    fmt::print("{}\n", e.to_json(model, table.description).dump(2));
    return 0;
  }
  fmt::print("{}\nloss ({}{}) {:.6e}\n{}\n{}", table.description, model.loss,
             model.normalization.targets.mean.empty() ? "" : ", on standardized targets", value,
             m.describe(), m.confusion_table());
  if (classification && !model.class_names.empty()) {  // the table's indices, named
    std::vector<std::string> legend;
    for (std::size_t k = 0; k < model.class_names.size(); ++k)
      legend.push_back(fmt::format("{} = {}", k, model.class_names[k]));
    fmt::print("classes: {}\n", fmt::join(legend, ", "));
  }
  return 0;
}

int run_info(const std::string& path) {
  const io::ModelFile model = load_model(path);
  fmt::print("model          {}\n", model.architecture.describe());
  fmt::print("parameters     {} ({})\n", model.architecture.num_params(),
             to_string(model.parameter_dtype));
  fmt::print("task           {}{}\n", to_string(model.task),
             model.task == io::Task::kClassification
                 ? fmt::format(", {} classes{}", model.num_classes,
                               model.class_names.empty()
                                   ? std::string()
                                   : fmt::format(" ({})", fmt::join(model.class_names, ", ")))
                 : "");
  fmt::print("loss           {}\n", model.loss);
  fmt::print("normalization  inputs: {}, targets: {}\n",
             model.normalization.normalizes_inputs() ? "standardized" : "none",
             model.normalization.normalizes_targets() ? "standardized" : "none");
  fmt::print("provenance     {}\n", model.provenance.dump(2));
  return 0;
}

int run_devices() {
  auto cpu = make_cpu_backend<float>();
  fmt::print("cpu       {}\n", cpu->name());
  const int count = cuda_device_count();
  if (count == 0)
    fmt::print("cuda      no device visible{}\n",
               cuda_backend_built() ? "" : " (built without CUDA)");
  for (int i = 0; i < count; ++i) fmt::print("cuda:{}    {}\n", i, cuda_device_description(i));
  // How several ranks would talk (DESIGN.md §6).
  fmt::print("ranks     mpi {}, nccl {}\n", dist::mpi_built() ? "built" : "not built",
             dist::nccl_built() ? "built" : "not built");
  if (dist::nccl_built()) fmt::print("nccl      {}\n", dist::nccl_runtime_description());
  return 0;
}

int run_plot(const std::string& run_dir) {
  if (!fs::is_directory(run_dir))
    throw InvalidArgument(
        fmt::format("{}: not a directory; give the output_dir of a run", run_dir));
  std::string warning;
  const auto made = make_plots(run_dir, &warning);
  for (const auto& p : made) fmt::print("wrote {}\n", p);
  if (!warning.empty()) {
    fmt::print(stderr, "lmtrain: {}\n", warning);
    return 2;
  }
  if (made.empty()) fmt::print(stderr, "lmtrain: nothing to plot in {} (no epochs.csv)\n", run_dir);
  return made.empty() ? 2 : 0;
}

}  // namespace lmtrain::cli
