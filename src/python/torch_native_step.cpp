// lmtrain._core.NativeStep{32,64}: one LevenbergMarquardtStep of the library's own engine
// (structural Jacobians, the whole step in C++) from parameters the caller holds — the fast path
// of lmtrain.torch for an nn.Sequential made only of layers lmtrain implements.  The caller
// (python/lmtrain/torch/_native.py) translates the module into the model file's architecture and
// its parameters into the flat order of the library (each layer's weight, PyTorch's (out, in)
// order, then its bias), and writes the parameters back after each step.
// On a CUDA device the step runs on the CUDA backend, queued on torch's current stream: the
// parameters, x and y are the caller's device tensors (DLPack, no host copy).
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <memory>
#include <string>
#include <tuple>

#include "errors.h"
#include "foreign_spec.h"
#include "lmtrain/backend/backend.h"
#include "lmtrain/core/error.h"
#include "lmtrain/lmtrain.h"
#include "lmtrain/nn/jacobian.h"
#include "lmtrain/records/model_file.h"
#include "lmtrain/solve/lm_step.h"
#include "lmtrain/solve/planned_step.h"
#include "lmtrain/train/engine_source.h"
#include "lmtrain/train/summary_text.h"
#include "module.h"
#include "python_fit.h"
#include "step_report.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

// Host arrays (the fit run's data sets, which the library copies into its own batches).
template <typename T>
using Vector = nb::ndarray<T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
template <typename T>
using Matrix = nb::ndarray<nb::ro, T, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
// Arrays on the step's device (host memory for the CPU backend, device memory for CUDA).
template <typename T>
using DeviceVector = nb::ndarray<T, nb::ndim<1>, nb::c_contig>;
template <typename T>
using DeviceMatrix = nb::ndarray<nb::ro, T, nb::ndim<2>, nb::c_contig>;

template <typename T>
class NativeStep {
 public:
  // `architecture`: the model file's JSON; `max_batch`: the samples the first plan is made for
  // (a larger batch is planned for again, PlannedStep).
  // `device`: "cpu" or "cuda:N"; `stream`: cuda, the caller's stream to queue on (0: its own).
  NativeStep(const std::string& architecture, const LossOptions& loss, SolverOptions options,
             std::size_t max_batch, const std::string& device, std::uintptr_t stream)
      : spec_(io::model_spec_from_json(nlohmann::json::parse(architecture))),
        backend_(backend_on<T>(device, stream)),
        model_(spec_, *backend_),
        loss_(loss, spec_.outputs(), *backend_) {
    options.validate();
    loss.validate(spec_.outputs());
    StepProblem problem;
    problem.batch = problem.local_batch = max_batch;
    problem.loss = loss.kind;
    // The module's parameters, the flat vector the step updates in place, x and y.
    problem.caller = {2, spec_.inputs() + spec_.outputs()};
    engine_ = std::make_unique<JacobianEngine<T>>(model_, loss_);
    source_ = std::make_unique<EngineSource<T>>(*engine_);
    step_ = std::make_unique<PlannedStep<T>>(options, *source_, problem);
  }

  std::size_t parameters() const { return model_.num_params(); }

  // One step on (x, y) from `params`, which it updates in place.
  FrontEndStepReport step(DeviceVector<T> params, const DeviceMatrix<T>& x,
                          const DeviceMatrix<T>& y) {
    const std::size_t n = model_.num_params(), batch = x.shape(0);
    if (params.shape(0) != n)
      throw nb::value_error(
          fmt::format("params has {} values; the network has {} parameters", params.shape(0), n)
              .c_str());
    if (!on_backend_device(params, *backend_) || !on_backend_device(x, *backend_) ||
        !on_backend_device(y, *backend_))
      throw nb::value_error(
          fmt::format("params, x and y must be on {}, where this step runs", backend_->name())
              .c_str());
    if (x.shape(1) != spec_.inputs() || y.shape(1) != spec_.outputs() || y.shape(0) != batch ||
        batch == 0)
      throw nb::value_error(fmt::format("x must be b × {} and y b × {} with b > 0, not {} × {} "
                                        "and {} × {}",
                                        spec_.inputs(), spec_.outputs(), x.shape(0), x.shape(1),
                                        y.shape(0), y.shape(1))
                                .c_str());
    FrontEndStepReport report;
    PhaseTimes times;
    bool finite = true;
    {
      nb::gil_scoped_release unlocked;
      // The caller's tensors, on the step's device, are the step's own: params is updated in
      // place (only when a trial is accepted), x and y are read where they are.
      finite = backend_->all_finite(batch * spec_.inputs(), x.data()) &&
               backend_->all_finite(batch * spec_.outputs(), y.data());
      if (finite)
        static_cast<StepReport&>(report) =
            step_->step(params.data(), x.data(), y.data(), batch, times);
    }
    if (!finite) throw nb::value_error("x or y holds NaN or inf; parameters are unchanged");
    report.loss = loss_.reported(report.objective_before - report.penalty_before, batch);
    report.loss_after = loss_.reported(report.objective_after - report.penalty_after, batch);
    report.path = "native";
    report.slice_size = step_->slice_samples();
    report.phase_seconds = phase_seconds(times);
    return report;
  }

  StepperState state() const { return step_->state(); }
  void set_state(const StepperState& state) { step_->set_state(state); }
  // cross_entropy_sampled: the key of the last linearization's draws (the next one draws with
  // key + 1), for state_dict and for a rebuilt step to go on where this one stopped.
  std::uint64_t draw_key() const { return engine_->draw_key(); }
  void set_draw_key(std::uint64_t key) { engine_->set_draw_key(key); }
  std::string solver() const { return std::string(to_string(step_->plan().solver())); }
  std::string plan() const { return in_python_terms(step_->plan().memory.describe()); }

 private:
  ModelSpec spec_;
  std::unique_ptr<Backend<T>> backend_;
  Sequential<T> model_;
  Loss<T> loss_;
  std::unique_ptr<JacobianEngine<T>> engine_;
  std::unique_ptr<EngineSource<T>> source_;
  std::unique_ptr<PlannedStep<T>> step_;
};

template <typename T>
void bind_native_step(nb::module_& m, const char* name) {
  using N = NativeStep<T>;
  nb::class_<N>(m, name,
                "The library's own LM step (structural Jacobians) on parameters held by the "
                "caller: lmtrain.torch's fast path for an nn.Sequential.")
      .def(nb::init<const std::string&, const LossOptions&, SolverOptions, std::size_t,
                    const std::string&, std::uintptr_t>(),
           nb::arg("architecture"), nb::arg("loss"), nb::arg("options"), nb::arg("max_batch"),
           nb::arg("device") = "cpu", nb::arg("stream") = 0)
      .def_prop_ro("parameters", &N::parameters)
      .def_prop_ro("linear_solver", &N::solver)
      .def_prop_ro("memory_plan", &N::plan)
      .def_prop_rw("draw_key", &N::draw_key, &N::set_draw_key,
                   "cross_entropy_sampled: the key of the last linearization's draws.")
      .def("step", &N::step, nb::arg("params"), nb::arg("x"), nb::arg("y"),
           "One LM step from params (updated in place) on the batch (x, y).")
      .def("state", &N::state, "The schedule's state (StepperState).")
      .def("set_state", &N::set_state, nb::arg("state"),
           "Checked (StepperState.validate) before the step takes it.");
}

// A data set of the library from a rows × inputs and a rows × outputs matrix.
template <typename T>
Dataset<T> dataset_of(const Matrix<T>& x, const Matrix<T>& y) {
  if (x.shape(0) != y.shape(0))
    throw nb::value_error(
        fmt::format("x has {} rows but y has {}", x.shape(0), y.shape(0)).c_str());
  Dataset<T> d(x.shape(0), x.shape(1), y.shape(1));
  std::copy(x.data(), x.data() + x.size(), d.x.begin());
  std::copy(y.data(), y.data() + y.size(), d.y.begin());
  return d;
}

// The fast path's fit: the library's Trainer (the fit run of train/fit_run.h with lmtrain's own
// network) on the module's parameters, which it trains in place.
template <typename T>
Summary native_fit(const std::string& architecture, const LossOptions& loss,
                   const SolverOptions& options, const ForeignFitRequest& request,
                   const Matrix<T>& x, const Matrix<T>& y, std::optional<Matrix<T>> x_validation,
                   std::optional<Matrix<T>> y_validation, Vector<T> params, nb::object on_epoch,
                   const std::string& device, std::uintptr_t stream) {
  const ModelSpec spec = io::model_spec_from_json(nlohmann::json::parse(architecture));
  auto backend = backend_on<T>(device, stream);
  const Dataset<T> train = dataset_of(x, y);
  std::optional<Dataset<T>> validation;
  if (x_validation && y_validation) validation = dataset_of(*x_validation, *y_validation);
  Trainer<T> trainer(spec, loss, options, request.trainer, *backend);
  const RunFingerprint fingerprint =
      request_fingerprint(request, train.samples, std::string(to_string(loss.kind)));
  std::optional<TrainingState<T>> resume;
  if (!request.resume.empty()) resume = io::read_checkpoint<T>(request.resume, fingerprint);
  PythonErrors errors;
  FitHooks<T> hooks = python_hooks<T>(request, fingerprint, errors, on_epoch, nullptr);
  for (IterationCallback& cb : hooks.callbacks) trainer.add_callback(std::move(cb));
  trainer.set_epoch_check(std::move(hooks.epoch_check));
  if (hooks.checkpoint)
    trainer.set_checkpoint_handler(std::move(hooks.checkpoint), hooks.checkpoint_every);
  trainer.set_stop_flag(hooks.stop_flag);
  if (params.shape(0) != spec.num_params())
    throw nb::value_error(fmt::format("params has {} values; the network has {} parameters",
                                      params.shape(0), spec.num_params())
                              .c_str());
  std::vector<T> p(params.data(), params.data() + params.shape(0));
  Summary summary;
  {
    nb::gil_scoped_release unlocked;
    summary =
        trainer.fit(p, train, validation ? &*validation : nullptr, resume ? &*resume : nullptr);
  }
  std::copy(p.begin(), p.end(), params.data());
  if (errors.error) throw std::move(*errors.error);
  summary.rank_devices = {backend->name()};
  rewrite_text(summary, in_python_terms);
  return summary;
}

}  // namespace

void bind_torch_native_step(nb::module_& m) {
  bind_native_step<float>(m, "NativeStep32");
  bind_native_step<double>(m, "NativeStep64");
  const char* doc =
      "The library's Trainer on an nn.Sequential of lmtrain's layers: params (the module's "
      "flat parameters) trained in place on (x, y), with validation (x_validation, "
      "y_validation) when given.  Returns the Summary.";
  m.def("native_fit32", &native_fit<float>, nb::arg("architecture"), nb::arg("loss"),
        nb::arg("options"), nb::arg("request"), nb::arg("x"), nb::arg("y"),
        nb::arg("x_validation").none(), nb::arg("y_validation").none(), nb::arg("params"),
        nb::arg("on_epoch").none(), nb::arg("device") = "cpu", nb::arg("stream") = 0, doc);
  m.def("native_fit64", &native_fit<double>, nb::arg("architecture"), nb::arg("loss"),
        nb::arg("options"), nb::arg("request"), nb::arg("x"), nb::arg("y"),
        nb::arg("x_validation").none(), nb::arg("y_validation").none(), nb::arg("params"),
        nb::arg("on_epoch").none(), nb::arg("device") = "cpu", nb::arg("stream") = 0, doc);
}

}  // namespace lmtrain::python
