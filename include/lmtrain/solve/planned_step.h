// The LM step as every front end drives it — the fit run (lmtrain fit, Trainer, lmtrain.fit,
// lmtrain.torch's fit), lmtrain.torch's fast path (NativeStep) and its torch path (ForeignStep,
// DeviceGroupStep) — so that the decisions around a step are taken in one place:
//   * planning: the StepPlanner's plan for the problem (solver, precision, memory, slice);
//   * planning again, keeping the schedule, when a batch has more units than the plan holds (a
//     PINN's points or a residual function's rows vary between batches); with several ranks the
//     ranks agree on it first, since planning is collective;
//   * the out-of-memory retry: an allocation that fails while stepping halves the slice and
//     reruns the step from the state it started in (one rank; with several the others already
//     wait in a collective, so the error ends the job with its message);
//   * the schedule's state (StepperState: λ, ν, the floor, the geodesic backoff, ρ): its start
//     (StepperState::initial), its checks (StepperState::validate), and undoing a step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lmtrain/dist/communicator.h"
#include "lmtrain/solve/lm_step.h"
#include "lmtrain/solve/step_planner.h"

namespace lmtrain {

template <typename T>
class PlannedStep {
 public:
  // The units of a step over all ranks when each rank's batch has at most `units`.
  using TotalUnits = std::function<std::size_t(std::size_t units)>;

  // Plans for `problem` (its local_batch: the most units this rank linearizes in a step) and
  // builds the step.  `source` and `comm` must outlive it.  Collective with several ranks.
  // `total_units` for a plan made again (default: units × ranks; the fit run caps it by the
  // whole batch).
  PlannedStep(const SolverOptions& options, LinearizationSource<T>& source,
              const StepProblem& problem, dist::Communicator* comm = nullptr,
              TotalUnits total_units = {});

  // One step from `params` (updated in place when accepted) on `units` units of this rank's
  // batch.  Plans again first when the ranks' largest batch exceeds the plan.  `draw_key`: the
  // key cross_entropy_sampled draws with (set again before a retried attempt), or none.
  StepReport step(T* params, const T* x, const T* y, std::size_t units, PhaseTimes& times,
                  std::optional<std::uint64_t> draw_key = std::nullopt);

  const StepPlan& plan() const { return planner_->plan(); }
  std::size_t planned_units() const { return problem_.local_batch; }
  std::size_t slice_samples() const { return planner_->slice_samples(); }
  int halvings() const { return planner_->halvings(); }
  const std::string& halving_cause() const { return planner_->halving_cause(); }

  StepperState state() const { return step_->state(); }
  // Checked (StepperState::validate, and the penalty's group count) before the step takes it.
  void set_state(const StepperState& state) { step_->set_state(state); }
  // The schedule as it was before the last step (a rank that failed in it makes every rank go
  // back).
  void undo_last_step() { step_->set_state(before_); }
  double lambda() const { return step_->lambda(); }
  const std::vector<double>& effective_parameters() const { return step_->effective_parameters(); }
  std::size_t system_peak_bytes() const { return step_->system_peak_bytes(); }
  std::string normal_matrix_report() const { return step_->normal_matrix_report(); }

 private:
  // The largest of the ranks' unit counts (this rank's alone with one rank).
  std::size_t largest_over_ranks(std::size_t units) const;
  // Plans again for local batches of `units` units, keeping the schedule.
  void plan_for(std::size_t units);

  SolverOptions options_;
  LinearizationSource<T>& source_;
  StepProblem problem_;
  dist::Communicator* comm_;
  TotalUnits total_units_;
  std::unique_ptr<StepPlanner<T>> planner_;
  std::unique_ptr<LmStepper<T>> step_;
  StepperState before_;
};

}  // namespace lmtrain
