// lmtrain._core.foreign_fit{32,64}: the library's fit run (train/fit_run.h) on a torch model —
// lmtrain.torch's LevenbergMarquardt.fit.  The epochs, shuffling, batches, early stopping, the
// stops, checkpoints and the Summary are the library's, as for `lmtrain fit`; Python supplies
// the linearization (foreign_source.h) and a training set whose batches it gathers from its own
// tensors (or a DataLoader's batches), through an object with
//   samples, validation_samples                 ints
//   max_units(samples) -> int                   the most units a batch of that many samples has
//   load(rows) -> int                           makes rows (int64 NumPy indices) the batch; units
//   objective(theta, validation, first, count)  F of those samples at θ
//   reported(objective, samples) -> float       the loss users read
// A call that raises ends the run: the source fails from then on (every rank then sees NaN and
// stops), the stop flag is raised, and the error reaches the caller once the run has returned.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "foreign_source.h"
#include "foreign_spec.h"
#include "lmtrain/records/checkpoint.h"
#include "lmtrain/solve/step_planner.h"
#include "lmtrain/train/fit_run.h"
#include "lmtrain/train/summary_text.h"
#include "module.h"
#include "python_communicator.h"
#include "python_fit.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

template <typename T>
class PythonTrainingSet final : public TrainingSet<T> {
 public:
  PythonTrainingSet(nb::object data, ForeignSource<T>& source, PythonErrors& errors)
      : data_(std::move(data)), source_(source), errors_(errors) {
    nb::gil_scoped_acquire gil;
    samples_ = nb::cast<std::size_t>(data_.attr("samples"));
    validation_samples_ = nb::cast<std::size_t>(data_.attr("validation_samples"));
  }
  std::size_t samples() const override { return samples_; }
  std::size_t validation_samples() const override { return validation_samples_; }
  std::size_t max_units(std::size_t samples) const override {
    nb::gil_scoped_acquire gil;
    return nb::cast<std::size_t>(data_.attr("max_units")(samples));
  }
  typename TrainingSet<T>::Batch load(std::span<const std::int64_t> rows) override {
    nb::gil_scoped_acquire gil;
    if (!errors_.error) {
      try {
        nb::ndarray<nb::numpy, const std::int64_t, nb::ndim<1>> view(rows.data(), {rows.size()},
                                                                     nb::handle());
        last_units_ = nb::cast<std::size_t>(data_.attr("load")(view));
        return {nullptr, nullptr, last_units_};
      } catch (nb::python_error& e) {
        failed(e);
      }
    }
    // The run goes on to a step that every rank takes and the failed source ends with NaN.
    return {nullptr, nullptr, std::max<std::size_t>(last_units_, 1)};
  }
  double objective(const T* theta, bool validation, std::size_t first, std::size_t count) override {
    nb::gil_scoped_acquire gil;
    if (errors_.error) return std::numeric_limits<double>::quiet_NaN();
    try {
      const std::size_t n = source_.num_params();
      const bool cuda = source_.model_backend().device_kind() == DeviceKind::kCuda;
      nb::ndarray<nb::pytorch, T, nb::ndim<1>> view(
          const_cast<T*>(theta), {n}, nb::handle(), {}, nb::dtype<T>(),
          cuda ? nb::device::cuda::value : nb::device::cpu::value,
          source_.model_backend().device_index());
      return nb::cast<double>(data_.attr("objective")(nb::cast(view, nb::rv_policy::reference),
                                                      validation, first, count));
    } catch (nb::python_error& e) {
      failed(e);
    }
    return std::numeric_limits<double>::quiet_NaN();
  }
  double reported(double objective, std::size_t samples) const override {
    nb::gil_scoped_acquire gil;
    return nb::cast<double>(data_.attr("reported")(objective, samples));
  }
  // tp_traverse / tp_clear
  nb::handle data() const { return data_; }

 private:
  void failed(nb::python_error& e) {
    errors_.record(e);
    PyErr_SetString(PyExc_RuntimeError, "the training set failed on this rank");
    nb::python_error marker;
    source_.fail(marker);
  }
  nb::object data_;
  ForeignSource<T>& source_;
  PythonErrors& errors_;
  std::size_t samples_ = 0, validation_samples_ = 0, last_units_ = 0;
};

// Where the library's rows are a loader's batches, its Summary counted batches as samples: the
// training set's own counts (described() -> (training samples, samples per batch) or None) go
// in instead, so that the report says 1 000 samples in batches of 250, not 4 in batches of 1.
void describe_samples(nb::handle data, Summary& summary) {
  if (!nb::hasattr(data, "described")) return;
  nb::object described = data.attr("described")();
  if (described.is_none()) return;
  const auto [samples, per_batch] = nb::cast<std::pair<std::size_t, std::size_t>>(described);
  summary.training_samples = samples;
  summary.batch_size = per_batch;
}

template <typename T>
Summary foreign_fit(const ForeignStepSpec& spec, const ForeignFitRequest& request,
                    nb::object linearization, nb::object data, nb::object communicator,
                    nb::ndarray<T, nb::ndim<1>, nb::c_contig> theta, nb::object on_epoch) {
  std::unique_ptr<Backend<T>> backend = backend_for<T>(spec);
  std::unique_ptr<dist::Communicator> comm = communicator_for(std::move(communicator), *backend);
  ForeignSource<T> source(std::move(linearization), *backend, shape_of<T>(spec));
  PythonErrors errors;
  PythonTrainingSet<T> set(std::move(data), source, errors);
  const SolverOptions& options = spec.options;
  const std::optional<LossKind> loss = parse_loss(spec.loss);
  if (!loss) throw InvalidArgument(fmt::format("loss = \"{}\": not a loss of lmtrain", spec.loss));
  FitDescription description;
  description.model = request.model;
  description.loss = spec.loss;
  description.residuals_per_sample = spec.residuals_per_unit;
  description.loss_kind = *loss;

  const RunFingerprint fingerprint = request_fingerprint(request, set.samples(), spec.loss);
  std::optional<TrainingState<T>> resume;
  if (!request.resume.empty()) resume = io::read_checkpoint<T>(request.resume, fingerprint);
  FitHooks<T> hooks = python_hooks<T>(request, fingerprint, errors, on_epoch, comm.get());
  std::vector<T> params(spec.parameters);
  backend->copy_to_host(theta.data(), params.data(), params.size());
  Summary summary;
  {
    nb::gil_scoped_release unlocked;
    summary = run_fit(options, request.trainer, source, set, *backend, theta.data(), params,
                      description, hooks, CallerBuffers{1, 0}, resume ? &*resume : nullptr);
  }
  source.release_borrowed();
  if (errors.error) throw std::move(*errors.error);
  if (std::optional<nb::python_error> e = source.take_error()) throw std::move(*e);
  summary.rank_devices = {backend->name()};
  describe_samples(set.data(), summary);
  rewrite_text(summary, in_python_terms);
  return summary;
}

}  // namespace

void bind_foreign_fit(nb::module_& m) {
  using R = ForeignFitRequest;
  nb::class_<R>(m, "ForeignFitRequest", "The trainer options and records of a torch-path fit.")
      .def(nb::init<>())
      .def_rw("trainer", &R::trainer)
      .def_rw("model", &R::model)
      .def_rw("precision", &R::precision, "As asked for: auto, float32, mixed or float64.")
      .def_rw("checkpoint", &R::checkpoint)
      .def_rw("checkpoint_every", &R::checkpoint_every)
      .def_rw("resume", &R::resume)
      .def_rw("on_checkpoint", &R::on_checkpoint,
              "on_checkpoint(epochs_done) after each checkpoint the run writes (every "
              "checkpoint_every epochs and on an interruption); None: nothing.");
  const char* doc =
      "The library's fit run on a torch model: epochs of the library's LM steps over the "
      "training set's batches, with the linearization's Jacobian slices.  theta (the flat "
      "parameters) is trained in place; returns the Summary.  on_epoch(record) -> bool is "
      "called after every epoch; True stops.";
  m.def("foreign_fit32", &foreign_fit<float>, nb::arg("spec"), nb::arg("request"),
        nb::arg("linearization"), nb::arg("data"), nb::arg("communicator").none(), nb::arg("theta"),
        nb::arg("on_epoch").none(), doc);
  m.def("foreign_fit64", &foreign_fit<double>, nb::arg("spec"), nb::arg("request"),
        nb::arg("linearization"), nb::arg("data"), nb::arg("communicator").none(), nb::arg("theta"),
        nb::arg("on_epoch").none(), doc);
}

}  // namespace lmtrain::python
