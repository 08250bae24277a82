// io::ModelFile — the file `lmtrain fit` writes as model.safetensors — as lmtrain._core.ModelFile:
// read, written and encoded by the library's own reader and writer (so files go both ways between
// the CLI and Python), and run on new inputs by lmtrain::predict with the file's normalization.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <span>
#include <string>

#include "arrays.h"
#include "lmtrain/backend/device.h"
#include "lmtrain/core/error.h"
#include "lmtrain/records/model_evaluation.h"
#include "lmtrain/records/model_file.h"
#include "module.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

using Vector = nb::ndarray<nb::numpy, double>;

std::optional<Vector> optional_vector(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  return numpy_array(std::vector<double>(v), {v.size()});
}

// Network outputs for `x` (records/model_evaluation.h's model_outputs: the inputs standardized as
// in training, read in place by a CPU model of their dtype without standardization), with the
// GIL released; the outputs back in target units when `target_units`.
std::vector<double> forward(const io::ModelFile& model, const MatrixView& x,
                            const std::string& device, bool target_units = true) {
  const ModelSpec& spec = model.architecture;
  if (x.cols() != spec.inputs())
    throw InvalidArgument(fmt::format("X has {} columns but the model {} takes {} inputs", x.cols(),
                                      spec.describe(), spec.inputs()));
  const DeviceChoice choice = choose_device(device, 0);
  std::vector<double> y;
  {
    nb::gil_scoped_release unlocked;
    y = x.is_double() ? io::model_outputs(model, x.values<double>(), x.rows(), choice)
                      : io::model_outputs(model, x.values<float>(), x.rows(), choice);
  }
  if (target_units) model.normalization.targets.invert(std::span<double>(y));
  return y;
}

Vector predict_outputs(const io::ModelFile& model, const HostArray& x, const std::string& device,
                       bool probabilities) {
  const MatrixView view(x, "X");
  std::vector<double> y = forward(model, view, device);
  if (probabilities) io::apply_output_link(model, y);
  return numpy_array(std::move(y), {view.rows(), model.architecture.outputs()});
}

// `lmtrain eval --json`'s object (records/model_evaluation.h) as JSON text, for X and the targets
// (one-hot rows for a classifier, the data's units otherwise).
std::string evaluate(const io::ModelFile& model, const HostArray& x, const HostArray& targets,
                     const std::string& device) {
  const MatrixView view(x, "X"), t(targets, "y");
  if (t.rows() != view.rows() || t.cols() != model.architecture.outputs())
    throw InvalidArgument(
        fmt::format("y has {} rows of {} values; X has {} rows and the model {} "
                    "outputs",
                    t.rows(), t.cols(), view.rows(), model.architecture.outputs()));
  std::vector<double> z = forward(model, view, device, false);
  std::vector<double> y(t.rows() * t.cols());
  for (std::size_t r = 0; r < t.rows(); ++r)
    for (std::size_t c = 0; c < t.cols(); ++c) y[r * t.cols() + c] = t.at(r, c);
  return io::evaluate_outputs(model, std::move(z), y, view.rows())
      .to_json(model, fmt::format("{} samples", view.rows()))
      .dump();
}

void save(const io::ModelFile& model, const std::string& path) {
  io::write_model_file(path, model, model.parameter_dtype);
}

nb::bytes encode(const io::ModelFile& model) {
  const std::string bytes = model.parameter_dtype == io::ParameterDtype::kF32
                                ? io::encode_model_file<float>(model)
                                : io::encode_model_file<double>(model);
  return nb::bytes(bytes.data(), bytes.size());
}

io::ModelFile parse(const nb::bytes& bytes, const std::string& source) {
  return io::parse_model_file(std::string_view(bytes.c_str(), bytes.size()), source);
}

std::vector<std::string> relevance_groups(const io::ModelFile& model) {
  return model.architecture.relevance_groups().names;
}

}  // namespace

void bind_model(nb::module_& m) {
  using M = io::ModelFile;
  nb::class_<M>(m, "ModelFile",
                "A trained network as model.safetensors holds it: architecture, flat parameters, "
                "normalization, loss and task (include/lmtrain/records/model_file.h).")
      .def_static("read", &io::read_model_file, nb::arg("path"),
                  "Reads a model file (`lmtrain fit`'s or one saved from Python).")
      .def_static("parse", &parse, nb::arg("data"), nb::arg("source"),
                  "Reads a model file's bytes; `source` names them in error messages.")
      .def("save", &save, nb::arg("path"),
           "Writes the file atomically (a reader sees the old file or the whole new one).")
      .def("encode", &encode, "The file's bytes.")
      .def("evaluate", &evaluate, nb::arg("X"), nb::arg("y"), nb::arg("device") = "cpu",
           "`lmtrain eval --json`'s figures as JSON text: y is one-hot rows (classification) "
           "or targets in their units (records/model_evaluation.h).")
      .def("predict", &predict_outputs, nb::arg("X"), nb::arg("device") = "cpu",
           nb::arg("probabilities") = false,
           "Network outputs (samples × outputs, float64) for X (C-contiguous float32 or float64, "
           "samples × inputs): inputs standardized as in training, regression outputs in target "
           "units, classification outputs (and bce's) as logits; with probabilities=True what "
           "`lmtrain predict` writes (io::apply_output_link): a classifier's softmax rows, bce's "
           "sigmoids.")
      .def_prop_ro(
          "architecture", [](const M& f) { return io::model_spec_to_json(f.architecture).dump(); },
          "The architecture as the file stores it (JSON).")
      .def_prop_ro(
          "description", [](const M& f) { return f.architecture.describe(); },
          "One line, e.g. \"1-20-1 tanh (61 parameters)\".")
      .def_prop_ro("inputs", [](const M& f) { return f.architecture.inputs(); })
      .def_prop_ro("outputs", [](const M& f) { return f.architecture.outputs(); })
      .def_prop_ro(
          "parameters",
          [](const M& f) {
            return numpy_array(std::vector<double>(f.parameters), {f.parameters.size()});
          },
          nb::rv_policy::automatic,
          "The flat parameter vector (float64 copy), in the library's order: per layer W then b.")
      .def_prop_ro(
          "parameter_dtype",
          [](const M& f) {
            return std::string(f.parameter_dtype == io::ParameterDtype::kF32 ? "float32"
                                                                             : "float64");
          },
          "float32 or float64: the training precision.")
      .def_prop_ro(
          "input_mean", [](const M& f) { return optional_vector(f.normalization.inputs.mean); },
          nb::rv_policy::automatic)
      .def_prop_ro(
          "input_std", [](const M& f) { return optional_vector(f.normalization.inputs.scale); },
          nb::rv_policy::automatic)
      .def_prop_ro(
          "target_mean", [](const M& f) { return optional_vector(f.normalization.targets.mean); },
          nb::rv_policy::automatic)
      .def_prop_ro(
          "target_std", [](const M& f) { return optional_vector(f.normalization.targets.scale); },
          nb::rv_policy::automatic)
      .def_ro("loss", &M::loss)
      .def_prop_ro("task", [](const M& f) { return std::string(io::to_string(f.task)); })
      .def_ro("num_classes", &M::num_classes)
      .def_ro("class_names", &M::class_names)
      .def_ro("input_names", &M::input_names,
              "The training data's column names, one per input (empty when it had none).")
      .def_prop_ro(
          "provenance", [](const M& f) { return f.provenance.dump(); },
          "Provenance (JSON): lmtrain version, date, seed, epochs, final losses, termination.")
      .def_prop_ro("relevance_groups", &relevance_groups,
                   "Names of the parameter groups of ard, in order (the first are the inputs).");
}

}  // namespace lmtrain::python
