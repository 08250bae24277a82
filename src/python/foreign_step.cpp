// lmtrain._core.ForeignStep{32,64}: the library's LM step (LevenbergMarquardtStep, planned by the
// StepPlanner) on a linearization that Python computes — lmtrain.torch's torch path.  Python
// supplies residuals and Jacobian slices through callbacks (foreign_source.h); damping, the ratio
// test, the linear solvers, mixed precision, the penalties, geodesic acceleration, termination and
// the memory plan are the library's, with the names and messages of `lmtrain fit`.  Under torchrun
// the ranks' sums go through torch.distributed (python_communicator.h).
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "arrays.h"
#include "foreign_source.h"
#include "foreign_spec.h"
#include "lmtrain/backend/device.h"
#include "lmtrain/core/error.h"
#include "lmtrain/solve/step_planner.h"
#include "module.h"
#include "python_communicator.h"
#include "schedule_state.h"
#include "step_report.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

template <typename T>
class ForeignStep {
 public:
  using Vector = nb::ndarray<T, nb::ndim<1>, nb::c_contig>;

  ForeignStep(const ForeignStepSpec& spec, nb::object callbacks, nb::object group)
      : spec_(spec), backend_(backend_for<T>(spec)) {
    if (spec.parameters == 0 || spec.max_units == 0 || spec.residuals_per_unit == 0)
      throw InvalidArgument("a step needs parameters, units and residuals per unit");
    if (!group.is_none())
      comm_ = std::make_unique<PythonCommunicator>(std::move(group), backend_->device_index());
    source_ =
        std::make_unique<ForeignSource<T>>(std::move(callbacks), *backend_, shape_of<T>(spec));
    SolverOptions options = spec.options;
    if (spec.float64_system) options.system_precision = SystemPrecision::kFloat64;
    const std::optional<LossKind> loss = parse_loss(spec.loss);
    if (!loss)
      throw InvalidArgument(fmt::format("loss = \"{}\": not a loss of lmtrain", spec.loss));
    StepProblem problem;
    problem.batch = spec.total_units > 0 ? spec.total_units : spec.max_units;
    problem.local_batch = spec.max_units;
    problem.ranks = comm_ ? comm_->size() : 1;
    problem.collectives = comm_ && (comm_->size() > 1 || comm_->supports_device_buffers());
    problem.caller_bytes = spec.caller_bytes;
    problem.loss = loss_ = *loss;
    planner_ = std::make_unique<StepPlanner<T>>(options, *source_, problem, comm_.get());
    step_ = planner_->build();
  }

  // `reported_units`: the units the reported loss averages over (all ranks' shards; 0: units).
  FrontEndStepReport step(Vector params, std::size_t units, std::size_t reported_units) {
    if (params.shape(0) != spec_.parameters || !on_device(params))
      throw nb::value_error(fmt::format("params must be a contiguous vector of {} values on {}",
                                        spec_.parameters, backend_->name())
                                .c_str());
    if (units > spec_.max_units)
      throw nb::value_error(
          fmt::format("{} units exceed the {} this step was planned for", units, spec_.max_units)
              .c_str());
    FrontEndStepReport report;
    PhaseTimes times;
    before_ = step_->state();
    {
      nb::gil_scoped_release unlocked;
      static_cast<StepReport&>(report) = run(params.data(), units, times);
    }
    source_->release_borrowed();
    if (std::optional<nb::python_error> error = source_->take_error()) throw std::move(*error);
    const std::size_t b = reported_units > 0 ? reported_units : units;
    report.loss =
        reported_loss(loss_, report.objective_before - report.penalty_before, b, spec_.outputs);
    report.loss_after =
        reported_loss(loss_, report.objective_after - report.penalty_after, b, spec_.outputs);
    report.slice_size = planner_->slice_samples();
    report.phase_seconds = phase_seconds(times);
    return report;
  }

  // F, A = JᵀJ (symmetrized) and g = Jᵀr at `params` on the current batch, built from the same
  // slices a step folds in (for inspection and tests; the model's precision only).
  std::tuple<double, nb::ndarray<nb::numpy, T>, nb::ndarray<nb::numpy, T>> normal_equations(
      Vector params, std::size_t units) {
    if (spec_.float64_system)
      throw nb::value_error(
          "normal_equations() builds A in the model's precision; this step's "
          "system is float64 (mixed precision)");
    const std::size_t n = spec_.parameters;
    NormalEquations<T> ne;
    double f = 0;
    {
      nb::gil_scoped_release unlocked;
      NormalEquationsBuilder<T> builder(*source_, planner_->slice_samples(), spec_.max_units,
                                        false);
      PhaseTimes times;
      f = builder.build(params.data(), nullptr, nullptr, units, ne, times);
    }
    source_->release_borrowed();
    if (std::optional<nb::python_error> error = source_->take_error()) throw std::move(*error);
    std::vector<T> a(n * n), g(n);
    backend_->copy_to_host(ne.a.data(), a.data(), n * n);
    backend_->copy_to_host(ne.g.data(), g.data(), n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = i + 1; k < n; ++k) a[k * n + i] = a[i * n + k];
    return {f, numpy_array(std::move(a), {n, n}), numpy_array(std::move(g), {n})};
  }

  // The schedule from before the last step (a rank that failed in it makes every rank go back).
  void undo_last_step() { step_->set_state(before_); }

  std::tuple<ScheduleTuple, std::vector<double>> state() const {
    const StepperState s = step_->state();
    return {schedule_tuple(s.damping, s.geodesic), s.weight_decays};
  }
  void set_state(double lambda, double nu, double floor, int skip, int backoff,
                 std::optional<std::vector<double>> weight_decays) {
    StepperState s = step_->state();
    std::tie(s.damping, s.geodesic) = schedule_state(lambda, nu, floor, skip, backoff);
    if (weight_decays) s.weight_decays = *weight_decays;
    step_->set_state(s);
  }
  const std::vector<double>& effective_parameters() const { return step_->effective_parameters(); }
  const StepPlan& plan() const { return planner_->plan(); }
  std::size_t slice_units() const { return planner_->slice_samples(); }
  std::string device() const { return backend_->name(); }
  std::string communicator() const { return comm_ ? comm_->name() : "local"; }

  // tp_traverse / tp_clear: the Python objects this step holds (the linearization object, the
  // communicator), so that a cycle through them (a residual_fn closing over its optimizer) is
  // collected.  After clear() the step can no longer be used.
  template <typename Visit>
  void visit_python(Visit&& visit) const {
    if (source_) visit(source_->callbacks());
    if (auto* py = dynamic_cast<PythonCommunicator*>(comm_.get())) visit(py->group());
  }
  void clear_python() {
    if (source_) source_->clear_callbacks();
    if (auto* py = dynamic_cast<PythonCommunicator*>(comm_.get())) py->clear_group();
  }

 private:
  bool on_device(const Vector& v) const { return on_backend_device(v, *backend_); }
  // The step, rebuilt on a halved slice when an allocation fails (one rank).
  StepReport run(T* params, std::size_t units, PhaseTimes& times) {
    for (;;) {
      try {
        return step_->step(params, nullptr, nullptr, units, times);
      } catch (const OutOfMemory& e) {
        step_ = planner_->rebuild_after(std::move(step_), e, before_);
      }
    }
  }

  ForeignStepSpec spec_;
  std::unique_ptr<Backend<T>> backend_;
  std::unique_ptr<dist::Communicator> comm_;
  std::unique_ptr<ForeignSource<T>> source_;
  std::unique_ptr<StepPlanner<T>> planner_;
  std::unique_ptr<LmStepper<T>> step_;
  StepperState before_;
  LossKind loss_ = LossKind::kMse;
};

template <typename T>
int traverse_foreign_step(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nb::inst_ready(self)) return 0;
  int result = 0;
  nb::inst_ptr<ForeignStep<T>>(self)->visit_python([&](nb::handle h) {
    if (result == 0 && h.ptr() != nullptr) result = visit(h.ptr(), arg);
  });
  return result;
}

template <typename T>
int clear_foreign_step(PyObject* self) {
  if (nb::inst_ready(self)) nb::inst_ptr<ForeignStep<T>>(self)->clear_python();
  return 0;
}

template <typename T>
void bind_foreign_step(nb::module_& m, const char* name) {
  using F = ForeignStep<T>;
  static PyType_Slot slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(traverse_foreign_step<T>)},
                                {Py_tp_clear, reinterpret_cast<void*>(clear_foreign_step<T>)},
                                {0, nullptr}};
  nb::class_<F>(m, name, nb::type_slots(slots),
                "The library's LM step on residuals and Jacobian slices computed in Python "
                "(lmtrain.torch's torch path).")
      .def(nb::init<const ForeignStepSpec&, nb::object, nb::object>(), nb::arg("spec"),
           nb::arg("linearization"), nb::arg("communicator").none() = nb::none())
      .def("step", &F::step, nb::arg("params"), nb::arg("units"), nb::arg("reported_units") = 0,
           "One LM step from params (the flat parameters, updated in place when accepted) on "
           "`units` units of the batch the linearization object holds.  Raises what a callback "
           "raised (after the step has ended on every rank).")
      .def("normal_equations", &F::normal_equations, nb::arg("params"), nb::arg("units"),
           "(F, A, g) at params on the current batch, as the step builds them.")
      .def("undo_last_step", &F::undo_last_step,
           "Restores λ's schedule and the penalties' ρ from before the last step.")
      .def("state", &F::state, "((λ, ν, floor, geodesic_skip, geodesic_backoff), weight_decays).")
      .def("set_state", &F::set_state, nb::arg("lambda_"), nb::arg("nu"), nb::arg("floor"),
           nb::arg("geodesic_skip") = 0, nb::arg("geodesic_backoff") = 0,
           nb::arg("weight_decays").none() = nb::none())
      .def_prop_ro("effective_parameters", &F::effective_parameters,
                   "γ per relevance group from the last evidence update (bayesian, ard).")
      .def_prop_ro("linear_solver",
                   [](const F& f) { return std::string(to_string(f.plan().solver())); })
      .def_prop_ro("linear_solver_reason", [](const F& f) { return f.plan().solver_reason; })
      .def_prop_ro("geodesic_acceleration", [](const F& f) { return f.plan().geodesic(); })
      .def_prop_ro("memory_plan", [](const F& f) { return f.plan().memory.describe(); })
      .def_prop_ro("planned_peak_bytes", [](const F& f) { return f.plan().memory.peak_bytes; })
      .def_prop_ro("budget_bytes", [](const F& f) { return f.plan().memory.budget_bytes; })
      .def_prop_ro("fixed_bytes", [](const F& f) { return f.plan().memory.fixed_bytes; })
      .def_prop_ro("bytes_per_unit",
                   [](const F& f) { return f.plan().memory.bytes_per_slice_sample; })
      .def_prop_ro("slice_units", &F::slice_units)
      .def_prop_ro("device", &F::device)
      .def_prop_ro("communicator", &F::communicator);
}

}  // namespace

void bind_foreign_step(nb::module_& m) {
  using S = ForeignStepSpec;
  nb::class_<S>(m, "ForeignStepSpec", "The sizes, options and device of a torch-path step.")
      .def(nb::init<>())
      .def_rw("parameters", &S::parameters)
      .def_rw("residuals_per_unit", &S::residuals_per_unit)
      .def_rw("max_units", &S::max_units)
      .def_rw("total_units", &S::total_units)
      .def_rw("options", &S::options)
      .def_rw("loss", &S::loss)
      .def_rw("outputs", &S::outputs)
      .def_rw("float64_system", &S::float64_system)
      .def_rw("device", &S::device)
      .def_rw("stream", &S::stream,
              "cuda: the stream to run on (torch.cuda.current_stream().cuda_stream); 0: the "
              "backend's own.")
      .def_rw("caller_bytes", &S::caller_bytes)
      .def_rw("fixed_bytes", &S::fixed_bytes)
      .def_rw("bytes_per_unit", &S::bytes_per_unit)
      .def_rw("footprint_measured", &S::footprint_measured)
      .def_rw("group_of", &S::group_of)
      .def_rw("group_names", &S::group_names)
      .def_rw("group_sizes", &S::group_sizes)
      .def_rw("input_groups", &S::input_groups);
  bind_foreign_step<float>(m, "ForeignStep32");
  bind_foreign_step<double>(m, "ForeignStep64");
}

}  // namespace lmtrain::python
