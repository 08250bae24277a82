// Weight-decay penalties of the objective, F + ½θᵀRθ (SolverOptions::regularization):
//   none      R = 0
//   l2        R = ρI, ρ = weight_decay fixed
//   bayesian  R = ρI, ρ re-estimated after every accepted step (MacKay 1992; MATLAB trainbr)
//   ard       R = diag(ρ_g(i)), one ρ per ModelSpec::relevance_groups() group, re-estimated
//             the same way per group (MacKay 1994; Neal 1996), never below bayesian's one ρ
// A penalty adds Rθ to g and R to A (the exact Hessian of ½θᵀRθ; with a stored J, the shift of
// its operator), reports its value at trial points, and — for the evidence-based ones — updates
// ρ from the A + R just solved.  Rank 0 makes every evidence decision and broadcasts it, so all
// ranks keep the same ρ even if their LAPACKs round differently.  The formulas are in
// solver_options.h; how they were chosen in docs/design.md ("Regularization — as built").
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "lmtrain/solve/collectives.h"
#include "lmtrain/solve/linearization_source.h"
#include "lmtrain/solve/normal_equations.h"
#include "lmtrain/solve/solver_options.h"

namespace lmtrain {

template <typename T, typename S>
class Penalty {
 public:
  virtual ~Penalty() = default;

  // The penalty of options.regularization for a step that solves with `solver` (resolved; the
  // combination must pass check_regularization).  T is the model's precision, S the system's.
  static std::unique_ptr<Penalty> create(const SolverOptions& options, LinearSolverType solver,
                                         LinearizationSource<T>& source, LinearAlgebra<S>& system,
                                         Collectives<S>& collectives);
  // System-precision elements it allocates for n parameters (the memory plan's share).
  static std::size_t system_elements(const SolverOptions& options, std::size_t n);

  // Adds the penalty at θ to the linearized system of a step (g, and A or ne.shift) and returns
  // ½θᵀRθ.  `data_objective`: F of the data at θ (summed over ranks).  An evidence-based penalty
  // whose ρ is still 0 first starts it (bayesian, and ard's common level: from the evidence
  // estimate γ = min(n, N)/2; ard's own group estimates: ard_initial_scale × mean diag(A)).
  virtual double apply(const T* /*theta*/, double /*data_objective*/, NormalEquations<S>& /*ne*/) {
    return 0.0;
  }
  // ½θᵀRθ at a trial point.
  virtual double value(const T* /*theta*/) { return 0.0; }
  // value() for the LM step, which reads it with its trial's scalars (a GPU waits at every
  // read): a penalty that computes it on the device leaves the product it scales at `result` (a
  // device double) and returns nullopt, and value_from(what was read there) is the value, with
  // value()'s bits; the others return the value, as this default does.
  virtual std::optional<double> value_into(const T* theta, double* /*result*/) {
    return value(theta);
  }
  virtual double value_from(double /*read*/) const { return 0.0; }
  // After an accepted step to θ with data objective F: the evidence update from the A + R the
  // step solved with (bayesian, ard); returns γ = Σ γ_g (0 for a fixed penalty).
  virtual double update(const T* /*theta*/, double /*data_objective*/,
                        const NormalEquations<S>& /*ne*/, PhaseTimes& /*times*/) {
    return 0.0;
  }

  // The penalty's state, part of a checkpoint: its one ρ, or for ard each group's ρ_g (the
  // first G values, those R holds), then the common level and each group's own estimate.
  const std::vector<double>& weight_decays() const { return rho_; }
  // Throws InvalidArgument when `rho` has another size or holds a negative or non-finite value.
  // ard also takes the G values of a checkpoint written before it had a common level.
  virtual void set_weight_decays(const std::vector<double>& rho);
  // γ per group from the last evidence update (empty before the first).
  const std::vector<double>& effective_parameters() const { return gamma_; }
  // The single ρ of the penalties that have one (0 for none and ard), for StepReport.
  virtual double weight_decay() const { return 0.0; }

 protected:
  explicit Penalty(Regularization kind) : kind_(kind) {}
  virtual void weight_decays_changed() {}
  Regularization kind_;
  std::vector<double> rho_{0.0};
  std::vector<double> gamma_;
};

}  // namespace lmtrain
