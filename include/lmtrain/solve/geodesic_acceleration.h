// Geodesic acceleration of an LM step (SolverOptions::geodesic_acceleration; Transtrum, Machta &
// Sethna 2011, Transtrum & Sethna 2012).  The step v = −lr·δ is the velocity of a path on the
// model manifold; its acceleration a solves the same damped system with another right-hand side,
//   (A + λD) a = −Jᵀ r_vv,   r_vv = D²_v r ≈ (r(θ + hv) − 2 r(θ) + r(θ − hv)) / h²,
// and the trial becomes θ + v + ½a.  In the step's sign convention (θ_trial = θ − lr·δ) that is
//   δ ← δ + a'/(2·lr)   with a' = (A + λD)⁻¹ Jᵀ r_vv = −a,
// kept only when 2‖a‖ ≤ α‖v‖ (α = geodesic_ratio): a larger correction means the second-order
// path is not to be trusted that far.
//
// Costs per attempt: two forward passes (residuals at θ ± hv), one product Jᵀu (a GEMV on J where
// it is still held — the stored J, or the one slice a batch fitted — otherwise the slices are
// built again, without SYRK) and one more solve with the attempt's factorization.
#pragma once

#include <algorithm>
#include <type_traits>

#include "lmtrain/solve/linear_solver.h"
#include "lmtrain/solve/linearization_source.h"
#include "lmtrain/solve/normal_equations.h"
#include "lmtrain/solve/solver_options.h"

namespace lmtrain {

// Which attempts compute the correction.  A correction that fails the ratio test costs its two
// forward passes and its solve for nothing, and refusals come in runs (float32 rounding noise in
// r_vv near a minimum, mini-batches the second-order term does not describe): after a refusal
// the next `backoff` attempts take the plain step without computing one, the backoff doubling
// with each refusal of a run up to SolverOptions::geodesic_backoff_max; a kept correction resets
// it.  Every rank sees the same outcomes, so every rank skips the same attempts.
class GeodesicBackoff {
 public:
  struct State {
    int skip = 0;     // attempts left to take without the correction
    int backoff = 0;  // what the next refusal skips (doubled), 0 after a kept correction
  };
  explicit GeodesicBackoff(int max_backoff) : max_(max_backoff) {}
  // Whether this attempt computes the correction; false counts a skipped attempt down.
  bool due() {
    if (state_.skip <= 0) return true;
    --state_.skip;
    return false;
  }
  // Whether the next due() is true, changing nothing.
  bool due_now() const { return state_.skip <= 0; }
  // The outcome of a computed correction: kept (true) or refused by the ratio test.
  void record(bool applied) {
    state_.backoff = applied ? 0 : std::min(max_, std::max(1, 2 * state_.backoff));
    state_.skip = state_.backoff;
  }
  const State& state() const { return state_; }
  void set_state(const State& s) { state_ = s; }

 private:
  int max_;
  State state_;
};

template <typename T, typename S = T>
class GeodesicAcceleration {
 public:
  // `max_residuals`: the most residual rows of a batch on this rank; `ne`: the normal equations
  // the step solves (read for a stored J), which must outlive this object.
  GeodesicAcceleration(const SolverOptions& options, LinearizationSource<T>& source,
                       NormalEquationsBuilder<T, S>& builder, const NormalEquations<S>& ne,
                       LinearAlgebra<S>& system, std::size_t max_residuals);

  // Elements allocated for it, for the memory plan.  Model precision: two residual vectors and
  // the point θ ± hv (what the source allocates to evaluate residuals there is in its
  // footprint).  System precision: the right-hand side and the correction, and in mixed
  // precision u widened for Jᵀu (the builder's).
  static std::size_t model_elements(std::size_t max_residuals, std::size_t n) {
    return 2 * max_residuals + n;
  }
  static std::size_t system_elements(std::size_t n, std::size_t max_residuals) {
    return 2 * n + (std::is_same_v<T, S> ? 0 : max_residuals);
  }

  // This rank's Jᵀ r_vv along v = −lr·δ (δ in T on the model's backend) into rhs(); the caller
  // sums rhs() over the ranks.
  void second_derivative(const T* params, double lr, const T* delta);
  S* rhs() { return rhs_.data(); }

  // a' = (A + λD)⁻¹ rhs() with the solver's last factorization, and δ ← δ + a'/(2·lr) (δ in S on
  // the system's backend) when 2‖a‖ ≤ α‖v‖, decided on the device
  // (LinearAlgebra::axpy_if_ratio_holds): ‖v‖ = lr·√`delta_norms`[2] (vector_norms of δ),
  // ‖a‖'s norms into `norms[0..2]` and the outcome into `norms[3]` (1 kept, 0 refused), device
  // doubles the caller reads with its other scalars — the correction costs no read of its own.
  // False, queuing nothing, when the solver cannot solve again (a refused correction).
  bool correct(LinearSolver<S>& solver, double lr, const double* delta_norms, S* delta,
               double* norms);

 private:
  double ratio_, step_;
  LinearizationSource<T>& source_;
  NormalEquationsBuilder<T, S>& builder_;
  LinearAlgebra<T>& backend_;
  LinearAlgebra<S>& system_;
  const NormalEquations<S>& ne_;
  DeviceBuffer<T> plus_, minus_;  // r(θ + hv), r(θ − hv); then r_vv in plus_
  DeviceBuffer<T> point_;         // θ ± hv
  DeviceBuffer<S> rhs_, accel_;
};

}  // namespace lmtrain
