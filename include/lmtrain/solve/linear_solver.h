// Solvers of the damped system (A + λD)δ = g of one LM step.  prepare() runs once per step
// (after A and g are built); solve() once per λ retry and never rebuilds A or g.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "lmtrain/solve/collectives.h"
#include "lmtrain/solve/normal_equations.h"
#include "lmtrain/solve/solver_options.h"

namespace lmtrain {

template <typename T>
class LinearSolver {
 public:
  virtual ~LinearSolver() = default;
  virtual LinearSolverType type() const = 0;
  // `d` is the damping diagonal (device, n values) or nullptr for D = I; it must stay valid until
  // the next prepare().  Returns false when the system cannot be prepared (an eigensolver that
  // did not converge), which makes every attempt of the step invalid.
  virtual bool prepare(const NormalEquations<T>& ne, const T* d) = 0;
  // Writes δ; returns false on a failed factorization (a recoverable, invalid step).
  virtual bool solve(double lambda, T* delta) = 0;
  // solve() for a caller that reads the verdict with its other scalars, in one read (the LM
  // step): a solver that would read its factorization's status leaves it at `status` (a device
  // double, 0 when it succeeded) instead and returns kOnDevice, δ meaningless when it failed; the
  // others return their verdict, as this default does.
  enum class Verdict { kValid, kInvalid, kOnDevice };
  virtual Verdict solve_into(double lambda, T* delta, double* /*status*/) {
    return solve(lambda, delta) ? Verdict::kValid : Verdict::kInvalid;
  }
  // x = (A + λD)⁻¹·rhs with the λ of the last successful solve(), reusing its factorization (a
  // second right-hand side: geodesic acceleration).  False when the solver cannot (dual form).
  virtual bool solve_again(const T* /*rhs*/, T* /*x*/) { return false; }

  // Iterations of the last solve (CG; 0 for the direct solvers).
  virtual int iterations() const { return 0; }
  // How the solver launched its attempts where an option chose (SolverOptions::cuda_graphs):
  // replayed from a recording, or why not.  Empty when there is nothing to say.
  virtual std::string report() const { return {}; }

  // `type` must be resolved (not kAuto).  `n` parameters, up to `max_residuals` rows (dual).
  // CG sums its n-vectors over `collectives` (null: one rank) and reads cg_forcing and
  // cg_max_iterations from `options`.
  static std::unique_ptr<LinearSolver> create(LinearSolverType type, LinearAlgebra<T>& backend,
                                              std::size_t n, std::size_t max_residuals,
                                              Collectives<T>* collectives = nullptr,
                                              const SolverOptions& options = {});
  // Elements of T that create() allocates (the memory plan's share).
  static std::size_t workspace_elements(LinearSolverType type, std::size_t n,
                                        std::size_t max_residuals);
};

}  // namespace lmtrain
