#include "lmtrain/solve/lm_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "lmtrain/core/error.h"

namespace lmtrain {

namespace {
// Cap of an ard group's ρ: reached when the evidence drives the group's weights to zero (an input
// the data do not support); large enough to pin them there, small enough to keep A + R finite.
constexpr double kMaxGroupWeightDecay = 1e10;
}  // namespace

template <typename T, typename S>
Backend<S>* LevenbergMarquardtStep<T, S>::own_system(JacobianEngine<T>& engine,
                                                     std::unique_ptr<Backend<S>>& owned) {
  if constexpr (kMixed) {
    owned = make_sibling_backend<S>(engine.model_backend());
    return owned.get();
  } else {
    return &engine.model_backend();
  }
}

template <typename T, typename S>
LevenbergMarquardtStep<T, S>::LevenbergMarquardtStep(const SolverOptions& options,
                                                     LinearSolverType solver_type,
                                                     JacobianEngine<T>& engine,
                                                     std::size_t slice_samples,
                                                     std::size_t max_batch,
                                                     dist::Communicator* comm)
    : options_(options),
      backend_(engine.model_backend()),
      system_(*own_system(engine, system_owned_)),
      engine_(engine),
      builder_(engine, system_, slice_samples, max_batch,
               solver_type == LinearSolverType::kDual || solver_type == LinearSolverType::kCg),
      solver_(LinearSolver<S>::create(solver_type, system_, engine.num_params(),
                                      max_batch * engine.residuals_per_sample(), comm, options)),
      damping_(DampingStrategy::create(options)),
      comm_(comm),
      solver_type_(solver_type) {
  if (comm != nullptr && comm->size() > 1 && solver_type == LinearSolverType::kDual)
    throw InvalidArgument(
        "linear_solver = dual needs the whole Jacobian on one rank; with several ranks use "
        "cholesky, eigen or cg");
  const std::size_t n = engine.num_params();
  delta_ = system_.allocate(n);
  d_ = system_.allocate(n);
  tmp_ = system_.allocate(n);
  trial_ = backend_.allocate(n);
  if constexpr (kMixed) delta_model_ = backend_.allocate(n);
  if (distributed() && solver_type != LinearSolverType::kCg && solver_type != LinearSolverType::kDual)
    packed_ = system_.allocate(n * (n + 1) / 2);
  if (options.regularization != Regularization::kNone) {
    // The dual form's right-hand side must lie in J's row space, which g + ρθ does not; Bayesian
    // regularization needs A's eigenvalues, which matrix-free CG never forms.
    if (solver_type == LinearSolverType::kDual ||
        (solver_type == LinearSolverType::kCg && is_evidence_based(options.regularization)))
      throw InvalidArgument(fmt::format(
          "regularization = {} cannot use linear_solver = {}; use cholesky or eigen{}",
          to_string(options.regularization), to_string(solver_type),
          options.regularization == Regularization::kL2 ? " (or cg)" : ""));
    rho_.assign(1, options.weight_decay);
  }
  if (uses_geodesic_acceleration(options, solver_type))
    geodesic_ = std::make_unique<GeodesicAcceleration<T, S>>(
        options, engine, builder_, ne_, system_, max_batch * engine.residuals_per_sample());
  if (options.regularization == Regularization::kArd) {
    ParameterGroups groups = engine.model().spec().relevance_groups();
    group_of_ = std::move(groups.group_of);
    group_sizes_ = std::move(groups.sizes);
    rho_.assign(group_sizes_.size(), options.weight_decay);
    penalty_ = system_.allocate(n);
    rho_theta_ = system_.allocate(n);
    upload_group_penalty();
  }
  if (is_evidence_based(options.regularization)) {
    eigen_work_ = system_.allocate(n * n);
    eigenvalues_ = system_.allocate(n);
  }
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::set_weight_decays(const std::vector<double>& rho) {
  if (rho.size() != rho_.size())
    throw InvalidArgument(fmt::format(
        "weight decays: {} values given, but regularization = {} on this model has {} penalty "
        "group{}",
        rho.size(), to_string(options_.regularization), rho_.size(), rho_.size() == 1 ? "" : "s"));
  for (std::size_t g = 0; g < rho.size(); ++g)
    if (!(rho[g] >= 0) || !std::isfinite(rho[g]))
      throw InvalidArgument(
          fmt::format("weight decay of group {} is {}; expected a finite value ≥ 0", g, rho[g]));
  rho_ = rho;
  if (grouped()) upload_group_penalty();
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::upload_group_penalty() {
  penalty_host_.resize(group_of_.size());
  for (std::size_t i = 0; i < penalty_host_.size(); ++i)
    penalty_host_[i] = static_cast<S>(rho_[group_of_[i]]);
  system_.copy_from_host(penalty_host_.data(), penalty_.data(), penalty_host_.size());
}

template <typename T, typename S>
double LevenbergMarquardtStep<T, S>::penalty(const T* theta) {
  const std::size_t n = engine_.num_params();
  if (!grouped()) return rho_[0] > 0 ? 0.5 * rho_[0] * backend_.dot(n, theta, theta) : 0.0;
  // θ was last written on the model's queue (an empty shard's build does not wait for it).
  if constexpr (kMixed) backend_.synchronize();
  system_.convert(n, theta, tmp_.data());
  system_.scale_elementwise(n, tmp_.data(), penalty_.data(), false, rho_theta_.data());
  return 0.5 * system_.dot(n, tmp_.data(), rho_theta_.data());
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::update_weight_decay(const T* params, double data_objective,
                                                       StepReport& report, PhaseTimes& times) {
  // γ from the eigenvalues eᵢ = aᵢ + ρ of the A + ρI this step solved with; ‖r‖² = 2F for the
  // ½‖r‖² objectives (for the others 2F is the deviance playing its role).  Rank 0 decides and
  // broadcasts, so that every rank keeps the same ρ even if their LAPACKs round differently.
  const std::size_t n = engine_.num_params();
  const double rho = rho_[0];
  const double residuals = sum(static_cast<double>(ne_.m), times);
  const double theta_norm2 = backend_.dot(n, params, params);
  double next[2] = {rho, 0.0};  // ρ, γ
  if (!distributed() || comm_->is_root()) {
    ScopedPhase timer(times, Phase::kFactorization);
    system_.copy(ne_.a.data(), eigen_work_.data(), n * n);
    if (system_.eigenvalues(n, eigen_work_.data(), eigenvalues_.data()) == 0) {
      eigenvalues_host_.resize(n);
      system_.copy_to_host(eigenvalues_.data(), eigenvalues_host_.data(), n);
      double gamma = 0;
      for (const S e : eigenvalues_host_) {
        const double a = std::max(0.0, static_cast<double>(e) - rho);
        if (a + rho > 0) gamma += a / (a + rho);
      }
      next[1] = gamma;
      if (residuals > gamma && theta_norm2 > 0 && data_objective > 0)
        next[0] = gamma * 2.0 * data_objective / ((residuals - gamma) * theta_norm2);
    }
  }
  if (distributed()) {
    ScopedPhase timer(times, Phase::kCommunication);
    comm_->broadcast(next, sizeof next, 0);
  }
  rho_[0] = next[0];
  gamma_.assign(1, next[1]);
  report.effective_parameters = next[1];
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::update_group_weight_decays(const T* params,
                                                              double data_objective,
                                                              StepReport& report,
                                                              PhaseTimes& times) {
  // With R = diag(ρ_g(i)) and H = A + R the matrix this step solved with (before λ):
  //   γ_g = n_g − ρ_g·Σ_{i∈g} [H⁻¹]_ii  (0 ≤ γ_g ≤ n_g, as H⁻¹ ≤ R⁻¹ on the diagonal),
  //   ρ_g = γ_g·2F / ((N − γ)·‖θ_g‖²),  γ = Σ_g γ_g,
  // MacKay's re-estimate per group.  Rank 0 decides and broadcasts, as for bayesian.
  const std::size_t n = engine_.num_params();
  const std::size_t groups = rho_.size();
  const double residuals = sum(static_cast<double>(ne_.m), times);
  // ρ_g, then γ_g; both kept as they are if H cannot be inverted.
  std::vector<double> next(2 * groups, 0.0);
  std::copy(rho_.begin(), rho_.end(), next.begin());
  if (gamma_.size() == groups) std::copy(gamma_.begin(), gamma_.end(), next.begin() + static_cast<std::ptrdiff_t>(groups));
  if (!distributed() || comm_->is_root()) {
    ScopedPhase timer(times, Phase::kFactorization);
    system_.copy(ne_.a.data(), eigen_work_.data(), n * n);
    int info = system_.potrf(n, eigen_work_.data());
    if (info == 0) info = system_.potri(n, eigen_work_.data());
    if (info == 0) {
      system_.clamped_diagonal(n, eigen_work_.data(), -std::numeric_limits<S>::infinity(),
                               std::numeric_limits<S>::infinity(), eigenvalues_.data());
      eigenvalues_host_.resize(n);
      system_.copy_to_host(eigenvalues_.data(), eigenvalues_host_.data(), n);
      theta_host_.resize(n);
      backend_.copy_to_host(params, theta_host_.data(), n);
      std::vector<double> trace(groups, 0.0), norm2(groups, 0.0);
      for (std::size_t i = 0; i < n; ++i) {
        trace[group_of_[i]] += static_cast<double>(eigenvalues_host_[i]);
        const auto theta = static_cast<double>(theta_host_[i]);
        norm2[group_of_[i]] += theta * theta;
      }
      double gamma = 0;
      for (std::size_t g = 0; g < groups; ++g) {
        const auto size = static_cast<double>(group_sizes_[g]);
        next[groups + g] = std::clamp(size - rho_[g] * trace[g], 0.0, size);
        gamma += next[groups + g];
      }
      // A group the data no longer determine at all (γ_g = 0 in H's rounding, or θ_g = 0) is
      // switched off: its ρ_g goes to the cap, the limit of γ_g/‖θ_g‖² as ρ_g grows (θ_g ∝ 1/ρ_g,
      // γ_g ∝ 1/ρ_g), instead of 0/0 reading as "no penalty".
      if (residuals > gamma && data_objective > 0)
        for (std::size_t g = 0; g < groups; ++g) {
          const double gamma_g = next[groups + g];
          const double rho = gamma_g > 0 && norm2[g] > 0
                                 ? gamma_g * 2.0 * data_objective / ((residuals - gamma) * norm2[g])
                                 : kMaxGroupWeightDecay;
          next[g] = std::min(rho, kMaxGroupWeightDecay);
        }
    }
  }
  if (distributed()) {
    ScopedPhase timer(times, Phase::kCommunication);
    comm_->broadcast(next.data(), next.size() * sizeof(double), 0);
  }
  std::copy(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(groups), rho_.begin());
  gamma_.assign(next.begin() + static_cast<std::ptrdiff_t>(groups), next.end());
  upload_group_penalty();
  double gamma = 0;
  for (const double g : gamma_) gamma += g;
  report.effective_parameters = gamma;
}

template <typename T, typename S>
double LevenbergMarquardtStep<T, S>::sum(double local, PhaseTimes& times) {
  if (!distributed()) return local;
  ScopedPhase timer(times, Phase::kCommunication);
  return comm_->sum(local);
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::sum_device(S* data, std::size_t n, PhaseTimes& times) {
  if (!distributed()) return;
  ScopedPhase timer(times, Phase::kCommunication);
  if (system_.device_kind() != DeviceKind::kCpu && comm_->supports_device_buffers()) {
    // NCCL: summed in place on the device, ordered after the work queued on the stream.
    comm_->allreduce_sum_device(data, n, system_.native_stream());
    system_.synchronize();
    return;
  }
  system_.synchronize();
  if (system_.device_kind() == DeviceKind::kCpu) {
    comm_->allreduce_sum(data, n);
    return;
  }
  staging_.resize(n);
  system_.copy_to_host(data, staging_.data(), n);
  comm_->allreduce_sum(staging_.data(), n);
  system_.copy_from_host(staging_.data(), data, n);
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::broadcast_device(S* data, std::size_t n, PhaseTimes& times) {
  ScopedPhase timer(times, Phase::kCommunication);
  if (system_.device_kind() != DeviceKind::kCpu && comm_->supports_device_buffers()) {
    comm_->broadcast_device(data, n * sizeof(S), 0, system_.native_stream());
    system_.synchronize();
    return;
  }
  system_.synchronize();
  if (system_.device_kind() == DeviceKind::kCpu) {
    comm_->broadcast(data, n * sizeof(S), 0);
    return;
  }
  staging_.resize(n);
  system_.copy_to_host(data, staging_.data(), n);
  comm_->broadcast(staging_.data(), n * sizeof(S), 0);
  system_.copy_from_host(staging_.data(), data, n);
}

template <typename T, typename S>
const T* LevenbergMarquardtStep<T, S>::model_delta() {
  if constexpr (kMixed) {
    system_.synchronize();
    backend_.convert(engine_.num_params(), delta_.data(), delta_model_.data());
    return delta_model_.data();
  } else {
    return delta_.data();
  }
}

template <typename T, typename S>
bool LevenbergMarquardtStep<T, S>::accelerate(const T* params, double lr, PhaseTimes& times) {
  const std::size_t n = engine_.num_params();
  const bool collective = solver_type_ == LinearSolverType::kCg;
  {
    ScopedPhase timer(times, Phase::kGeodesic);
    geodesic_->second_derivative(params, lr, model_delta());
    // The next δ is written on the system's queue after the FD points read it (mixed).
    if constexpr (kMixed) backend_.synchronize();
  }
  sum_device(geodesic_->rhs(), n, times);
  bool applied = false;
  {
    ScopedPhase timer(times, Phase::kGeodesic);
    if (!distributed() || comm_->is_root() || collective)
      applied = geodesic_->correct(*solver_, lr, delta_.data());
  }
  if (distributed() && !collective) {
    {
      ScopedPhase timer(times, Phase::kCommunication);
      int flag = applied ? 1 : 0;
      comm_->broadcast(&flag, sizeof flag, 0);
      applied = flag != 0;
    }
    if (applied) broadcast_device(delta_.data(), n, times);
  }
  return applied;
}

template <typename T, typename S>
StepReport LevenbergMarquardtStep<T, S>::step(T* params, const T* x, const T* y, std::size_t batch,
                                           PhaseTimes& times) {
  const std::size_t n = engine_.num_params();
  StepReport report;
  double f0 = builder_.build(params, x, y, batch, ne_, times);
  if (distributed()) {
    f0 = sum(f0, times);
    ne_.objective = f0;
    sum_device(ne_.g.data(), n, times);
    if (!ne_.jacobian_stored) {
      system_.pack_upper(n, ne_.a.data(), packed_.data());
      sum_device(packed_.data(), n * (n + 1) / 2, times);
      system_.unpack_upper(n, packed_.data(), ne_.a.data());
    }
  }
  report.objective_before = report.objective_after = f0;
  report.lambda = damping_->lambda();
  // A finite loss can still have an overflowing Jacobian (huge inputs through linear layers):
  // no λ makes that system solvable, so it ends training like a non-finite loss.  A's diagonal
  // Σ J_rj² overflows first (|A_ij| ≤ √(A_ii A_jj)); only the upper triangle of A is ever
  // written, so the check must not read the rest.
  bool finite = std::isfinite(f0) && system_.all_finite(n, ne_.g.data());
  double scale = 1;  // max A_ii: the scale of the damping floor (1 when A is not formed)
  if (finite && !ne_.jacobian_stored) {
    system_.clamped_diagonal(n, ne_.a.data(), -std::numeric_limits<S>::infinity(),
                             std::numeric_limits<S>::infinity(), tmp_.data());
    scale = system_.max_abs(n, tmp_.data());
    finite = std::isfinite(scale);
  }
  if (!finite) {
    report.termination = TerminationReason::kNonFiniteObjective;
    return report;
  }
  // Bayesian regularization starting from ρ = 0 would give γ = rank(A), which is N itself when
  // there are fewer residuals than parameters, and no update could leave 0.  Start instead from
  // the evidence estimate with half the well-determined parameters, γ = min(n, N)/2, at the
  // first linearization point (ρ is 0 only until then: afterwards 2F > 0 keeps it positive).
  // ard starts every group there too.
  const bool unset = std::all_of(rho_.begin(), rho_.end(), [](double r) { return r == 0; });
  if (is_evidence_based(options_.regularization) && unset && f0 > 0) {
    const double residuals = sum(static_cast<double>(ne_.m), times);
    const double gamma = 0.5 * std::min(static_cast<double>(n), residuals);
    const double theta_norm2 = backend_.dot(n, params, params);
    if (theta_norm2 > 0) {
      std::fill(rho_.begin(), rho_.end(),
                gamma * 2.0 * f0 / ((residuals - gamma) * theta_norm2));
      if (grouped()) upload_group_penalty();
    }
  }
  // Weight decay: F + ½ρ‖θ‖², g + ρθ and A + ρI, the penalty's exact Hessian (ard: ρ_g(i) per
  // parameter, R = diag(ρ_g(i)) in place of ρI).
  const double rho = grouped() ? 0.0 : rho_[0];
  report.weight_decay = rho;
  if (grouped()) {
    report.penalty_after = penalty(params);  // tmp_ = θ, rho_theta_ = R·θ
    system_.axpy(n, S(1), rho_theta_.data(), ne_.g.data());
    system_.add_diagonal(n, ne_.a.data(), S(1), penalty_.data());
    f0 += report.penalty_after;
    report.objective_before = report.objective_after = f0;
  } else if (rho > 0) {
    // θ was last written on the model's queue (an empty shard's build does not wait for it).
    if constexpr (kMixed) backend_.synchronize();
    system_.convert(n, params, tmp_.data());
    system_.axpy(n, static_cast<S>(rho), tmp_.data(), ne_.g.data());
    if (ne_.jacobian_stored) {
      ne_.shift = rho;
    } else {
      system_.add_diagonal(n, ne_.a.data(), static_cast<S>(rho), nullptr);
    }
    report.penalty_after = penalty(params);
    f0 += report.penalty_after;
    report.objective_before = report.objective_after = f0;
  }
  damping_->begin_step(scale + rho);
  report.gradient_max_norm = system_.max_abs(n, ne_.g.data());
  if (options_.gradient_tolerance > 0 && report.gradient_max_norm <= options_.gradient_tolerance) {
    report.termination = TerminationReason::kGradientTolerance;
    return report;
  }

  const S* d = nullptr;
  bool prepared = false;
  {
    ScopedPhase timer(times, Phase::kFactorization);
    if (options_.damping_matrix == DampingMatrix::kMarquardt) {
      if (ne_.jacobian_stored) {
        // No A: its diagonal is the column sums of squares of J (summed over ranks), clamped.
        system_.column_sums_of_squares(ne_.m, n, ne_.j.data(), n, d_.data());
        sum_device(d_.data(), n, times);
        if (ne_.shift > 0) {  // the diagonal of JᵀJ + ρI, as A would have it
          system_.fill(tmp_.data(), n, static_cast<S>(ne_.shift));
          system_.axpy(n, S(1), tmp_.data(), d_.data());
        }
        system_.clamp(n, d_.data(), static_cast<S>(options_.marquardt_min),
                      static_cast<S>(options_.marquardt_max), d_.data());
      } else {
        system_.clamped_diagonal(n, ne_.a.data(), static_cast<S>(options_.marquardt_min),
                                 static_cast<S>(options_.marquardt_max), d_.data());
      }
      d = d_.data();
    }
    // Dense solvers run on rank 0 only (the others receive δ); CG is collective.
    const bool solves_here = !distributed() || comm_->is_root() || solver_type_ == LinearSolverType::kCg;
    prepared = solves_here ? solver_->prepare(ne_, d) : true;
    system_.synchronize();
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
                system_.all_finite(n, delta_.data());
        report.linear_iterations += solver_->iterations();
      }
    }
    if (distributed() && !collective) {
      // Rank 0's δ and verdict, so that every rank holds the same parameters.
      ScopedPhase timer(times, Phase::kCommunication);
      int flag = valid ? 1 : 0;
      comm_->broadcast(&flag, sizeof flag, 0);
      valid = flag != 0;
    }
    if (distributed() && !collective && valid) broadcast_device(delta_.data(), n, times);
    if (!valid) {
      ++report.invalid;
      if (!damping_->invalid()) {
        report.termination = TerminationReason::kLambdaAboveMax;
        return report;
      }
      continue;
    }

    // The Gauss–Newton model's reduction for the velocity δ (before any geodesic correction,
    // which (A + λD)δ = g no longer describes).
    const double g_delta = system_.dot(n, ne_.g.data(), delta_.data());
    double delta_d_delta = 0;
    if (d != nullptr) {
      system_.scale_elementwise(n, delta_.data(), d, false, tmp_.data());
      delta_d_delta = system_.dot(n, delta_.data(), tmp_.data());
    } else {
      delta_d_delta = system_.dot(n, delta_.data(), delta_.data());
    }
    const double predicted = lr * g_delta - 0.5 * lr * lr * (g_delta - lambda * delta_d_delta);
    if (geodesic_) {
      if (accelerate(params, lr, times))
        ++report.geodesic_applied;
      else
        ++report.geodesic_refused;
    }

    double f1 = 0;
    {
      ScopedPhase timer(times, Phase::kTrialEvaluation);
      // θ stays in T: the trial is θ − lr·δ with δ rounded to T once (mixed precision).
      const T* delta = model_delta();
      backend_.add_scaled(n, params, static_cast<T>(-lr), delta, trial_.data());
      f1 = engine_.batch() > 0 ? engine_.objective(trial_.data()) : 0.0;
      // The next attempt rewrites δ on the system's queue: the narrowing must be done reading it.
      if constexpr (kMixed) backend_.synchronize();
    }
    f1 = sum(f1, times);
    const double f1_data = f1;
    const double penalty1 = penalty(trial_.data());
    f1 += penalty1;
    if (std::isfinite(f1) && f1 < f0) {
      report.gain_ratio = predicted > 0 ? (f0 - f1) / predicted : 0.0;
      report.accepted = true;
      report.objective_after = f1;
      report.penalty_after = penalty1;
      report.step_norm = lr * std::sqrt(system_.dot(n, delta_.data(), delta_.data()));
      damping_->accept(report.gain_ratio);
      const double param_norm = std::sqrt(backend_.dot(n, params, params));
      backend_.copy(trial_.data(), params, n);
      if (options_.regularization == Regularization::kBayesian)
        update_weight_decay(params, f1_data, report, times);
      else if (options_.regularization == Regularization::kArd)
        update_group_weight_decays(params, f1_data, report, times);

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
    // As in Ceres, the parameter tolerance applies to rejected steps too: at a minimum no trial
    // lowers F, and a step below the tolerance means there is nothing left to gain.
    if (options_.parameter_tolerance > 0) {
      report.step_norm = lr * std::sqrt(system_.dot(n, delta_.data(), delta_.data()));
      const double param_norm = std::sqrt(backend_.dot(n, params, params));
      if (report.step_norm <=
          options_.parameter_tolerance * (param_norm + options_.parameter_tolerance)) {
        report.termination = TerminationReason::kParameterTolerance;
        return report;
      }
    }
    if (!damping_->reject()) {
      report.termination = TerminationReason::kLambdaAboveMax;
      return report;
    }
  }
  return report;
}

template <typename T>
std::unique_ptr<LmStepper<T>> make_lm_step(const SolverOptions& options,
                                           LinearSolverType solver_type, JacobianEngine<T>& engine,
                                           std::size_t slice_samples, std::size_t max_batch,
                                           dist::Communicator* comm) {
  if constexpr (std::is_same_v<T, float>) {
    if (resolve_system_precision(options, true) == SystemPrecision::kFloat64)
      return std::make_unique<LevenbergMarquardtStep<float, double>>(
          options, solver_type, engine, slice_samples, max_batch, comm);
  }
  return std::make_unique<LevenbergMarquardtStep<T>>(options, solver_type, engine, slice_samples,
                                                     max_batch, comm);
}

template std::unique_ptr<LmStepper<float>> make_lm_step<float>(const SolverOptions&,
                                                              LinearSolverType,
                                                              JacobianEngine<float>&, std::size_t,
                                                              std::size_t, dist::Communicator*);
template std::unique_ptr<LmStepper<double>> make_lm_step<double>(const SolverOptions&,
                                                                LinearSolverType,
                                                                JacobianEngine<double>&,
                                                                std::size_t, std::size_t,
                                                                dist::Communicator*);

template class LevenbergMarquardtStep<float, float>;
template class LevenbergMarquardtStep<double, double>;
template class LevenbergMarquardtStep<float, double>;

}  // namespace lmtrain
