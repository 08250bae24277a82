// One Levenberg–Marquardt step on one batch:
//   1. linearize: F, A = JᵀJ, g = Jᵀr (or J, r for the dual form), slice by slice;
//   2. D = I or clamp(diag A); prepare the linear solver once;
//   3. up to max_attempts times: δ = (A + λD)⁻¹g; an invalid step (failed factorization or
//      non-finite δ) or a trial θ − lr·δ that does not lower F raises λ; the first trial that
//      lowers F is accepted and λ lowered.
// The gain ratio ρ = (F − F_trial) / (F − m(δ)) uses the Gauss–Newton model
//   F − m(δ) = lr·gᵀδ − ½lr²·δᵀAδ,  δᵀAδ = gᵀδ − λ·δᵀDδ   (from (A + λD)δ = g),
// so it costs two dot products and never touches A.
#pragma once

#include <memory>

#include "lmtrain/solve/damping.h"
#include "lmtrain/solve/linear_solver.h"
#include "lmtrain/solve/termination.h"

namespace lmtrain {

struct StepReport {
  bool accepted = false;
  int attempts = 0;         // solves performed
  int rejected = 0;         // valid trials that did not lower F
  int invalid = 0;          // failed factorizations / non-finite steps
  double objective_before = 0;
  double objective_after = 0;  // F after the step (= before if not accepted)
  double lambda = 0;           // λ of the last solve
  double gain_ratio = 0;       // ρ of the accepted step
  double gradient_max_norm = 0;
  double step_norm = 0;        // ‖lr·δ‖₂ of the accepted step
  TerminationReason termination = TerminationReason::kNone;
};

template <typename T>
class LevenbergMarquardtStep {
 public:
  // `solver_type` must be resolved (not auto); `dual` must match it.
  LevenbergMarquardtStep(const SolverOptions& options, LinearSolverType solver_type,
                         JacobianEngine<T>& engine, std::size_t slice_samples,
                         std::size_t max_batch);

  // Performs the step on params (device, n values), updating them in place when accepted.
  StepReport step(T* params, const T* x, const T* y, std::size_t batch, PhaseTimes& times);

  DampingStrategy& damping() { return *damping_; }
  const NormalEquations<T>& normal_equations() const { return ne_; }
  LinearSolver<T>& linear_solver() { return *solver_; }

 private:
  SolverOptions options_;
  Backend<T>& backend_;
  JacobianEngine<T>& engine_;
  NormalEquationsBuilder<T> builder_;
  std::unique_ptr<LinearSolver<T>> solver_;
  std::unique_ptr<DampingStrategy> damping_;
  NormalEquations<T> ne_;
  DeviceBuffer<T> delta_, trial_, d_, tmp_;
};

}  // namespace lmtrain
