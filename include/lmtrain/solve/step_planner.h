// Planning an LM step, once for every front end (DESIGN.md §4, §5): the Trainer, lmtrain.torch's
// fast path (NativeStep) and its torch path all build their step here, so `auto` means the same
// everywhere.  The planner
//   * resolves the auto options: the system's precision (choose_system_precision: from the
//     residual rows m summed into A, the regularization and the device's float64 rate — rank
//     0's, so that every rank builds the same system; a float64 A that does not fit the budget
//     where a float32 one does gives way to it), the linear solver (from m, the parameters n,
//     the ranks, the regularization and the memory budget) and geodesic acceleration (for the
//     loss);
//   * plans memory: the slice from the budget and the bytes each component reports — the
//     source's footprint (counted for the native engine, measured for torch.func), the builder,
//     the linear solver, the damping, the penalty, the geodesic correction and the step;
//   * builds the step, halving the slice when an allocation fails, and rebuilds it after an
//     out-of-memory error while stepping (one rank only: with several ranks the others already
//     wait in a collective, so the job ends with the message instead).
//
//   auto → dual                  m < n, D = I, one rank, no penalty: the m × m system is smaller
//                                than A;
//        → cholesky              A (replicated) fits every rank's budget;
//        → distributed_cholesky  else, when A's block-cyclic share (and its factor's) fits each
//                                rank of several and the ranks can factor it (ScaLAPACK over MPI,
//                                cuSOLVERMp over NCCL); not with bayesian or ard;
//        → cg                    else (not with bayesian or ard, which need A itself).
// An explicit choice that cannot work here (dual with Marquardt damping or several ranks) falls
// back to cholesky, and the reason says so; it is what Summary::linear_solver_reason prints.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "lmtrain/core/error.h"
#include "lmtrain/core/loss_kind.h"
#include "lmtrain/dist/communicator.h"
#include "lmtrain/solve/linearization_source.h"
#include "lmtrain/solve/lm_step.h"
#include "lmtrain/solve/memory_plan.h"
#include "lmtrain/solve/solver_options.h"

namespace lmtrain {

// What the caller of a step holds on its device while training, which the plan counts as used
// (the one place its bytes are reckoned): vectors of the n parameters (θ; its best copy under
// early stopping; the module's own tensors beside the flat buffer) and, per unit of this rank's
// batch, the inputs and targets it hands over and the activations of its loss evaluations.
struct CallerBuffers {
  std::size_t parameter_vectors = 1;
  std::size_t elements_per_unit = 0;
  std::size_t bytes(std::size_t n, std::size_t units, std::size_t element_size) const {
    return (parameter_vectors * n + units * elements_per_unit) * element_size;
  }
};

// The problem one rank's step solves.
struct StepProblem {
  std::size_t batch = 0;        // units (samples) per step, all ranks together
  std::size_t local_batch = 0;  // this rank's shard of a batch (at most)
  int ranks = 1;
  bool collectives = false;  // the step sums over ranks (several, or NCCL with one)
  // What the step may use on this rank's device; 0: SolverOptions::memory_budget_bytes, or
  // memory_fraction of what the source's device has available now.
  std::size_t budget_bytes = 0;
  // What the caller holds on the device during training, counted in the plan for local_batch.
  CallerBuffers caller{0, 0};
  // The loss, for SolverOptions::geodesic_acceleration = auto (a residual function is mse).
  LossKind loss = LossKind::kMse;
  // Why A cannot be sharded over these ranks (distributed_cholesky), or nothing when it can
  // (dist::distributed_normal_matrix_unavailable for the step's communicator and device).
  std::optional<std::string> distributed_unavailable = std::string("the step has one rank");
  // The device's float64 throughput over its float32 throughput, for system_precision = auto;
  // 0: the source's device's (float64_rate).  The StepPlanner puts rank 0's here.
  double float64_rate = 0;
};

// The resolved options, the solver's reason and the memory plan.
struct StepPlan {
  // system_precision, linear_solver and geodesic_acceleration resolved
  SolverOptions options;
  SystemPrecisionChoice precision;  // what system_precision = auto chose, and why
  std::string solver_reason;
  MemoryPlan memory;
  // distributed_cholesky: the process grid and the largest share of A ("2×2 process grid of 4
  // ranks, 64×64 blocks; A's share on rank 0: 1.2 GiB of 4.8 GiB"); empty otherwise.
  std::string distribution;
  LinearSolverType solver() const { return options.linear_solver; }
  bool geodesic() const { return uses_geodesic_acceleration(options, options.linear_solver); }
};

// The plan for `source` on `problem`.  Throws MemoryPlanError, with the sizes and the ways out,
// when nothing fits.
template <typename T>
StepPlan plan_step(const SolverOptions& options, const LinearizationSource<T>& source,
                   const StepProblem& problem);

// The memory plan of one resolved solver (throws MemoryPlanError when even one unit does not fit).
template <typename T>
MemoryPlan plan_step_memory(const SolverOptions& options, LinearSolverType solver,
                            const LinearizationSource<T>& source, const StepProblem& problem);

template <typename T>
class StepPlanner {
 public:
  // Plans at once (plan_step); `source` and `comm` must outlive the planner and its steps.
  StepPlanner(const SolverOptions& options, LinearizationSource<T>& source,
              const StepProblem& problem, dist::Communicator* comm = nullptr);

  const StepPlan& plan() const { return plan_; }
  std::size_t slice_samples() const { return slice_; }
  int halvings() const { return halvings_; }
  const std::string& halving_cause() const { return halving_cause_; }

  // The step on the plan's slice; an allocation failure while building it halves the slice and
  // tries again (OutOfMemory when a one-unit slice fails, or with several ranks).
  std::unique_ptr<LmStepper<T>> build();
  // After `error` in a step: frees the step's and the source's slice-sized buffers, halves the
  // slice and builds the step again with `state` (λ's schedule, the penalties' ρ).  Rethrows
  // `error` with the slice in its message when the slice is one unit already or there are
  // several ranks.
  std::unique_ptr<LmStepper<T>> rebuild_after(std::unique_ptr<LmStepper<T>> failed,
                                              const OutOfMemory& error, const StepperState& state);

 private:
  void halve(const OutOfMemory& error);
  StepPlan plan_;
  LinearizationSource<T>& source_;
  std::size_t max_batch_;
  int ranks_;
  dist::Communicator* comm_;
  std::size_t slice_;
  int halvings_ = 0;
  std::string halving_cause_;
};

}  // namespace lmtrain
