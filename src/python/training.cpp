// lmtrain._core.train: one Trainer<T>::fit over NumPy data, as `lmtrain fit` runs it — the same
// validation split, standardization, initialization, seed and checkpoint fingerprint — with the
// GIL released while the library trains.  After every LM step the GIL is taken for a moment to
// run Python's signal handlers: Ctrl-C raises the stop flag, the trainer stops after that step
// (writing the checkpoint when one was asked for) and KeyboardInterrupt reaches the caller.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "arrays.h"
#include "lmtrain/backend/device.h"
#include "lmtrain/core/error.h"
#include "lmtrain/io/checkpoint.h"
#include "lmtrain/io/model_file.h"
#include "lmtrain/io/row_split.h"
#include "lmtrain/lmtrain.h"
#include "module.h"
#include "summary.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

// Everything of a training run but the arrays.
struct TrainingRequest {
  std::string architecture;  // the model file's architecture JSON (io::model_spec_from_json)
  std::size_t classes =
      0;  // classification: the number of classes (y holds indices); 0: regression
  std::vector<std::string> class_names;    // stored in the model file
  std::vector<std::string> feature_names;  // names ard's input groups in the Summary
  SolverOptions solver;
  TrainerOptions trainer;
  LossOptions loss;
  std::string precision = "float32";  // float32 | mixed | float64
  std::string device = "cpu";
  std::string init = "torch";
  std::uint64_t seed = 0;
  bool standardize_inputs = true;
  bool standardize_targets = true;  // regression only
  double validation_fraction = 0;   // without validation arrays: held out of X by io::split_rows
  std::string checkpoint;           // path; empty: none
  int checkpoint_every = 1;
  std::string resume;  // checkpoint path to continue from; empty: a fresh run
  // The starting parameters in the library's flat order; empty: `init` with `seed`.
  std::vector<double> initial_parameters;
};

// The arrays of a run as the library's data sets, standardized with statistics of the training
// rows only; what the model file stores as its normalization.
template <typename T>
struct PreparedData {
  Dataset<T> train;
  std::optional<Dataset<T>> validation;
  io::Normalization normalization;
};

template <typename T>
Dataset<T> make_dataset(const MatrixView& x, const HostArray& y,
                        const std::vector<std::size_t>* rows, const io::Normalization& n,
                        std::size_t classes) {
  Dataset<T> d;
  d.samples = rows != nullptr ? rows->size() : x.rows();
  d.inputs = x.cols();
  d.x = library_values<T>(x, rows, n.inputs);
  if (classes > 0) {
    d.outputs = classes;
    d.y = one_hot_rows<T>(y, classes, rows);
  } else {
    const MatrixView targets(y, "y");
    d.outputs = targets.cols();
    d.y = library_values<T>(targets, rows, n.targets);
  }
  return d;
}

void check_rows(const MatrixView& x, const HostArray& y, const char* x_name, const char* y_name) {
  if (y.shape(0) != x.rows())
    throw nb::value_error(fmt::format("{} has {} rows but {} has {}; give one target row per "
                                      "sample",
                                      y_name, y.shape(0), x_name, x.rows())
                              .c_str());
}

template <typename T>
PreparedData<T> prepare(const TrainingRequest& r, const HostArray& x_array, const HostArray& y,
                        const std::optional<HostArray>& x_val,
                        const std::optional<HostArray>& y_val) {
  const MatrixView x(x_array, "X");
  check_rows(x, y, "X", "y");
  std::optional<io::RowSplit> split;
  if (!x_val && r.validation_fraction > 0) {
    split = io::split_rows(x.rows(), r.validation_fraction, 0.0, r.seed);
    if (split->validation.empty())
      throw nb::value_error(fmt::format("validation_fraction = {} of {} rows holds out no row; "
                                        "give more rows or a larger validation_fraction",
                                        r.validation_fraction, x.rows())
                                .c_str());
  }
  const std::vector<std::size_t>* train_rows = split ? &split->train : nullptr;
  PreparedData<T> d;
  if (r.standardize_inputs) d.normalization.inputs = fit_standardization(x, train_rows);
  if (r.standardize_targets && r.classes == 0)
    d.normalization.targets = fit_standardization(MatrixView(y, "y"), train_rows);
  d.train = make_dataset<T>(x, y, train_rows, d.normalization, r.classes);
  if (split) {
    d.validation = make_dataset<T>(x, y, &split->validation, d.normalization, r.classes);
  } else if (x_val) {
    if (!y_val) throw nb::value_error("validation: X given without y");
    const MatrixView xv(*x_val, "validation X");
    check_rows(xv, *y_val, "validation X", "validation y");
    if (xv.cols() != x.cols())
      throw nb::value_error(
          fmt::format("validation X has {} columns but X has {}", xv.cols(), x.cols()).c_str());
    d.validation = make_dataset<T>(xv, *y_val, nullptr, d.normalization, r.classes);
  }
  return d;
}

// What the library's callbacks report back to Python: a pending Python exception (Ctrl-C's
// KeyboardInterrupt, or one raised by the epoch callback) and the stop flag it raised.  The
// callbacks run on the thread that called train, with the GIL released around them.
class PythonSide {
 public:
  explicit PythonSide(nb::object on_epoch) : on_epoch_(std::move(on_epoch)) {}
  const std::atomic<bool>* stop_flag() const { return &stop_; }

  // After every LM step: run pending signal handlers (SIGINT raises KeyboardInterrupt).
  void after_step() {
    if (stop_) return;
    nb::gil_scoped_acquire locked;
    if (PyErr_CheckSignals() != 0) keep_error();
  }
  void after_epoch(const EpochRecord& e) {
    if (stop_ || on_epoch_.is_none()) return;
    nb::gil_scoped_acquire locked;
    try {
      on_epoch_(e.epoch, e.training_loss, e.validation_loss, e.seconds);
    } catch (nb::python_error& error) {
      error_.emplace(std::move(error));
      stop_ = true;
    }
  }
  // A C++ failure inside a callback that must not throw (the checkpoint writer).
  void fail(std::string message) {
    failure_ = std::move(message);
    stop_ = true;
  }
  // With the GIL held, after training: the pending exception, if any.
  void rethrow() {
    if (error_) {
      nb::python_error error = std::move(*error_);
      error_.reset();
      throw error;
    }
    if (!failure_.empty()) throw Error(failure_);
  }

 private:
  void keep_error() {
    error_.emplace();  // fetches (and clears) the exception the handler raised
    stop_ = true;
  }
  nb::object on_epoch_;
  std::atomic<bool> stop_{false};
  std::optional<nb::python_error> error_;
  std::string failure_;
};

template <typename T>
io::ModelFile trained_model(const TrainingRequest& r, const ModelSpec& spec,
                            const std::vector<T>& params, const io::Normalization& normalization,
                            const Summary& summary) {
  io::ModelFile model;
  model.architecture = spec;
  model.parameters.assign(params.begin(), params.end());
  model.parameter_dtype =
      std::is_same_v<T, float> ? io::ParameterDtype::kF32 : io::ParameterDtype::kF64;
  model.normalization = normalization;
  model.loss = std::string(to_string(r.loss.kind));
  model.task = r.classes > 0 ? io::Task::kClassification : io::Task::kRegression;
  model.num_classes = r.classes;
  model.class_names = r.class_names;
  model.provenance = io::make_provenance();
  model.provenance["front_end"] = "python";
  model.provenance["seed"] = r.seed;
  model.provenance["epochs"] = summary.epochs;
  model.provenance["final_loss"] = summary.final_loss;
  if (!std::isnan(summary.final_validation_loss))
    model.provenance["final_validation_loss"] = summary.final_validation_loss;
  model.provenance["termination"] = std::string(to_string(summary.termination));
  return model;
}

template <typename T>
std::pair<io::ModelFile, nb::dict> train_as(TrainingRequest r, const HostArray& x,
                                            const HostArray& y,
                                            const std::optional<HostArray>& x_val,
                                            const std::optional<HostArray>& y_val,
                                            nb::object on_epoch) {
  const ModelSpec spec = io::model_spec_from_json(nlohmann::json::parse(r.architecture));
  const PreparedData<T> data = prepare<T>(r, x, y, x_val, y_val);
  if (data.train.inputs != spec.inputs() || data.train.outputs != spec.outputs())
    throw InvalidArgument(fmt::format(
        "the network {} takes {} inputs and gives {} outputs, but the data has {} input columns "
        "and {} {}",
        spec.describe(), spec.inputs(), spec.outputs(), data.train.inputs, data.train.outputs,
        r.classes > 0 ? "classes" : "target columns"));
  if (r.precision == "mixed") r.solver.system_precision = SystemPrecision::kFloat64;
  r.trainer.seed = r.seed;
  const DeviceChoice device = choose_device(r.device, 0);
  auto backend = make_backend<T>(device);
  Trainer<T> trainer(spec, r.loss, r.solver, r.trainer, *backend);

  // The fingerprint `lmtrain fit` gives its checkpoints: what must not change on resume.
  const std::size_t batch = r.trainer.batch_size == 0
                                ? data.train.samples
                                : std::min(r.trainer.batch_size, data.train.samples);
  const nlohmann::json fingerprint = {{"architecture", io::model_spec_to_json(spec)},
                                      {"seed", r.seed},
                                      {"batch_size", batch},
                                      {"precision", r.precision},
                                      {"loss", std::string(to_string(r.loss.kind))}};
  std::optional<TrainingState<T>> resume;
  if (!r.resume.empty()) resume = io::read_checkpoint<T>(r.resume, fingerprint);

  PythonSide python(std::move(on_epoch));
  trainer.set_stop_flag(python.stop_flag());
  trainer.add_callback([&python](const IterationSummary&) {
    python.after_step();
    return CallbackResult::kContinue;
  });
  trainer.set_epoch_callback([&python](const EpochRecord& e) { python.after_epoch(e); });
  if (!r.checkpoint.empty())
    trainer.set_checkpoint_handler(
        [&](const TrainingState<T>& state) {
          try {
            io::write_checkpoint(r.checkpoint, state, fingerprint);
          } catch (const std::exception& e) {
            python.fail(e.what());
          }
        },
        r.checkpoint_every);

  std::vector<T> params =
      Sequential<T>(spec, *backend).initial_parameters(parse_init(r.init), r.seed);
  if (!r.initial_parameters.empty()) {
    if (r.initial_parameters.size() != params.size())
      throw InvalidArgument(
          fmt::format("initial_parameters has {} values; the network {} has {} "
                      "parameters",
                      r.initial_parameters.size(), spec.describe(), params.size()));
    params.assign(r.initial_parameters.begin(), r.initial_parameters.end());
  }
  Summary summary;
  {
    nb::gil_scoped_release unlocked;
    summary = trainer.fit(params, data.train, data.validation ? &*data.validation : nullptr,
                          resume ? &*resume : nullptr);
  }
  python.rethrow();
  summary.rank_devices = {fmt::format("{} ({})", device.label(), device.reason)};
  summary.name_input_groups(spec, r.feature_names);
  return {trained_model(r, spec, params, data.normalization, summary), summary_fields(summary)};
}

// The addresses of the X and y buffers the last call of train read, as NumPy handed them over:
// lmtrain._core.last_input_addresses() lets the tests show that C-contiguous float32/float64
// input is read in place, not copied.  Written with the GIL held.
std::pair<std::uintptr_t, std::uintptr_t> last_input_addresses{0, 0};

std::pair<io::ModelFile, nb::dict> train(const TrainingRequest& r, const HostArray& x,
                                         const HostArray& y, const std::optional<HostArray>& x_val,
                                         const std::optional<HostArray>& y_val,
                                         nb::object on_epoch) {
  last_input_addresses = {reinterpret_cast<std::uintptr_t>(x.data()),
                          reinterpret_cast<std::uintptr_t>(y.data())};
  if (r.precision == "float64") return train_as<double>(r, x, y, x_val, y_val, std::move(on_epoch));
  if (r.precision == "float32" || r.precision == "mixed")
    return train_as<float>(r, x, y, x_val, y_val, std::move(on_epoch));
  throw InvalidArgument(fmt::format(
      "precision = \"{}\": expected \"float32\", \"mixed\" or \"float64\"", r.precision));
}

}  // namespace

void bind_training(nb::module_& m) {
  using R = TrainingRequest;
  nb::class_<R>(m, "TrainingRequest", "Everything of a training run but the arrays.")
      .def(nb::init<>())
      .def_rw("architecture", &R::architecture, "The architecture as model files store it (JSON).")
      .def_rw("classes", &R::classes, "Classification: the number of classes; 0: regression.")
      .def_rw("class_names", &R::class_names)
      .def_rw("feature_names", &R::feature_names)
      .def_rw("solver", &R::solver)
      .def_rw("trainer", &R::trainer)
      .def_rw("loss", &R::loss)
      .def_rw("precision", &R::precision, "float32, mixed or float64.")
      .def_rw("device", &R::device, "cpu, cuda, cuda:N or auto.")
      .def_rw("init", &R::init, "torch, glorot or he.")
      .def_rw("seed", &R::seed)
      .def_rw("standardize_inputs", &R::standardize_inputs)
      .def_rw("standardize_targets", &R::standardize_targets)
      .def_rw("validation_fraction", &R::validation_fraction)
      .def_rw("checkpoint", &R::checkpoint)
      .def_rw("checkpoint_every", &R::checkpoint_every)
      .def_rw("resume", &R::resume)
      .def_rw("initial_parameters", &R::initial_parameters,
              "Starting parameters in the library's flat order (empty: init with seed).");
  m.def("train", &train, nb::arg("request"), nb::arg("X"), nb::arg("y"),
        nb::arg("X_validation").none() = nb::none(), nb::arg("y_validation").none() = nb::none(),
        nb::arg("on_epoch").none() = nb::none(),
        "Trains the request's network on X (samples × inputs) and y (samples × outputs, float; "
        "classification: int64 class indices) with the GIL released.  Returns the trained "
        "ModelFile and the Summary's fields.  on_epoch(epoch, training_loss, validation_loss, "
        "seconds) is called after every epoch.");
  m.def(
      "last_input_addresses", [] { return last_input_addresses; },
      "(X, y): the addresses of the buffers the last train call read its X and y from; equal to "
      "the NumPy arrays' own when they were read in place (no copy).");
}

}  // namespace lmtrain::python
