#include "lmtrain/solve/lm_step.h"

#include <cmath>

namespace lmtrain {

template <typename T>
LevenbergMarquardtStep<T>::LevenbergMarquardtStep(const SolverOptions& options,
                                                  LinearSolverType solver_type,
                                                  JacobianEngine<T>& engine,
                                                  std::size_t slice_samples, std::size_t max_batch)
    : options_(options),
      backend_(engine.model_backend()),
      engine_(engine),
      builder_(engine, slice_samples, max_batch, solver_type == LinearSolverType::kDual),
      solver_(LinearSolver<T>::create(solver_type, backend_, engine.num_params(),
                                      max_batch * engine.residuals_per_sample())),
      damping_(DampingStrategy::create(options)) {
  const std::size_t n = engine.num_params();
  delta_ = backend_.allocate(n);
  trial_ = backend_.allocate(n);
  d_ = backend_.allocate(n);
  tmp_ = backend_.allocate(n);
}

template <typename T>
StepReport LevenbergMarquardtStep<T>::step(T* params, const T* x, const T* y, std::size_t batch,
                                           PhaseTimes& times) {
  const std::size_t n = engine_.num_params();
  StepReport report;
  const double f0 = builder_.build(params, x, y, batch, ne_, times);
  report.objective_before = report.objective_after = f0;
  report.lambda = damping_->lambda();
  if (!std::isfinite(f0)) {
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
      backend_.clamped_diagonal(n, ne_.a.data(), static_cast<T>(options_.marquardt_min),
                                static_cast<T>(options_.marquardt_max), d_.data());
      d = d_.data();
    }
    prepared = solver_->prepare(ne_, d);
    backend_.synchronize();
  }

  const double lr = options_.learning_rate;
  while (report.attempts < options_.max_attempts) {
    ++report.attempts;
    const double lambda = damping_->lambda();
    report.lambda = lambda;
    bool valid = false;
    {
      ScopedPhase timer(times, Phase::kFactorization);
      valid = prepared && solver_->solve(lambda, delta_.data()) &&
              backend_.all_finite(n, delta_.data());
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
      f1 = engine_.objective(trial_.data());
    }
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
