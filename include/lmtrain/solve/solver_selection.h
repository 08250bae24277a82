// The linear solver for a problem and its memory plan (DESIGN.md §4, §5): `auto` resolved from
// the batch's residual rows m, the parameters n, the ranks, the regularization and the memory
// budget; the plan sized from the bytes each of the step's components reports for that solver.
//   auto → dual      m < n, D = I, one rank, no penalty: the m × m system is smaller than A;
//        → cg        A does not fit the budget (not with bayesian or ard, which need A itself);
//        → cholesky  otherwise.
// An explicit choice that cannot work here (dual with Marquardt damping or several ranks) falls
// back to cholesky, and the reason says so.  The reason is what Summary::linear_solver_reason
// prints.
#pragma once

#include <string>

#include "lmtrain/nn/memory_plan.h"
#include "lmtrain/nn/sequential.h"
#include "lmtrain/solve/solver_options.h"

namespace lmtrain {

// The problem one rank's step solves.
struct StepProblem {
  std::size_t batch = 0;                 // samples per step, all ranks together
  std::size_t local_batch = 0;           // this rank's shard of a batch (at most)
  std::size_t residuals_per_sample = 0;  // R
  int ranks = 1;
  bool collectives = false;      // the step sums over ranks (several, or NCCL with one)
  std::size_t budget_bytes = 0;  // what the step may use on this rank's device
  // Buffers of the model's precision the caller holds during training (parameters, their best
  // copy, the batch, the evaluation's activations), to be counted in the plan.
  std::size_t caller_elements = 0;
};

struct SolverChoice {
  LinearSolverType type = LinearSolverType::kCholesky;
  MemoryPlan plan;
  std::string reason;
};

// Throws MemoryPlanError, with the sizes and the ways out, when nothing fits.
template <typename T>
SolverChoice choose_linear_solver(const SolverOptions& options, const Sequential<T>& model,
                                  const StepProblem& problem);

// The plan for one (resolved) solver; throws MemoryPlanError when even one sample does not fit.
template <typename T>
MemoryPlan plan_step_memory(const SolverOptions& options, LinearSolverType solver,
                            const Sequential<T>& model, const StepProblem& problem);

}  // namespace lmtrain
