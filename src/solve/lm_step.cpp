#include "lmtrain/solve/lm_step.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lmtrain/core/error.h"

namespace lmtrain {

template <typename T>
LevenbergMarquardtStep<T>::LevenbergMarquardtStep(const SolverOptions& options,
                                                  LinearSolverType solver_type,
                                                  JacobianEngine<T>& engine,
                                                  std::size_t slice_samples, std::size_t max_batch,
                                                  dist::Communicator* comm)
    : options_(options),
      backend_(engine.model_backend()),
      engine_(engine),
      builder_(engine, slice_samples, max_batch,
               solver_type == LinearSolverType::kDual || solver_type == LinearSolverType::kCg),
      solver_(LinearSolver<T>::create(solver_type, backend_, engine.num_params(),
                                      max_batch * engine.residuals_per_sample(), comm, options)),
      damping_(DampingStrategy::create(options)),
      comm_(comm),
      solver_type_(solver_type) {
  if (distributed() && solver_type == LinearSolverType::kDual)
    throw InvalidArgument(
        "linear_solver = dual needs the whole Jacobian on one rank; with several ranks use "
        "cholesky, eigen or cg");
  const std::size_t n = engine.num_params();
  delta_ = backend_.allocate(n);
  trial_ = backend_.allocate(n);
  d_ = backend_.allocate(n);
  tmp_ = backend_.allocate(n);
  if (distributed() && solver_type != LinearSolverType::kCg && solver_type != LinearSolverType::kDual)
    packed_ = backend_.allocate(n * (n + 1) / 2);
}

template <typename T>
double LevenbergMarquardtStep<T>::sum(double local, PhaseTimes& times) {
  if (!distributed()) return local;
  ScopedPhase timer(times, Phase::kCommunication);
  return comm_->sum(local);
}

template <typename T>
void LevenbergMarquardtStep<T>::sum_device(T* data, std::size_t n, PhaseTimes& times) {
  if (!distributed()) return;
  ScopedPhase timer(times, Phase::kCommunication);
  backend_.synchronize();
  if (backend_.device_kind() == DeviceKind::kCpu) {
    comm_->allreduce_sum(data, n);
    return;
  }
  staging_.resize(n);
  backend_.copy_to_host(data, staging_.data(), n);
  comm_->allreduce_sum(staging_.data(), n);
  backend_.copy_from_host(staging_.data(), data, n);
}

template <typename T>
StepReport LevenbergMarquardtStep<T>::step(T* params, const T* x, const T* y, std::size_t batch,
                                           PhaseTimes& times) {
  const std::size_t n = engine_.num_params();
  StepReport report;
  double f0 = builder_.build(params, x, y, batch, ne_, times);
  if (distributed()) {
    f0 = sum(f0, times);
    ne_.objective = f0;
    sum_device(ne_.g.data(), n, times);
    if (!ne_.jacobian_stored) {
      backend_.pack_upper(n, ne_.a.data(), packed_.data());
      sum_device(packed_.data(), n * (n + 1) / 2, times);
      backend_.unpack_upper(n, packed_.data(), ne_.a.data());
    }
  }
  report.objective_before = report.objective_after = f0;
  report.lambda = damping_->lambda();
  // A finite loss can still have an overflowing Jacobian (huge inputs through linear layers):
  // no λ makes that system solvable, so it ends training like a non-finite loss.  A's diagonal
  // Σ J_rj² overflows first (|A_ij| ≤ √(A_ii A_jj)); only the upper triangle of A is ever
  // written, so the check must not read the rest.
  bool finite = std::isfinite(f0) && backend_.all_finite(n, ne_.g.data());
  if (finite && !ne_.jacobian_stored) {
    backend_.clamped_diagonal(n, ne_.a.data(), -std::numeric_limits<T>::infinity(),
                              std::numeric_limits<T>::infinity(), tmp_.data());
    finite = backend_.all_finite(n, tmp_.data());
  }
  if (!finite) {
    report.termination = TerminationReason::kNonFiniteObjective;
    return report;
  }
  report.gradient_max_norm = backend_.max_abs(n, ne_.g.data());
  if (options_.gradient_tolerance > 0 && report.gradient_max_norm <= options_.gradient_tolerance) {
    report.termination = TerminationReason::kGradientTolerance;
    return report;
  }

  const T* d = nullptr;
  bool prepared = false;
  {
    ScopedPhase timer(times, Phase::kFactorization);
    if (options_.damping_matrix == DampingMatrix::kMarquardt) {
      if (ne_.jacobian_stored) {
        // No A: its diagonal is the column sums of squares of J (summed over ranks), clamped.
        // The clamp goes through the host (n values per step; no backend op clamps a vector).
        backend_.column_sums_of_squares(ne_.m, n, ne_.j.data(), n, d_.data());
        sum_device(d_.data(), n, times);
        staging_.resize(n);
        backend_.copy_to_host(d_.data(), staging_.data(), n);
        for (auto& v : staging_)
          v = static_cast<T>(std::clamp(static_cast<double>(v), options_.marquardt_min, options_.marquardt_max));
        backend_.copy_from_host(staging_.data(), d_.data(), n);
      } else {
        backend_.clamped_diagonal(n, ne_.a.data(), static_cast<T>(options_.marquardt_min),
                                  static_cast<T>(options_.marquardt_max), d_.data());
      }
      d = d_.data();
    }
    // Dense solvers run on rank 0 only (the others receive δ); CG is collective.
    const bool solves_here = !distributed() || comm_->is_root() || solver_type_ == LinearSolverType::kCg;
    prepared = solves_here ? solver_->prepare(ne_, d) : true;
    backend_.synchronize();
  }

  const double lr = options_.learning_rate;
  while (report.attempts < options_.max_attempts) {
    ++report.attempts;
    const double lambda = damping_->lambda();
    report.lambda = lambda;
    bool valid = false;
    const bool collective = solver_type_ == LinearSolverType::kCg;
    {
      ScopedPhase timer(times, Phase::kFactorization);
      if (!distributed() || comm_->is_root() || collective) {
        valid = prepared && solver_->solve(lambda, delta_.data()) &&
                backend_.all_finite(n, delta_.data());
        report.linear_iterations += solver_->iterations();
      }
    }
    if (distributed() && !collective) {
      // Rank 0's δ and verdict, so that every rank holds the same parameters.
      ScopedPhase timer(times, Phase::kCommunication);
      int flag = valid ? 1 : 0;
      comm_->broadcast(&flag, sizeof flag, 0);
      valid = flag != 0;
      if (valid) {
        backend_.synchronize();
        if (backend_.device_kind() == DeviceKind::kCpu) {
          comm_->broadcast(delta_.data(), n * sizeof(T), 0);
        } else {
          staging_.resize(n);
          backend_.copy_to_host(delta_.data(), staging_.data(), n);
          comm_->broadcast(staging_.data(), n * sizeof(T), 0);
          backend_.copy_from_host(staging_.data(), delta_.data(), n);
        }
      }
    }
    if (!valid) {
      ++report.invalid;
      if (!damping_->reject()) {
        report.termination = TerminationReason::kLambdaAboveMax;
        return report;
      }
      continue;
    }

    double f1 = 0;
    {
      ScopedPhase timer(times, Phase::kTrialEvaluation);
      backend_.add_scaled(n, params, static_cast<T>(-lr), delta_.data(), trial_.data());
      f1 = engine_.batch() > 0 ? engine_.objective(trial_.data()) : 0.0;
    }
    f1 = sum(f1, times);
    if (std::isfinite(f1) && f1 < f0) {
      const double g_delta = backend_.dot(n, ne_.g.data(), delta_.data());
      double delta_d_delta = 0;
      if (d != nullptr) {
        backend_.scale_elementwise(n, delta_.data(), d, false, tmp_.data());
        delta_d_delta = backend_.dot(n, delta_.data(), tmp_.data());
      } else {
        delta_d_delta = backend_.dot(n, delta_.data(), delta_.data());
      }
      const double predicted = lr * g_delta - 0.5 * lr * lr * (g_delta - lambda * delta_d_delta);
      report.gain_ratio = predicted > 0 ? (f0 - f1) / predicted : 0.0;
      report.accepted = true;
      report.objective_after = f1;
      report.step_norm = lr * std::sqrt(backend_.dot(n, delta_.data(), delta_.data()));
      damping_->accept(report.gain_ratio);
      const double param_norm = std::sqrt(backend_.dot(n, params, params));
      backend_.copy(trial_.data(), params, n);

      if (options_.function_tolerance > 0 && f0 - f1 <= options_.function_tolerance * f0) {
        report.termination = TerminationReason::kFunctionTolerance;
      } else if (options_.parameter_tolerance > 0 &&
                 report.step_norm <= options_.parameter_tolerance *
                                         (param_norm + options_.parameter_tolerance)) {
        report.termination = TerminationReason::kParameterTolerance;
      }
      return report;
    }
    ++report.rejected;
    if (!damping_->reject()) {
      report.termination = TerminationReason::kLambdaAboveMax;
      return report;
    }
  }
  return report;
}

template class LevenbergMarquardtStep<float>;
template class LevenbergMarquardtStep<double>;

}  // namespace lmtrain
