// lmtrain::python::ForeignStep: the library's LM step (LevenbergMarquardtStep, planned by the
// StepPlanner) on a linearization that Python computes — lmtrain.torch's torch path.  Python
// supplies residuals and Jacobian slices through callbacks (foreign_source.h); damping, the ratio
// test, the linear solvers, mixed precision, the penalties, geodesic acceleration, termination and
// the memory plan are the library's, with the names and messages of `lmtrain fit`.  Under torchrun
// the ranks' sums go through torch.distributed (python_communicator.h); the ranks of a device
// group (device_group_step.cpp) are threads of this process.
#pragma once

#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

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
#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/solve/planned_step.h"
#include "python_communicator.h"
#include "step_report.h"

namespace lmtrain::python {

template <typename T>
class ForeignStep {
 public:
  using Vector = nanobind::ndarray<T, nanobind::ndim<1>, nanobind::c_contig>;

  // The backend and the source, on the caller's thread (the source holds Python objects); build()
  // plans the step.  Under torch.distributed `group` is the ranks' communicator (or None).
  ForeignStep(const ForeignStepSpec& spec, nanobind::object callbacks)
      : spec_(spec), backend_(backend_for<T>(spec)) {
    if (spec.parameters == 0 || spec.max_units == 0 || spec.residuals_per_unit == 0)
      throw InvalidArgument("a step needs parameters, units and residuals per unit");
    source_ =
        std::make_unique<ForeignSource<T>>(std::move(callbacks), *backend_, shape_of<T>(spec));
  }
  ForeignStep(const ForeignStepSpec& spec, nanobind::object callbacks, nanobind::object group)
      : ForeignStep(spec, std::move(callbacks)) {
    build(communicator_for(std::move(group), *backend_));
  }

  // The plan and the step over `comm`'s ranks (null: one).  Collective when there are several
  // ranks: a device group builds its ranks on their threads; the GIL need not be held.
  void build(std::unique_ptr<dist::Communicator> comm) {
    comm_ = std::move(comm);
    const SolverOptions& options = spec_.options;
    const std::optional<LossKind> loss = parse_loss(spec_.loss);
    if (!loss)
      throw InvalidArgument(fmt::format("loss = \"{}\": not a loss of lmtrain", spec_.loss));
    const ForeignStepSpec& spec = spec_;
    StepProblem problem;
    problem.batch = spec.total_units > 0 ? spec.total_units : spec.max_units;
    problem.local_batch = spec.max_units;
    problem.ranks = comm_ ? comm_->size() : 1;
    problem.collectives = comm_ && (comm_->size() > 1 || comm_->supports_device_buffers());
    problem.caller = {1, 0};  // the flat θ
    problem.loss = loss_ = *loss;
    if (problem.ranks > 1)  // distributed_cholesky: ScaLAPACK needs MPI, cuSOLVERMp NCCL
      problem.distributed_unavailable =
          dist::distributed_normal_matrix_unavailable(comm_.get(), backend_->device_kind());
    step_ = std::make_unique<PlannedStep<T>>(options, *source_, problem, comm_.get());
  }

  // `reported_units`: the units the reported loss averages over (all ranks' shards; 0: units).
  FrontEndStepReport step(Vector params, std::size_t units, std::size_t reported_units) {
    T* theta = begin_step(params);
    PhaseTimes times;
    StepReport result;
    {
      nanobind::gil_scoped_release unlocked;
      result = run(theta, units, times);
    }
    if (std::optional<nanobind::python_error> error = end_step()) throw std::move(*error);
    return report(result, times, units, reported_units);
  }

  // A step in three parts, for a device group that runs its ranks' steps on threads of its own:
  // the parameters checked (GIL held); the step (no GIL); the arrays Python lent released and
  // the exception a callback raised, if any (GIL held).
  T* begin_step(Vector& params) {
    if (params.shape(0) != spec_.parameters || !on_device(params))
      throw nanobind::value_error(
          fmt::format("params must be a contiguous vector of {} values on {}", spec_.parameters,
                      backend_->name())
              .c_str());
    return params.data();
  }
  std::optional<nanobind::python_error> end_step() {
    source_->release_borrowed();
    return source_->take_error();
  }
  // The binding's report of a step: the reported losses over `reported_units` units (0: units).
  FrontEndStepReport report(const StepReport& result, const PhaseTimes& times, std::size_t units,
                            std::size_t reported_units) const {
    FrontEndStepReport report;
    static_cast<StepReport&>(report) = result;
    const std::size_t b = reported_units > 0 ? reported_units : units;
    report.loss =
        reported_loss(loss_, report.objective_before - report.penalty_before, b, spec_.outputs);
    report.loss_after =
        reported_loss(loss_, report.objective_after - report.penalty_after, b, spec_.outputs);
    report.slice_size = step_->slice_samples();
    report.phase_seconds = phase_seconds(times);
    // The route the linearization took ("autograd per point", "pinn taylor", …), as the
    // optimizer's `path` says: chosen at the first step, by measurement where "auto".
    const nanobind::handle lin = source_->callbacks();
    if (lin.is_valid() && nanobind::hasattr(lin, "path"))
      report.path = nanobind::cast<std::string>(nanobind::str(lin.attr("path")));
    return report;
  }

  // F, A = JᵀJ (symmetrized) and g = Jᵀr at `params` on the current batch, built from the same
  // slices a step folds in (for inspection and tests; the model's precision only).
  std::tuple<double, nanobind::ndarray<nanobind::numpy, T>, nanobind::ndarray<nanobind::numpy, T>>
  normal_equations(Vector params, std::size_t units) {
    if (std::is_same_v<T, float> &&
        step_->plan().options.system_precision == SystemPrecision::kFloat64)
      throw nanobind::value_error(
          "normal_equations() builds A in the model's precision; this step's "
          "system is float64 (mixed precision)");
    const std::size_t n = spec_.parameters;
    NormalEquations<T> ne;
    double f = 0;
    {
      nanobind::gil_scoped_release unlocked;
      NormalEquationsBuilder<T> builder(*source_, step_->slice_samples(),
                                        std::max(units, step_->planned_units()), false);
      PhaseTimes times;
      f = builder.build(params.data(), nullptr, nullptr, units, ne, times);
    }
    source_->release_borrowed();
    if (std::optional<nanobind::python_error> error = source_->take_error())
      throw std::move(*error);
    std::vector<T> a(n * n), g(n);
    backend_->copy_to_host(ne.a.data(), a.data(), n * n);
    backend_->copy_to_host(ne.g.data(), g.data(), n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = i + 1; k < n; ++k) a[k * n + i] = a[i * n + k];
    return {f, numpy_array(std::move(a), {n, n}), numpy_array(std::move(g), {n})};
  }

  // The schedule from before the last step (a rank that failed in it makes every rank go back).
  void undo_last_step() { step_->undo_last_step(); }
  StepperState state() const { return step_->state(); }
  void set_state(const StepperState& state) { step_->set_state(state); }
  const std::vector<double>& effective_parameters() const { return step_->effective_parameters(); }
  const StepPlan& plan() const { return step_->plan(); }
  int device_index() const { return backend_->device_index(); }
  bool on_cuda() const { return backend_->device_kind() == DeviceKind::kCuda; }
  std::size_t slice_units() const { return step_->slice_samples(); }
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

  // The step (PlannedStep: planned again for a larger batch, the slice halved after an
  // allocation failure).  No GIL needed.
  StepReport run(T* params, std::size_t units, PhaseTimes& times) {
    return step_->step(params, nullptr, nullptr, units, times);
  }

 private:
  bool on_device(const Vector& v) const { return on_backend_device(v, *backend_); }

  ForeignStepSpec spec_;
  std::unique_ptr<Backend<T>> backend_;
  std::unique_ptr<dist::Communicator> comm_;
  std::unique_ptr<ForeignSource<T>> source_;
  std::unique_ptr<PlannedStep<T>> step_;
  LossKind loss_ = LossKind::kMse;
};

}  // namespace lmtrain::python
