#include "lmtrain/solve/penalty.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "lmtrain/core/error.h"

namespace lmtrain {
namespace {

// Cap of an ard group's ρ: reached when the evidence drives the group's weights to zero (an input
// the data do not support); large enough to pin them there, small enough to keep A + R finite.
constexpr double kMaxGroupWeightDecay = 1e10;

// An accepted step whose reduction of F + ½θᵀRθ matches the full Gauss–Newton step's predicted
// ½gᵀ(A + R)⁻¹g to this fraction was taken where the model is linear at the step's scale: a
// linear least-squares problem (1 − O(λ/A) on its first step; 1 − 1e-5 in the sparse linear
// test) or a network that has converged.  Networks still learning stay far from it (the largest
// of the first 100 steps on pumadyn-32fm, bank32nh, kin32fm and Friedman #1, 19 runs: within 1 %
// only after step 27, Friedman #1 seed 5 at step 12 within 0.8 %).  ard then lifts every group's
// own estimate to the common level: nothing is left that the delay protects, and without this a
// linear model would converge under the common level and stop (λ at λ_max) before any own
// estimate had climbed there.
constexpr double kLinearStepTolerance = 1e-3;

// bayesian's first ρ, and ard's first common level, when asked to start from 0
// (SolverOptions::weight_decay): with ρ = 0, γ would be rank(A) — N itself when there are fewer
// residuals than parameters — and no update could leave 0, so the evidence estimate with half
// the well-determined parameters, γ = min(n, N)/2, at the first linearization point.  0 if θ = 0.
double evidence_start(std::size_t n, double residuals, double data_objective, double theta_norm2) {
  const double gamma = 0.5 * std::min(static_cast<double>(n), residuals);
  return theta_norm2 > 0 ? gamma * 2.0 * data_objective / ((residuals - gamma) * theta_norm2) : 0.0;
}

// The start of each ard group's own estimate (SolverOptions::weight_decay = 0):
// ard_initial_scale × the mean of A's diagonal at the first linearization point.  Far below the
// common level, so that no group is penalized above it before its own estimate, moving at most
// ard_max_factor per update, has climbed there (solver_options.h).  Rank 0 decides, as for every
// update.
template <typename S>
double initial_group_weight_decay(const SolverOptions& options, LinearAlgebra<S>& system,
                                  Collectives<S>& collectives, std::size_t n, const S* a, S* work) {
  double rho = 0;
  if (collectives.is_root()) {
    system.clamped_diagonal(n, a, S(0), std::numeric_limits<S>::max(), work);
    std::vector<S> diagonal(n);
    system.copy_to_host(work, diagonal.data(), n);
    double sum = 0;
    for (const S v : diagonal) sum += static_cast<double>(v);
    rho = options.ard_initial_scale * sum / static_cast<double>(n);
  }
  collectives.broadcast_host(&rho, 1);
  return rho;
}

template <typename T, typename S>
class NoPenalty final : public Penalty<T, S> {
 public:
  NoPenalty() : Penalty<T, S>(Regularization::kNone) {}
};

// ½ρ‖θ‖² with one ρ: fixed (l2) or re-estimated after every accepted step (bayesian).
template <typename T, typename S>
class UniformPenalty final : public Penalty<T, S> {
 public:
  UniformPenalty(const SolverOptions& options, LinearizationSource<T>& source,
                 LinearAlgebra<S>& system, Collectives<S>& collectives)
      : Penalty<T, S>(options.regularization),
        source_(source),
        model_(source.model_backend()),
        system_(system),
        collectives_(collectives),
        theta_(system.allocate(source.num_params())) {
    this->rho_.assign(1, options.weight_decay);
    if (options.regularization == Regularization::kBayesian) {
      work_ = system.allocate(source.num_params() * source.num_params());
      eigenvalues_ = system.allocate(source.num_params());
    }
  }

  double weight_decay() const override { return this->rho_[0]; }

  double apply(const T* theta, double data_objective, NormalEquations<S>& ne) override {
    const std::size_t n = source_.num_params();
    if (this->kind_ == Regularization::kBayesian && this->rho_[0] == 0 && data_objective > 0)
      this->rho_[0] = evidence_start(n, collectives_.sum(static_cast<double>(ne.m)), data_objective,
                                     model_.dot(n, theta, theta));
    const double rho = this->rho_[0];
    if (rho <= 0) return 0.0;
    // θ was last written on the model's queue (an empty shard's build does not wait for it).
    if constexpr (!std::is_same_v<T, S>) system_.order_after(model_.native_stream());
    system_.convert(n, theta, theta_.data());
    system_.axpy(n, static_cast<S>(rho), theta_.data(), ne.g.data());
    if (ne.jacobian_stored || ne.distributed != nullptr)
      ne.shift = rho;  // JᵀJ + ρI (+ λD) as CG's operator, or added as the ranks factor A
    else
      system_.add_diagonal(n, ne.a.data(), static_cast<S>(rho), nullptr);
    return value(theta);
  }

  double value(const T* theta) override {
    return this->rho_[0] > 0 ? value_from(model_.dot(source_.num_params(), theta, theta)) : 0.0;
  }
  std::optional<double> value_into(const T* theta, double* result) override {
    if (!(this->rho_[0] > 0)) return 0.0;
    model_.dot_into(source_.num_params(), theta, theta, result);
    return std::nullopt;
  }
  double value_from(double read) const override { return 0.5 * this->rho_[0] * read; }

  // γ = Σ aᵢ/(aᵢ + ρ) from the eigenvalues eᵢ = aᵢ + ρ of the A + ρI just solved, then
  // ρ = γ·2F/((N − γ)·‖θ‖²): ‖r‖² = 2F for the ½‖r‖² objectives (for the others 2F is the
  // deviance playing its role).
  double update(const T* theta, double data_objective, const NormalEquations<S>& ne,
                PhaseTimes& times) override {
    if (this->kind_ != Regularization::kBayesian) return 0.0;
    const std::size_t n = source_.num_params();
    const double rho = this->rho_[0];
    const double residuals = collectives_.sum(static_cast<double>(ne.m));
    const double theta_norm2 = model_.dot(n, theta, theta);
    double next[2] = {rho, this->gamma_.empty() ? 0.0 : this->gamma_[0]};  // ρ, γ
    if (collectives_.is_root()) {
      ScopedPhase timer(times, Phase::kFactorization);
      system_.copy(ne.a.data(), work_.data(), n * n);
      if (system_.eigenvalues(n, work_.data(), eigenvalues_.data()) == 0) {
        host_.resize(n);
        system_.copy_to_host(eigenvalues_.data(), host_.data(), n);
        double gamma = 0;
        for (const S e : host_) {
          const double a = std::max(0.0, static_cast<double>(e) - rho);
          if (a + rho > 0) gamma += a / (a + rho);
        }
        next[1] = gamma;
        if (residuals > gamma && theta_norm2 > 0 && data_objective > 0)
          next[0] = gamma * 2.0 * data_objective / ((residuals - gamma) * theta_norm2);
      }
    }
    collectives_.broadcast_host(next, 2);
    this->rho_[0] = next[0];
    this->gamma_.assign(1, next[1]);
    return next[1];
  }

 private:
  LinearizationSource<T>& source_;
  LinearAlgebra<T>& model_;
  LinearAlgebra<S>& system_;
  Collectives<S>& collectives_;
  DeviceBuffer<S> theta_;               // θ in S
  DeviceBuffer<S> work_, eigenvalues_;  // bayesian: A's eigenvalues
  std::vector<S> host_;
};

// ½Σ_g ρ_g‖θ_g‖² over the source's relevance_groups(): R = diag(ρ_g(i)) held on the device.
// Each group's ρ_g = max(ρ̄, ρ'_g): ρ̄ the common level, bayesian's single-ρ evidence estimate for
// the whole network, and ρ'_g the group's own (MacKay's) estimate, damped (solver_options.h).
// rho_ holds the G effective ρ_g (what R, reports and Summary read), then ρ̄, then the G ρ'_g: the
// state a checkpoint carries.
template <typename T, typename S>
class GroupPenalty final : public Penalty<T, S> {
 public:
  GroupPenalty(const SolverOptions& options, LinearizationSource<T>& source,
               LinearAlgebra<S>& system, Collectives<S>& collectives)
      : Penalty<T, S>(Regularization::kArd),
        options_(options),
        source_(source),
        model_(source.model_backend()),
        system_(system),
        collectives_(collectives) {
    const std::size_t n = source.num_params();
    ParameterGroups groups = source.relevance_groups();
    group_of_ = std::move(groups.group_of);
    group_sizes_ = std::move(groups.sizes);
    this->rho_.assign(2 * group_sizes_.size() + 1, options.weight_decay);
    for (auto* b : {&r_, &theta_, &r_theta_, &diagonal_, &solution_}) *b = system.allocate(n);
    work_ = system.allocate(n * n);
    weight_decays_changed();
  }

  double apply(const T* theta, double data_objective, NormalEquations<S>& ne) override {
    const std::size_t n = source_.num_params();
    const bool unset =
        std::all_of(this->rho_.begin(), this->rho_.end(), [](double r) { return r == 0; });
    if (unset && data_objective > 0) start(theta, data_objective, ne);
    const double penalty = value(theta);  // theta_ = θ, r_theta_ = Rθ
    system_.axpy(n, S(1), r_theta_.data(), ne.g.data());
    system_.add_diagonal(n, ne.a.data(), S(1), r_.data());
    penalty_at_linearization_ = penalty;
    return penalty;
  }

  double value(const T* theta) override {
    weigh(theta);
    return value_from(system_.dot(source_.num_params(), theta_.data(), r_theta_.data()));
  }
  std::optional<double> value_into(const T* theta, double* result) override {
    weigh(theta);
    system_.dot_into(source_.num_params(), theta_.data(), r_theta_.data(), result);
    return std::nullopt;
  }
  double value_from(double read) const override { return 0.5 * read; }

  // With H = A + R the matrix the step solved with (before λ), F the data objective at θ:
  //   γ_g = n_g − ρ_g·Σ_{i∈g} [H⁻¹]_ii  (0 ≤ γ_g ≤ n_g, as H⁻¹ ≤ R⁻¹ on the diagonal),
  //   γ = Σ_g γ_g,  σ² = 2F/(N − γ),  ρ̄ = γσ²/‖θ‖²,  ρ'_g ← γ_gσ²/‖θ_g‖² (damped),
  // all kept as they are if H cannot be inverted.
  double update(const T* theta, double data_objective, const NormalEquations<S>& ne,
                PhaseTimes& times) override {
    const std::size_t n = source_.num_params();
    const std::size_t state = this->rho_.size(), groups = group_sizes_.size();
    const double residuals = collectives_.sum(static_cast<double>(ne.m));
    std::vector<double>& next = next_;  // the state (as rho_), then γ_g
    next.assign(state + groups, 0.0);
    std::copy(this->rho_.begin(), this->rho_.end(), next.begin());
    if (this->gamma_.size() == groups)
      std::copy(this->gamma_.begin(), this->gamma_.end(),
                next.begin() + static_cast<std::ptrdiff_t>(state));
    // The step's reduction of F + ½θᵀRθ (R as it solved with).
    const double reduction =
        ne.objective + penalty_at_linearization_ - data_objective - value(theta);
    if (collectives_.is_root()) {
      ScopedPhase timer(times, Phase::kFactorization);
      double predicted = 0;  // ½gᵀ(A + R)⁻¹g: the full Gauss–Newton step's
      if (inverse_diagonal(ne, n, predicted)) {
        theta_host_.resize(n);
        model_.copy_to_host(theta, theta_host_.data(), n);
        const bool linear = std::abs(reduction - predicted) <= kLinearStepTolerance * predicted;
        estimate(data_objective, residuals, linear, next);
      }
    }
    collectives_.broadcast_host(next.data(), next.size());
    std::copy(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(state), this->rho_.begin());
    this->gamma_.assign(next.begin() + static_cast<std::ptrdiff_t>(state), next.end());
    weight_decays_changed();
    double gamma = 0;
    for (const double g : this->gamma_) gamma += g;
    return gamma;
  }

  // The whole state (2G + 1 values), or — from a checkpoint written before the common level
  // existed — the G effective ρ_g, read as own estimates over a common level at their minimum.
  void set_weight_decays(const std::vector<double>& rho) override {
    const std::size_t groups = group_sizes_.size();
    if (rho.size() == 2 * groups + 1) return Penalty<T, S>::set_weight_decays(rho);
    if (rho.size() != groups)
      throw InvalidArgument(fmt::format(
          "weight decays: {} values given, but regularization = ard on this model keeps {}: the "
          "ρ of its {} penalty groups, their common level and each group's own estimate (or the "
          "{} ρ of a checkpoint written before the common level)",
          rho.size(), 2 * groups + 1, groups, groups));
    std::vector<double> state(2 * groups + 1);
    std::copy(rho.begin(), rho.end(), state.begin());
    state[groups] = *std::min_element(rho.begin(), rho.end());
    std::copy(rho.begin(), rho.end(), state.begin() + static_cast<std::ptrdiff_t>(groups + 1));
    Penalty<T, S>::set_weight_decays(state);
  }

 private:
  // theta_ = θ in S, r_theta_ = Rθ.
  void weigh(const T* theta) {
    const std::size_t n = source_.num_params();
    // θ was last written on the model's queue (an empty shard's build does not wait for it).
    if constexpr (!std::is_same_v<T, S>) system_.order_after(model_.native_stream());
    system_.convert(n, theta, theta_.data());
    system_.scale_elementwise(n, theta_.data(), r_.data(), false, r_theta_.data());
  }
  // ρ̄ from bayesian's start, every ρ'_g from ard_initial_scale × mean diag(A).
  void start(const T* theta, double data_objective, const NormalEquations<S>& ne) {
    const std::size_t n = source_.num_params(), groups = group_sizes_.size();
    const double own = initial_group_weight_decay(options_, system_, collectives_, n, ne.a.data(),
                                                  diagonal_.data());
    const double common = evidence_start(n, collectives_.sum(static_cast<double>(ne.m)),
                                         data_objective, model_.dot(n, theta, theta));
    std::fill(this->rho_.begin(), this->rho_.end(), own);
    std::fill_n(this->rho_.begin(), groups + 1, std::max(common, own));
    this->rho_[groups] = common;
    weight_decays_changed();
  }

  // diagonal_host_ ← diag((A + R)⁻¹) through Cholesky (potrf, potri), and `predicted` ←
  // ½gᵀ(A + R)⁻¹g with the factor (potrs); false if the factorization fails.
  bool inverse_diagonal(const NormalEquations<S>& ne, std::size_t n, double& predicted) {
    system_.copy(ne.a.data(), work_.data(), n * n);
    int info = system_.potrf(n, work_.data());
    if (info != 0) return false;
    system_.copy(ne.g.data(), solution_.data(), n);
    system_.potrs(n, work_.data(), solution_.data());
    predicted = 0.5 * system_.dot(n, ne.g.data(), solution_.data());
    info = system_.potri(n, work_.data());
    if (info != 0) return false;
    system_.clamped_diagonal(n, work_.data(), -std::numeric_limits<S>::infinity(),
                             std::numeric_limits<S>::infinity(), diagonal_.data());
    diagonal_host_.resize(n);
    system_.copy_to_host(diagonal_.data(), diagonal_host_.data(), n);
    return true;
  }

  // next = (the state, γ_g) from diagonal_host_ and theta_host_; `linear`: the step was taken
  // where the model is linear (kLinearStepTolerance).
  void estimate(double data_objective, double residuals, bool linear,
                std::vector<double>& next) const {
    const std::size_t groups = group_sizes_.size(), n = group_of_.size();
    std::vector<double> trace(groups, 0.0), norm2(groups, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      trace[group_of_[i]] += static_cast<double>(diagonal_host_[i]);
      const auto theta = static_cast<double>(theta_host_[i]);
      norm2[group_of_[i]] += theta * theta;
    }
    double* gammas = next.data() + 2 * groups + 1;
    double gamma = 0, theta_norm2 = 0;
    for (std::size_t g = 0; g < groups; ++g) {
      const auto size = static_cast<double>(group_sizes_[g]);
      gammas[g] = std::clamp(size - this->rho_[g] * trace[g], 0.0, size);
      gamma += gammas[g];
      theta_norm2 += norm2[g];
    }
    if (!(residuals > gamma && data_objective > 0)) return;
    const double noise = 2.0 * data_objective / (residuals - gamma);  // σ²
    if (theta_norm2 > 0) next[groups] = std::min(gamma * noise / theta_norm2, kMaxGroupWeightDecay);
    for (std::size_t g = 0; g < groups; ++g) {
      double& own = next[groups + 1 + g];
      own = own_estimate(own, gammas[g], norm2[g], noise);
      if (linear) own = std::max(own, next[groups]);
      next[g] = std::min(std::max(next[groups], own), kMaxGroupWeightDecay);
    }
  }

  // MacKay's re-estimate γ_g·σ²/‖θ_g‖², a damped step of log ρ'_g from `own` (ard_max_factor): the
  // early re-estimates come from a network still learning, and a group pushed to the cap would not
  // come back.  A group the data no longer determine at all (γ_g = 0 in H's rounding, or θ_g = 0)
  // heads for the cap, the limit of γ_g/‖θ_g‖² as ρ_g grows (θ_g ∝ 1/ρ_g, γ_g ∝ 1/ρ_g), instead
  // of 0/0 reading as "no penalty".
  double own_estimate(double own, double gamma_g, double norm2, double noise) const {
    const double rho = gamma_g > 0 && norm2 > 0 ? gamma_g * noise / norm2 : kMaxGroupWeightDecay;
    const double step = options_.ard_max_factor;
    return std::min(std::clamp(rho, own / step, own * step), kMaxGroupWeightDecay);
  }

  // r_ ← ρ_g(i) per parameter.
  void weight_decays_changed() override {
    r_host_.resize(group_of_.size());
    for (std::size_t i = 0; i < r_host_.size(); ++i)
      r_host_[i] = static_cast<S>(this->rho_[group_of_[i]]);
    system_.copy_from_host(r_host_.data(), r_.data(), r_host_.size());
  }

  const SolverOptions options_;  // ard_initial_scale, ard_max_factor
  LinearizationSource<T>& source_;
  LinearAlgebra<T>& model_;
  LinearAlgebra<S>& system_;
  Collectives<S>& collectives_;
  std::vector<std::uint32_t> group_of_;
  std::vector<std::size_t> group_sizes_;
  DeviceBuffer<S> r_, theta_, r_theta_, diagonal_, solution_, work_;
  std::vector<S> r_host_, diagonal_host_;  // host staging, kept across steps
  std::vector<T> theta_host_;
  std::vector<double> next_;
  double penalty_at_linearization_ = 0;  // ½θᵀRθ of the step under way, from apply
};

}  // namespace

template <typename T, typename S>
std::unique_ptr<Penalty<T, S>> Penalty<T, S>::create(const SolverOptions& options,
                                                     LinearSolverType solver,
                                                     LinearizationSource<T>& source,
                                                     LinearAlgebra<S>& system,
                                                     Collectives<S>& collectives) {
  if (const auto conflict = regularization_conflict(options.regularization, solver))
    throw InvalidArgument(*conflict);
  switch (options.regularization) {
    case Regularization::kNone:
      return std::make_unique<NoPenalty<T, S>>();
    case Regularization::kL2:
    case Regularization::kBayesian:
      return std::make_unique<UniformPenalty<T, S>>(options, source, system, collectives);
    case Regularization::kArd:
      return std::make_unique<GroupPenalty<T, S>>(options, source, system, collectives);
  }
  return std::make_unique<NoPenalty<T, S>>();
}

template <typename T, typename S>
std::size_t Penalty<T, S>::system_elements(const SolverOptions& options, std::size_t n) {
  switch (options.regularization) {
    case Regularization::kNone:
      return 0;
    case Regularization::kL2:
      return n;  // θ in S
    case Regularization::kBayesian:
      return n * n + 2 * n;  // eigenvalue work, eigenvalues, θ
    case Regularization::kArd:
      return n * n + 5 * n;  // inverse, R, θ, Rθ, its diagonal, (A + R)⁻¹g
  }
  return 0;
}

template <typename T, typename S>
void Penalty<T, S>::set_weight_decays(const std::vector<double>& rho) {
  if (rho.size() != rho_.size())
    throw InvalidArgument(fmt::format(
        "weight decays: {} values given, but regularization = {} on this model has {} penalty "
        "group{}",
        rho.size(), to_string(kind_), rho_.size(), rho_.size() == 1 ? "" : "s"));
  for (std::size_t g = 0; g < rho.size(); ++g)
    if (!(rho[g] >= 0) || !std::isfinite(rho[g]))
      throw InvalidArgument(
          fmt::format("weight decay of group {} is {}; expected a finite value ≥ 0", g, rho[g]));
  rho_ = rho;
  weight_decays_changed();
}

template class Penalty<float, float>;
template class Penalty<double, double>;
template class Penalty<float, double>;

}  // namespace lmtrain
