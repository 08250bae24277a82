#include "lmtrain/solve/planned_step.h"

#include <algorithm>
#include <utility>

namespace lmtrain {

template <typename T>
PlannedStep<T>::PlannedStep(const SolverOptions& options, LinearizationSource<T>& source,
                            const StepProblem& problem, dist::Communicator* comm,
                            TotalUnits total_units)
    : options_(options),
      source_(source),
      problem_(problem),
      comm_(comm),
      total_units_(std::move(total_units)),
      planner_(std::make_unique<StepPlanner<T>>(options_, source_, problem_, comm_)),
      step_(planner_->build()),
      before_(step_->state()) {
  if (!total_units_) {
    const auto ranks = static_cast<std::size_t>(std::max(problem_.ranks, 1));
    total_units_ = [ranks](std::size_t units) { return units * ranks; };
  }
}

template <typename T>
std::size_t PlannedStep<T>::largest_over_ranks(std::size_t units) const {
  if (comm_ == nullptr || comm_->size() == 1) return units;
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_->size()));
  const std::uint64_t mine = units;
  comm_->allgather(&mine, sizeof mine, all.data());
  return static_cast<std::size_t>(*std::max_element(all.begin(), all.end()));
}

template <typename T>
void PlannedStep<T>::plan_for(std::size_t units) {
  const StepperState kept = step_->state();
  step_.reset();  // its slice-sized buffers, before the new plan counts the memory
  planner_.reset();
  problem_.local_batch = units;
  problem_.batch = total_units_(units);
  planner_ = std::make_unique<StepPlanner<T>>(options_, source_, problem_, comm_);
  step_ = planner_->build();
  step_->set_state(kept);
}

template <typename T>
StepReport PlannedStep<T>::step(T* params, const T* x, const T* y, std::size_t units,
                                PhaseTimes& times, std::optional<std::uint64_t> draw_key) {
  // With one rank the test is local; with several every rank must take part in the agreement
  // (and the collective planning it may lead to) at every step.
  const std::size_t largest = problem_.ranks > 1 ? largest_over_ranks(units) : units;
  if (largest > problem_.local_batch) plan_for(largest);
  before_ = step_->state();
  for (;;) {
    if (draw_key) source_.set_draw_key(*draw_key);
    try {
      return step_->step(params, x, y, units, times);
    } catch (const OutOfMemory& e) {
      step_ = planner_->rebuild_after(std::move(step_), e, before_);
    }
  }
}

template class PlannedStep<float>;
template class PlannedStep<double>;

}  // namespace lmtrain
