#include "lmtrain/solve/lm_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

#include "lmtrain/core/error.h"

namespace lmtrain {

template <typename T, typename S>
LinearAlgebra<S>* LevenbergMarquardtStep<T, S>::own_system(
    LinearizationSource<T>& source, std::unique_ptr<LinearAlgebra<S>>& owned) {
  if constexpr (kMixed) {
    owned = make_sibling_backend<S>(source.model_backend());
    return owned.get();
  } else {
    return &source.model_backend();
  }
}

template <typename T, typename S>
LevenbergMarquardtStep<T, S>::LevenbergMarquardtStep(
    const SolverOptions& options, LinearSolverType solver_type, LinearizationSource<T>& source,
    std::size_t slice_samples, std::size_t max_batch, dist::Communicator* comm)
    : options_(options),
      backend_(source.model_backend()),
      system_(*own_system(source, system_owned_)),
      source_(source),
      solver_type_(solver_type),
      collectives_(system_, comm),
      builder_(source, system_, slice_samples, max_batch,
               solver_type == LinearSolverType::kDual || solver_type == LinearSolverType::kCg),
      distributed_(make_distributed(options, solver_type, system_, source.num_params(), comm)),
      solver_(make_solver(max_batch)),
      damping_(options, system_, source.num_params()),
      backoff_(geodesic_backoff_max(options, std::is_same_v<T, float>)) {
  if (collectives_.ranks() > 1 && solver_type == LinearSolverType::kDual)
    throw InvalidArgument(
        "SolverOptions::linear_solver = dual needs the whole Jacobian on one rank; with several "
        "ranks use cholesky, eigen or cg");
  penalty_ = Penalty<T, S>::create(options, solver_type, source, system_, collectives_);
  // Off as well as on: the backend may be another step's (lmtrain.torch plans again).
  if (!system_.use_tf32(options.tf32) && options.tf32)
    options_ignored_ =
        kMixed || std::is_same_v<S, double> ? "SolverOptions::tf32: ignored, the system is float64"
        : system_.device_kind() == DeviceKind::kCpu
            ? "SolverOptions::tf32: ignored, the CPU has no TF32 arithmetic"
            : "SolverOptions::tf32: ignored, " + system_.name() + " has no TF32 arithmetic";
  if (!system_.set_normal_matrix_method(options.normal_matrix) &&
      options.normal_matrix != NormalMatrixMethod::kAuto)
    options_ignored_ += fmt::format(
        "{}SolverOptions::normal_matrix = \"{}\": ignored, {} has no choice",
        options_ignored_.empty() ? "" : "\n", to_string(options.normal_matrix), system_.name());
  if (options.cuda_graphs && solver_type != LinearSolverType::kCholesky)
    options_ignored_ += fmt::format(
        "{}SolverOptions::cuda_graphs: ignored, only the cholesky solver records its attempts "
        "(linear_solver = {})",
        options_ignored_.empty() ? "" : "\n", to_string(solver_type));
  if (uses_geodesic_acceleration(options, solver_type))
    geodesic_ = std::make_unique<GeodesicAcceleration<T, S>>(
        options, source, builder_, ne_, system_, max_batch * source.residuals_per_sample());
  const std::size_t n = source.num_params();
  model_clock_ = backend_.make_phase_clock();
  if constexpr (kMixed) system_clock_ = system_.make_phase_clock();
  delta_ = system_.allocate(n);
  scalars_ = DeviceBuffer<double>(system_.memory(), kSlots + kBlockSlots);
  // A read of pending scalars spans slots this attempt may not have written (no correction):
  // they hold defined values, never read uninitialized device memory.
  system_.write_scalars(host_scalars_.data(), scalars_.data(), host_scalars_.size());
  trial_ = backend_.allocate(n);
  if constexpr (kMixed) delta_model_ = backend_.allocate(n);
  if (distributed_) {
    ne_.distributed = distributed_.get();
    ne_.a_diagonal = system_.allocate(n);
  } else if (collectives_.active() && solver_type != LinearSolverType::kDual &&
             solver_type != LinearSolverType::kCg) {
    packed_ = system_.allocate(n * (n + 1) / 2);
  }
  if (options.cuda_graphs && solver_type == LinearSolverType::kCholesky) plan_recorded_work();
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::plan_recorded_work() {
  // Where the device cannot record at all the solver's line says so already.
  if (!backend_.why_not_recordable().empty()) return;
  const char* why = collectives_.active()                              ? "with several ranks"
                    : options_.regularization != Regularization::kNone ? "with a penalty"
                                                                       : nullptr;
  if (why != nullptr) {
    graphs_unrecorded_ = fmt::format(
        "SolverOptions::cuda_graphs: the trial and the geodesic correction queued call by call {}",
        why);
    return;
  }
  // The trial is the model queue's work (δ narrowed to T before it, on both queues).
  trial_work_ = std::make_unique<RecordedWork>(backend_, "the trial");
  if (!geodesic_) return;
  if (kMixed)
    graphs_unrecorded_ =
        "SolverOptions::cuda_graphs: the geodesic correction queued call by call in mixed "
        "precision (its Jᵀu and solve are the float64 queue's)";
  else
    geodesic_work_ = std::make_unique<RecordedWork>(backend_, "the geodesic correction");
}

template <typename T, typename S>
std::optional<RecordedWork::Key> LevenbergMarquardtStep<T, S>::attempt_key(const T* params,
                                                                           bool geodesic) {
  if (!(geodesic ? geodesic_work_ : trial_work_)) return std::nullopt;
  std::optional<RecordedWork::Key> key = source_.evaluation_key();
  if (!key) {
    graphs_unrecorded_ =
        "SolverOptions::cuda_graphs: the trial and the geodesic correction queued call by call: "
        "the linearization source's evaluations cannot be recorded";
    return std::nullopt;
  }
  const void* narrowed = nullptr;  // δ in T (mixed precision)
  if constexpr (kMixed) narrowed = delta_model_.data();
  key->insert(key->end(),
              {address_key(params), address_key(trial_.data()), address_key(delta_.data()),
               address_key(narrowed), std::bit_cast<std::uintptr_t>(options_.learning_rate)});
  if (!geodesic) return key;
  const std::optional<RecordedWork::Key> product = builder_.transpose_product_key(ne_);
  if (!product) {
    graphs_unrecorded_ =
        "SolverOptions::cuda_graphs: the geodesic correction queued call by call: its Jᵀu builds "
        "J again";
    return std::nullopt;
  }
  key->insert(key->end(), product->begin(), product->end());
  return key;
}

template <typename T, typename S>
std::unique_ptr<dist::DistributedNormalMatrix<S>> LevenbergMarquardtStep<T, S>::make_distributed(
    const SolverOptions& options, LinearSolverType type, LinearAlgebra<S>& system, std::size_t n,
    dist::Communicator* comm) {
  if (type != LinearSolverType::kDistributedCholesky) return nullptr;
  if (comm == nullptr)
    throw InvalidArgument(
        "SolverOptions::linear_solver = distributed_cholesky needs the ranks' communicator (an MPI "
        "launch: mpirun or srun); with one process use cholesky");
  return dist::make_distributed_normal_matrix<S>(*comm, system, n, options.distributed_block_size);
}

template <typename T, typename S>
std::unique_ptr<LinearSolver<S>> LevenbergMarquardtStep<T, S>::make_solver(std::size_t max_batch) {
  if (distributed_) return std::make_unique<DistributedCholeskySolver<S>>(*distributed_);
  return LinearSolver<S>::create(solver_type_, system_, source_.num_params(),
                                 max_batch * source_.residuals_per_sample(), &collectives_,
                                 options_);
}

StepperState StepperState::initial(const SolverOptions& options) {
  StepperState s;
  s.damping = {options.lambda_initial, 2, 0};
  s.weight_decays.clear();
  return s;
}

void StepperState::validate() const {
  const auto fail = [](std::string_view field, double value, std::string_view expected) {
    throw InvalidArgument(fmt::format("step state {} = {}: expected {}", field, value, expected));
  };
  if (!(std::isfinite(damping.lambda) && damping.lambda > 0))
    fail("lambda", damping.lambda, "a finite λ > 0");
  if (!(damping.nu >= 1)) fail("nu", damping.nu, "ν ≥ 1");
  if (!(damping.floor >= 0 && std::isfinite(damping.floor)))
    fail("floor", damping.floor, "a finite floor ≥ 0");
  if (geodesic.skip < 0) fail("geodesic_skip", geodesic.skip, "a count ≥ 0");
  if (geodesic.backoff < 0) fail("geodesic_backoff", geodesic.backoff, "a count ≥ 0");
  for (const double rho : weight_decays)
    if (!(rho >= 0 && std::isfinite(rho))) fail("weight_decays", rho, "finite values ≥ 0");
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::set_state(const StepperState& state) {
  state.validate();
  if (!state.weight_decays.empty()) penalty_->set_weight_decays(state.weight_decays);
  damping_.set_state(state.damping);
  backoff_.set_state(state.geodesic);
}

template <typename T, typename S>
StepReport LevenbergMarquardtStep<T, S>::step(T* params, const T* x, const T* y, std::size_t batch,
                                              PhaseTimes& times) {
  collectives_.time_into(times);
  const std::uint64_t reads_before = host_reads();
  StepReport report = run(params, x, y, batch, times);
  report.host_reads = static_cast<int>(host_reads() - reads_before);
  // The device phases, read now that the step's scalars have brought the host up to date.
  model_clock_->collect(times);
  if constexpr (kMixed) system_clock_->collect(times);
  return report;
}

template <typename T, typename S>
StepReport LevenbergMarquardtStep<T, S>::run(T* params, const T* x, const T* y, std::size_t batch,
                                             PhaseTimes& times) {
  StepReport report;
  const std::optional<double> local_objective = linearize(params, x, y, batch);
  const std::vector<ResidualBlock> blocks = queue_block_sums();
  // Without a penalty A and g are final here: D and its scale join the linearization's read.
  const bool penalized = options_.regularization != Regularization::kNone;
  const bool scaled = !penalized && prepare_damping();
  const Linearization lin = read_linearization(local_objective, batch, scaled,
                                               blocks.size() <= kBlockSlots ? blocks.size() : 0);
  double f0 = lin.objective;
  report.data_objective_after = f0;
  report.block_losses = block_losses(blocks);
  report.objective_before = report.objective_after = f0;
  report.lambda = damping_.lambda();
  if (non_finite_system(f0, lin.finite, report)) return report;
  // F + ½θᵀRθ, g + Rθ and A + R, the penalty's exact Hessian.
  report.penalty_before = report.penalty_after = penalty_->apply(params, f0, ne_);
  report.weight_decay = penalty_->weight_decay();
  f0 += report.penalty_after;
  report.objective_before = report.objective_after = f0;
  const auto [gradient_max, scale] =
      penalized ? read_penalized() : std::pair{lin.gradient_max, lin.damping_scale};
  report.gradient_max_norm = gradient_max;
  if (gradient_tolerance_reached(report)) return report;
  damping_.begin_step(scale, lambda_unit_);

  const bool prepared = prepare_solver();
  while (report.attempts < options_.max_attempts) {
    ++report.attempts;
    report.lambda = damping_.lambda();
    const double lambda = report.lambda * lambda_unit_;  // λ of the system (A + λD)δ = g
    const std::optional<Solved> solved = solve(prepared, lambda, report);
    const Correction correction = solved ? accelerate(params) : Correction::kOff;
    std::optional<Attempt> attempt;
    Trial t;
    if (solved) {
      // One read: the attempt's scalars too when pending, then the correction's when queued.
      const std::size_t first = !solved->read                       ? kDelta
                                : correction == Correction::kQueued ? kCorrection
                                                                    : kTrialObjective;
      t = trial(params, first);
      attempt = solved->read ? solved->read : attempt_of(lambda, solved->status_on_device);
    }
    if (!attempt) {
      ++report.invalid;
      if (lambda_above_max(damping_.invalid(), report)) return report;
      continue;
    }
    record(correction, report);
    if (t.penalty_read) t.penalty = penalty_->value_from(host_scalars_[kPenalty]);
    const double f1 = t.data + t.penalty;
    if (std::isfinite(f1) && f1 < f0) {
      accept(params, f0, t, attempt->predicted, report, times);
      return report;
    }
    ++report.rejected;
    // As in Ceres, the parameter tolerance applies to rejected steps too: at a minimum no trial
    // lowers F, and a step below the tolerance means there is nothing left to gain.
    if (options_.parameter_tolerance > 0) {
      report.step_norm = t.step_norm;
      if (parameter_tolerance_reached(report.step_norm, t.param_norm, report)) return report;
    }
    if (lambda_above_max(damping_.rejected(), report)) return report;
  }
  return report;
}

template <typename T, typename S>
const double* LevenbergMarquardtStep<T, S>::read(std::size_t first, std::size_t last) {
  if constexpr (kMixed) system_.order_after(backend_.native_stream());
  system_.read_scalars(scalars_.data() + first, host_scalars_.data() + first, last - first);
  return host_scalars_.data();
}

template <typename T, typename S>
std::optional<double> LevenbergMarquardtStep<T, S>::linearize(const T* params, const T* x,
                                                              const T* y, std::size_t batch) {
  const std::size_t n = source_.num_params();
  const std::optional<double> f =
      builder_.build(params, x, y, batch, ne_, *model_clock_, system_clock(), slot(kObjective));
  // A's blocks were summed as they were built; its diagonal is gathered on every rank (one rank
  // of an MPI launch too).
  if (distributed_) distributed_->diagonal(ne_.a_diagonal.data());
  if (!collectives_.active()) return f;
  collectives_.sum_device(ne_.g.data(), n);
  if (!distributed_ && !ne_.jacobian_stored) {
    system_.pack_upper(n, ne_.a.data(), packed_.data());
    collectives_.sum_device(packed_.data(), n * (n + 1) / 2);
    system_.unpack_upper(n, packed_.data(), ne_.a.data());
  }
  return f;
}

template <typename T, typename S>
typename LevenbergMarquardtStep<T, S>::Linearization
LevenbergMarquardtStep<T, S>::read_linearization(std::optional<double> local_objective,
                                                 std::size_t batch, bool damping_scaled,
                                                 std::size_t block_sums) {
  const std::size_t n = source_.num_params();
  system_.vector_norms(n, ne_.g.data(), 1, slot(kGradient));
  // A finite loss can still have an overflowing Jacobian (huge inputs through linear layers):
  // A's diagonal Σ J_rj² overflows first (|A_ij| ≤ √(A_ii A_jj)), and it is all of A this reads.
  // With a stored J there is none to check (n = 0 leaves zeros).
  if (distributed_)
    system_.vector_norms(n, ne_.a_diagonal.data(), 1, slot(kDiagonal));
  else
    system_.vector_norms(ne_.jacobian_stored ? 0 : n, ne_.a.data(), n + 1, slot(kDiagonal));
  const std::size_t last = block_sums > 0   ? kSlots + block_sums
                           : damping_scaled ? kDelta
                                            : kDamping;
  const double* s = read(local_objective ? kGradient : kObjective, last);
  // SolverOptions::damping_per_sample: λ multiplies the step's samples over all ranks, summed
  // with F in the same all-reduce.
  double totals[2] = {local_objective.value_or(s[kObjective]), static_cast<double>(batch)};
  collectives_.sum_host(totals, options_.damping_per_sample ? 2 : 1);
  lambda_unit_ = options_.damping_per_sample ? std::max(totals[1], 1.0) : 1.0;
  ne_.objective = totals[0];
  Linearization lin;
  lin.objective = totals[0];
  lin.finite = s[kGradient] == 0 && s[kDiagonal] == 0;
  lin.gradient_max = s[kGradient + 1];
  lin.damping_scale = damping_scaled ? s[kDamping + 1] : 1.0;
  return lin;
}

template <typename T, typename S>
std::pair<double, double> LevenbergMarquardtStep<T, S>::read_penalized() {
  const bool scaled = prepare_damping();
  system_.vector_norms(source_.num_params(), ne_.g.data(), 1, slot(kGradient));
  const double* s = read(kGradient, scaled ? kDelta : kDiagonal);
  return {s[kGradient + 1], scaled ? s[kDamping + 1] : 1.0};
}

template <typename T, typename S>
std::vector<ResidualBlock> LevenbergMarquardtStep<T, S>::queue_block_sums() {
  std::vector<ResidualBlock> blocks = source_.residual_blocks();
  const std::size_t m = source_.batch() * source_.residuals_per_sample();
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    const ResidualBlock& b = blocks[k];
    if (b.first_row > m || b.rows > m - b.first_row)
      throw InvalidArgument(fmt::format(
          "the linearization source declares residual block \"{}\" as rows [{}, {}) but its "
          "batch has {} residual rows; a block must lie inside the batch's residual vector",
          b.name, b.first_row, b.first_row + b.rows, m));
    // Σ r² on the device where r lives: only the block's sum comes back to the host.
    const T* r = source_.residuals() + b.first_row;
    if (blocks.size() <= kBlockSlots && b.rows > 0)
      backend_.dot_into(b.rows, r, r, slot(kSlots + k));
  }
  return blocks;
}

template <typename T, typename S>
std::vector<BlockLoss> LevenbergMarquardtStep<T, S>::block_losses(
    const std::vector<ResidualBlock>& blocks) {
  if (blocks.empty()) return {};
  std::vector<double> sums(blocks.size(), 0.0);
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    const ResidualBlock& b = blocks[k];
    if (b.rows == 0) continue;
    if (blocks.size() <= kBlockSlots) {
      sums[k] = host_scalars_[kSlots + k];  // read with the linearization's scalars
    } else {
      const T* r = source_.residuals() + b.first_row;
      sums[k] = backend_.dot(b.rows, r, r);
    }
  }
  collectives_.sum_host(sums.data(), sums.size());
  std::vector<BlockLoss> out;
  out.reserve(blocks.size());
  for (std::size_t k = 0; k < blocks.size(); ++k)
    out.push_back({blocks[k].name, blocks[k].scale * sums[k]});
  return out;
}

template <typename T, typename S>
bool LevenbergMarquardtStep<T, S>::prepare_damping() {
  ScopedDevicePhase phase(system_clock(), Phase::kFactorization);
  return damping_.prepare(ne_, collectives_, slot(kDamping));
}

template <typename T, typename S>
bool LevenbergMarquardtStep<T, S>::prepare_solver() {
  ScopedDevicePhase phase(system_clock(), Phase::kFactorization);
  // Dense solvers run on rank 0 only (the others receive δ); CG is collective.
  return solves_here() ? solver_->prepare(ne_, damping_.matrix()) : true;
}

template <typename T, typename S>
std::optional<typename LevenbergMarquardtStep<T, S>::Solved> LevenbergMarquardtStep<T, S>::solve(
    bool prepared, double lambda, StepReport& report) {
  using Verdict = typename LinearSolver<S>::Verdict;
  std::optional<Solved> solved;
  {
    ScopedDevicePhase phase(system_clock(), Phase::kFactorization);
    if (solves_here() && prepared) {
      const Verdict verdict = solver_->solve_into(lambda, delta_.data(), slot(kStatus));
      report.linear_iterations += solver_->iterations();
      if (verdict != Verdict::kInvalid) {
        solved = Solved{std::nullopt, verdict == Verdict::kOnDevice};
        attempt_norms();
      }
    }
  }
  if (!collectives_.active()) return solved;  // read with the trial's scalars
  // Several ranks decide together, before the trial: the verdict is read now.
  if (solved) {
    read(kDelta, solved->status_on_device ? kStatus + 1 : kStatus);
    solved->read = attempt_of(lambda, solved->status_on_device);
    if (!solved->read) solved.reset();
  }
  if (collective_solver()) return solved;
  // Rank 0's δ and verdict, so that every rank holds the same parameters; the others read what
  // the attempt decides with once δ is theirs.
  if (!collectives_.broadcast_flag(solved.has_value())) return std::nullopt;
  collectives_.broadcast_device(delta_.data(), source_.num_params());
  if (collectives_.is_root()) return solved;
  attempt_norms();
  read(kDelta, kStatus);
  const std::optional<Attempt> attempt = attempt_of(lambda, false);
  if (!attempt) return std::nullopt;
  return Solved{attempt, false};
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::attempt_norms() {
  const std::size_t n = source_.num_params();
  system_.vector_norms(n, delta_.data(), 1, slot(kDelta));
  system_.dot_into(n, ne_.g.data(), delta_.data(), slot(kGradientDelta));
  damping_.weighted_norm2(delta_.data(), slot(kDeltaDamped));
}

template <typename T, typename S>
std::optional<typename LevenbergMarquardtStep<T, S>::Attempt>
LevenbergMarquardtStep<T, S>::attempt_of(double lambda, bool status_on_device) const {
  const double* s = host_scalars_.data();
  if ((status_on_device && s[kStatus] != 0) || s[kDelta] != 0) return std::nullopt;
  // For the velocity δ, before any geodesic correction ((A + λD)δ = g describes only it).
  const double lr = options_.learning_rate;
  const double g_delta = s[kGradientDelta];
  return Attempt{lr * g_delta - 0.5 * lr * lr * (g_delta - lambda * s[kDeltaDamped])};
}

template <typename T, typename S>
const T* LevenbergMarquardtStep<T, S>::model_delta() {
  if constexpr (kMixed) {
    backend_.order_after(system_.native_stream());  // δ was written on the system's queue
    backend_.convert(source_.num_params(), delta_.data(), delta_model_.data());
    // The next solve rewrites δ on the system's queue: after this narrowing has read it.
    system_.order_after(backend_.native_stream());
    return delta_model_.data();
  } else {
    return delta_.data();
  }
}

template <typename T, typename S>
typename LevenbergMarquardtStep<T, S>::Correction LevenbergMarquardtStep<T, S>::accelerate(
    const T* params) {
  if (!geodesic_) return Correction::kOff;
  // The backoff counts valid attempts only: record() takes the skip once δ is known valid.
  if (!backoff_.due_now()) return Correction::kSkipped;
  const std::size_t n = source_.num_params();
  const double lr = options_.learning_rate;
  if (const std::optional<RecordedWork::Key> key = attempt_key(params, true)) {
    // One queue, one rank (plan_recorded_work): both halves on the one clock, nothing to sum.
    ScopedDevicePhase phase(*model_clock_, Phase::kGeodesic);
    geodesic_work_->run(*key, [&] {
      geodesic_->second_derivative(params, lr, model_delta());
      correction_queued_ =
          geodesic_->correct(*solver_, lr, slot(kDelta), delta_.data(), slot(kCorrection));
    });
    return correction_queued_ ? Correction::kQueued : Correction::kRefused;
  }
  {
    ScopedDevicePhase phase(*model_clock_, Phase::kGeodesic);
    geodesic_->second_derivative(params, lr, model_delta());
  }
  collectives_.sum_device(geodesic_->rhs(), n);
  bool queued = false;
  {
    ScopedDevicePhase phase(system_clock(), Phase::kGeodesic);
    if (solves_here())
      queued = geodesic_->correct(*solver_, lr, slot(kDelta), delta_.data(), slot(kCorrection));
  }
  if (!collectives_.active()) return queued ? Correction::kQueued : Correction::kRefused;
  // Several ranks: the outcome now, identical on every rank (rank 0's when it alone solves).
  bool applied = false;
  if (solves_here() && queued)
    applied = read(kCorrection + 3, kCorrection + 4)[kCorrection + 3] != 0;
  if (collective_solver()) return applied ? Correction::kApplied : Correction::kRefused;
  applied = collectives_.broadcast_flag(applied);
  if (applied) collectives_.broadcast_device(delta_.data(), n);
  return applied ? Correction::kApplied : Correction::kRefused;
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::record(Correction correction, StepReport& report) {
  if (correction == Correction::kOff) return;
  if (!backoff_.due()) {
    ++report.geodesic_skipped;
    return;
  }
  const bool applied = correction == Correction::kApplied ||
                       (correction == Correction::kQueued && host_scalars_[kCorrection + 3] != 0);
  backoff_.record(applied);
  ++(applied ? report.geodesic_applied : report.geodesic_refused);
}

template <typename T, typename S>
typename LevenbergMarquardtStep<T, S>::Trial LevenbergMarquardtStep<T, S>::trial(
    const T* params, std::size_t first) {
  const std::size_t n = source_.num_params();
  const bool tolerance = options_.parameter_tolerance > 0;
  std::optional<double> f1 = 0.0;  // an empty shard adds nothing
  {
    ScopedDevicePhase phase(*model_clock_, Phase::kTrialEvaluation);
    // θ stays in T: the trial is θ − lr·δ with δ rounded to T once (mixed precision), queued
    // before what a recording holds: the narrowing waits on the other queue.
    const T* delta = model_delta();
    const auto work = [&] {
      backend_.add_scaled(n, params, static_cast<T>(-options_.learning_rate), delta, trial_.data());
      if (source_.batch() > 0) f1 = source_.objective_into(trial_.data(), slot(kTrialObjective));
    };
    const std::optional<RecordedWork::Key> key = attempt_key(params, false);
    // A replay leaves F on the device: a source with a key does (evaluation_key()).
    if (!key)
      work();
    else if (!trial_work_->run(*key, work) && source_.batch() > 0)
      f1 = std::nullopt;
  }
  system_.vector_norms(n, delta_.data(), 1, slot(kStep));
  if (tolerance) backend_.dot_into(n, params, params, slot(kParamNorm));
  const std::optional<double> penalty = penalty_->value_into(trial_.data(), slot(kPenalty));
  if (first == kTrialObjective && f1) first = kStep;
  const double* s = read(first, tolerance ? kSlots : penalty ? kPenalty : kParamNorm);
  Trial t;
  t.penalty = penalty.value_or(0.0);
  t.penalty_read = !penalty;
  t.data = collectives_.sum(f1.value_or(s[kTrialObjective]));
  t.step_norm = options_.learning_rate * std::sqrt(s[kStep + 2]);
  t.param_norm = tolerance ? std::sqrt(s[kParamNorm]) : 0.0;
  return t;
}

template <typename T, typename S>
void LevenbergMarquardtStep<T, S>::accept(T* params, double f0, const Trial& trial,
                                          double predicted, StepReport& report, PhaseTimes& times) {
  const std::size_t n = source_.num_params();
  const double f1 = trial.data + trial.penalty;
  report.gain_ratio = predicted > 0 ? (f0 - f1) / predicted : 0.0;
  report.accepted = true;
  report.objective_after = f1;
  report.data_objective_after = trial.data;
  report.penalty_after = trial.penalty;
  report.step_norm = trial.step_norm;
  damping_.accepted(report.gain_ratio);
  backend_.copy(trial_.data(), params, n);
  report.effective_parameters = penalty_->update(params, trial.data, ne_, times);
  if (!function_tolerance_reached(f0, f1, report))
    parameter_tolerance_reached(report.step_norm, trial.param_norm, report);
}

template <typename T, typename S>
bool LevenbergMarquardtStep<T, S>::non_finite_system(double f0, bool system_finite,
                                                     StepReport& report) const {
  // No λ makes a non-finite system solvable: it ends training like a non-finite loss.
  if (std::isfinite(f0) && system_finite) return false;
  report.termination = TerminationReason::kNonFiniteObjective;
  report.message =
      "the loss or the Jacobian of the batch is not finite; parameters are the last finite ones. "
      "Check the data for extreme values (standardize the inputs), or lower "
      "SolverOptions::learning_rate";
  return true;
}

template <typename T, typename S>
bool LevenbergMarquardtStep<T, S>::gradient_tolerance_reached(StepReport& report) const {
  if (!(options_.gradient_tolerance > 0 && report.gradient_max_norm <= options_.gradient_tolerance))
    return false;
  report.termination = TerminationReason::kGradientTolerance;
  report.message = fmt::format("‖Jᵀr‖∞ = {:.3e} ≤ SolverOptions::gradient_tolerance = {:.3e}",
                               report.gradient_max_norm, options_.gradient_tolerance);
  return true;
}

template <typename T, typename S>
bool LevenbergMarquardtStep<T, S>::function_tolerance_reached(double f0, double f1,
                                                              StepReport& report) const {
  if (!(options_.function_tolerance > 0 && f0 - f1 <= options_.function_tolerance * f0))
    return false;
  report.termination = TerminationReason::kFunctionTolerance;
  report.message =
      fmt::format("relative decrease {:.3e} ≤ SolverOptions::function_tolerance = {:.3e}",
                  (f0 - f1) / f0, options_.function_tolerance);
  return true;
}

template <typename T, typename S>
bool LevenbergMarquardtStep<T, S>::parameter_tolerance_reached(double step_norm, double param_norm,
                                                               StepReport& report) const {
  const double tol = options_.parameter_tolerance;
  if (!(tol > 0 && step_norm <= tol * (param_norm + tol))) return false;
  report.termination = TerminationReason::kParameterTolerance;
  report.message =
      fmt::format("step norm {:.3e} ≤ SolverOptions::parameter_tolerance·(‖θ‖ + tol) = {:.3e}",
                  step_norm, tol * (param_norm + tol));
  return true;
}

template <typename T, typename S>
bool LevenbergMarquardtStep<T, S>::lambda_above_max(bool can_grow, StepReport& report) const {
  if (can_grow) return false;
  report.termination = TerminationReason::kLambdaAboveMax;
  // Often the end of a converged run (MATLAB trainlm's "maximum mu reached"): the gradient says
  // how close to a minimum the parameters are, and which tolerance would have said so.
  report.message = fmt::format(
      "no trial step lowered the loss with λ at SolverOptions::lambda_max = {:.3e} "
      "(‖Jᵀr‖∞ = {:.3e}: near zero, the parameters are at a minimum to rounding; "
      "SolverOptions::gradient_tolerance or function_tolerance end such a run as converged)",
      options_.lambda_max, report.gradient_max_norm);
  return true;
}

template <typename T>
std::unique_ptr<LmStepper<T>> make_lm_step(const SolverOptions& options,
                                           LinearSolverType solver_type,
                                           LinearizationSource<T>& source,
                                           std::size_t slice_samples, std::size_t max_batch,
                                           dist::Communicator* comm) {
  if constexpr (std::is_same_v<T, float>) {
    if (resolve_system_precision(options, true) == SystemPrecision::kFloat64)
      return std::make_unique<LevenbergMarquardtStep<float, double>>(
          options, solver_type, source, slice_samples, max_batch, comm);
  }
  return std::make_unique<LevenbergMarquardtStep<T>>(options, solver_type, source, slice_samples,
                                                     max_batch, comm);
}

template std::unique_ptr<LmStepper<float>> make_lm_step<float>(const SolverOptions&,
                                                               LinearSolverType,
                                                               LinearizationSource<float>&,
                                                               std::size_t, std::size_t,
                                                               dist::Communicator*);
template std::unique_ptr<LmStepper<double>> make_lm_step<double>(const SolverOptions&,
                                                                 LinearSolverType,
                                                                 LinearizationSource<double>&,
                                                                 std::size_t, std::size_t,
                                                                 dist::Communicator*);

template class LevenbergMarquardtStep<float, float>;
template class LevenbergMarquardtStep<double, double>;
template class LevenbergMarquardtStep<float, double>;

}  // namespace lmtrain
