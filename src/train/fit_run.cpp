#include "lmtrain/train/fit_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <type_traits>
#include <utility>

#include "lmtrain/core/error.h"
#include "lmtrain/core/rng.h"
#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/solve/ignored_options.h"
#include "lmtrain/solve/planned_step.h"
#include "lmtrain/train/batch_shares.h"
#include "lmtrain/train/early_stopping.h"
#include "lmtrain/train/stop_consensus.h"

namespace lmtrain {
namespace {

// One run: the planned step, the epochs it runs and what it reports at the end.
template <typename T>
class FitRun {
 public:
  FitRun(const SolverOptions& solver, const TrainerOptions& trainer, LinearizationSource<T>& source,
         TrainingSet<T>& data, LinearAlgebra<T>& device, T* theta,
         const FitDescription& description, const FitHooks<T>& hooks, const CallerBuffers& caller);
  // From `params` (initial losses) or from a checkpoint's state.
  void start(std::vector<T>& params, const TrainingState<T>* resume);
  bool stopped() const { return summary_.termination != TerminationReason::kNone; }
  int first_epoch() const { return first_epoch_; }
  void run_epoch(int epoch);
  Summary finish(std::vector<T>& params);

 private:
  void describe_problem(const FitDescription& d);
  // The step for batches of up to `units` units: planned (again, keeping the schedule, when a
  // batch has more units than the plan).
  void plan_step(std::size_t units);
  // This rank's equal share of `count` samples starting at `first`: a contiguous block (the
  // evaluations; the steps' blocks come from shares_).
  std::pair<std::size_t, std::size_t> shard(std::size_t first, std::size_t count) const;
  // After a step of `samples` on this rank: its forward and Jacobian time since `before`.
  void record_share(const PhaseTimes& before, std::size_t samples);
  // F of a whole data set at θ: each rank evaluates its block of rows, summed.  Timed as `phase`
  // on the device's clock.
  double data_objective(bool validation, Phase phase);
  // Its reported loss.
  double data_loss(bool validation, Phase phase = Phase::kValidation);
  // The reported loss of the training set at θ: from F when a step already computed it there
  // (theta_objective_), else an evaluation.
  double training_loss();
  // One LM step on batch b of the epoch's order; false when training stops.
  bool run_step(int epoch, std::size_t b, EpochRecord& record);
  // The plan (precision, solver, memory, slice and its halvings) into the Summary.
  void describe_plan();
  // The planner's slice and its halvings, into the Summary.
  void record_halvings();
  // The stops decided outside the step, agreed over the ranks; checkpoints an interruption.
  bool outside_stop(const IterationSummary& it, int epoch, std::size_t b,
                    const EpochRecord& record);
  void end_epoch(int epoch, EpochRecord& record);
  TrainingState<T> state(int epochs_done, std::size_t batches_done,
                         const EpochRecord& current) const;
  void report_penalties();

  const TrainerOptions topt_;
  const SolverOptions sopt_;
  LinearizationSource<T>& source_;
  TrainingSet<T>& data_;
  LinearAlgebra<T>& device_;
  T* theta_;
  const FitHooks<T>& hooks_;
  const Clock::time_point start_ = Clock::now();
  std::size_t n_;
  int ranks_, rank_;
  std::size_t samples_, batch_;
  BatchShares shares_;  // each rank's block of a batch (train/batch_shares.h)
  std::size_t local_batch_;
  StepProblem problem_;
  Summary summary_;
  std::size_t bytes_before_ = 0;
  std::size_t planned_units_ = 0;
  std::unique_ptr<PlannedStep<T>> step_;
  std::unique_ptr<EarlyStopping<T>> early_stopping_;
  std::unique_ptr<PhaseClock> eval_clock_;
  // The training set's F at θ while it is known without an evaluation: θ is where it was last
  // evaluated (a step that was not accepted leaves it), or a full-batch step accepted its trial,
  // whose F is the training set's, summed as an evaluation sums it.
  std::optional<double> theta_objective_;
  Rng rng_;
  std::array<std::uint64_t, 4> epoch_rng_{};  // the RNG before the current epoch's shuffle
  std::vector<std::int64_t> order_;
  int first_epoch_ = 1;
  std::size_t first_batch_ = 0;
  EpochRecord partial_;
};

template <typename T>
FitRun<T>::FitRun(const SolverOptions& solver, const TrainerOptions& trainer,
                  LinearizationSource<T>& source, TrainingSet<T>& data, LinearAlgebra<T>& device,
                  T* theta, const FitDescription& description, const FitHooks<T>& hooks,
                  const CallerBuffers& caller)
    : topt_(trainer),
      sopt_(solver),
      source_(source),
      data_(data),
      device_(device),
      theta_(theta),
      hooks_(hooks),
      n_(source.num_params()),
      ranks_(hooks.comm != nullptr ? hooks.comm->size() : 1),
      rank_(hooks.comm != nullptr ? hooks.comm->rank() : 0),
      samples_(data.samples()),
      batch_(topt_.batch_size == 0 ? samples_ : std::min(topt_.batch_size, samples_)),
      shares_(topt_.balance, ranks_, rank_),
      local_batch_(shares_.max_shard(batch_)),
      rng_(topt_.seed) {
  if (samples_ == 0) throw InvalidArgument("fit: the training set has no samples");
  problem_.ranks = ranks_;
  problem_.collectives =
      hooks.comm != nullptr && (ranks_ > 1 || hooks.comm->supports_device_buffers());
  problem_.loss = description.loss_kind;
  problem_.caller = caller;
  problem_.distributed_unavailable =
      dist::distributed_normal_matrix_unavailable(hooks.comm, device_.device_kind());
  describe_problem(description);
  device_.memory().reset_peak();
  bytes_before_ = device_.memory().bytes_in_use();
  plan_step(data_.max_units(local_batch_));
  if (data_.validation_samples() > 0) {
    summary_.validation_samples = data_.validation_samples();
    early_stopping_ =
        std::make_unique<EarlyStopping<T>>(device_, n_, topt_.max_validation_failures);
  }
  eval_clock_ = device_.make_phase_clock();
  order_.resize(samples_);
}

template <typename T>
void FitRun<T>::describe_problem(const FitDescription& d) {
  Summary& s = summary_;
  s.model = d.model;
  s.loss = d.loss;
  s.device = device_.name();
  s.num_params = n_;
  s.training_samples = samples_;
  s.batch_size = batch_;
  s.residuals_per_sample = d.residuals_per_sample;
  s.batches_per_epoch = (samples_ + batch_ - 1) / batch_;
  s.linear_solver_given = sopt_.linear_solver;
  s.damping = sopt_.damping;
  s.damping_matrix = sopt_.damping_matrix;
  s.damping_per_sample = sopt_.damping_per_sample;
  s.memory_budget_given = sopt_.memory_budget_bytes;
  s.max_slice_samples_given = sopt_.max_slice_samples;
  s.regularization = sopt_.regularization;
  s.ranks = ranks_;
  s.communicator = hooks_.comm != nullptr ? hooks_.comm->name() : "local";
  s.balance = topt_.balance;
}

template <typename T>
void FitRun<T>::plan_step(std::size_t units) {
  // The batch over all ranks in units: this rank's share times the ranks, but no more than the
  // whole batch (3 ranks share 16 384 samples as 5 462 each, not 16 386: precision = auto
  // compares the rows with a threshold, and every rank count must see the same).
  const std::size_t whole = data_.max_units(batch_);
  const auto ranks = static_cast<std::size_t>(ranks_);
  auto total = [ranks, whole](std::size_t u) { return std::min(u * ranks, std::max(u, whole)); };
  problem_.local_batch = units;
  problem_.batch = total(units);
  step_ = std::make_unique<PlannedStep<T>>(sopt_, source_, problem_, hooks_.comm, total);
  describe_plan();
}

template <typename T>
void FitRun<T>::describe_plan() {
  const StepPlan& plan = step_->plan();
  // The system's precision as planned (SystemPrecision::kAuto resolved), and why.
  const bool float_model = std::is_same_v<T, float>;
  const bool mixed = float_model && plan.options.system_precision == SystemPrecision::kFloat64;
  summary_.precision = mixed         ? "mixed (float32 model and Jacobian, float64 A, g and solve)"
                       : float_model ? "float32"
                                     : "float64";
  summary_.precision_reason = plan.precision.automatic ? "auto: " + plan.precision.reason : "";
  summary_.float32_system = float_model && !mixed;
  summary_.linear_solver_reason = plan.solver_reason;
  summary_.linear_solver_used = plan.solver();
  summary_.geodesic_acceleration = plan.geodesic();
  summary_.memory_plan = plan.memory.describe();
  summary_.distribution = plan.distribution;
  summary_.options_ignored = ignored_options(sopt_, plan);
  for (std::string& line : ignored_options(topt_, data_.validation_samples() > 0, ranks_))
    summary_.options_ignored.push_back(std::move(line));
  summary_.planned_peak_bytes = plan.memory.peak_bytes;
  data_.set_evaluation_memory(plan.memory.budget_bytes -
                              std::min(plan.memory.budget_bytes, plan.memory.peak_bytes));
  planned_units_ = step_->planned_units();
  record_halvings();
}

template <typename T>
std::pair<std::size_t, std::size_t> FitRun<T>::shard(std::size_t first, std::size_t count) const {
  const auto r = static_cast<std::size_t>(rank_), size = static_cast<std::size_t>(ranks_);
  const std::size_t lo = count * r / size, hi = count * (r + 1) / size;
  return {first + lo, hi - lo};
}

template <typename T>
void FitRun<T>::record_share(const PhaseTimes& before, std::size_t samples) {
  const PhaseTimes& now = summary_.times;
  const double seconds = now[Phase::kForward] - before[Phase::kForward] + now[Phase::kJacobian] -
                         before[Phase::kJacobian];
  shares_.record(seconds, samples, hooks_.comm);
}

template <typename T>
double FitRun<T>::data_objective(bool validation, Phase phase) {
  const std::size_t samples = validation ? data_.validation_samples() : samples_;
  const auto [first, count] = shard(0, samples);
  double f = 0;
  {
    // The device's clock (which also chooses the CPU's threads per phase): the evaluation ends
    // in its one read, so its events are complete and collected at once.
    ScopedDevicePhase timer(*eval_clock_, phase);
    f = data_.objective(theta_, validation, first, count);
  }
  eval_clock_->collect(summary_.times);
  if (ranks_ > 1) {
    ScopedPhase comm_timer(summary_.times, Phase::kCommunication);
    f = hooks_.comm->sum(f);
  }
  return f;
}

template <typename T>
double FitRun<T>::data_loss(bool validation, Phase phase) {
  return data_.reported_set(data_objective(validation, phase), validation);
}

template <typename T>
double FitRun<T>::training_loss() {
  if (!theta_objective_) theta_objective_ = data_objective(false, Phase::kValidation);
  return data_.reported_set(*theta_objective_, false);
}

template <typename T>
void FitRun<T>::start(std::vector<T>& params, const TrainingState<T>* resume) {
  if (resume == nullptr) {
    device_.copy_from_host(params.data(), theta_, n_);
    // The run's first forward passes (on a GPU, with its modules' lazy loading): setup, not an
    // epoch's evaluation.
    theta_objective_ = data_objective(false, Phase::kOther);
    summary_.initial_loss = summary_.final_loss = data_.reported_set(*theta_objective_, false);
    if (early_stopping_) early_stopping_->start(theta_, data_loss(true, Phase::kOther), summary_);
    if (!std::isfinite(summary_.initial_loss)) {
      summary_.termination = TerminationReason::kNonFiniteObjective;
      summary_.message = fmt::format(
          "the initial training loss is not finite ({}); check the data scale and the "
          "initialization",
          summary_.initial_loss);
    }
    return;
  }
  if (resume->params.size() != n_ ||
      (!resume->best_params.empty() && resume->best_params.size() != n_))
    throw InvalidArgument(
        fmt::format("resume: the checkpoint holds {} parameters, the model {} has {}",
                    resume->params.size(), summary_.model, n_));
  params = resume->params;
  static_cast<TrainingProgress&>(summary_) = resume->progress;
  step_->set_state(resume->stepper);
  rng_.set_state(resume->epoch_rng);
  first_epoch_ = resume->epochs_done + 1;
  first_batch_ = resume->batches_done;
  partial_ = resume->partial_epoch;
  device_.copy_from_host(params.data(), theta_, n_);
  if (early_stopping_) {
    early_stopping_->set_failures(resume->validation_failures);
    const std::vector<T>& b = resume->best_params.empty() ? params : resume->best_params;
    device_.copy_from_host(b.data(), early_stopping_->best(), n_);
  }
}

template <typename T>
TrainingState<T> FitRun<T>::state(int epochs_done, std::size_t batches_done,
                                  const EpochRecord& current) const {
  TrainingState<T> s;
  s.epochs_done = epochs_done;
  s.batches_done = batches_done;
  s.epoch_rng = batches_done == 0 ? rng_.state() : epoch_rng_;
  s.stepper = step_->state();
  s.params.resize(n_);
  device_.copy_to_host(theta_, s.params.data(), n_);
  if (early_stopping_) {
    s.best_params.resize(n_);
    device_.copy_to_host(early_stopping_->best(), s.best_params.data(), n_);
    s.validation_failures = early_stopping_->failures();
  }
  s.partial_epoch = current;
  s.progress = summary_;
  return s;
}

template <typename T>
void FitRun<T>::run_epoch(int epoch) {
  // Each epoch's permutation depends only on the RNG state at its start, so a checkpoint needs
  // that state and nothing of the order itself.
  epoch_rng_ = rng_.state();
  std::iota(order_.begin(), order_.end(), 0);
  if (topt_.shuffle && batch_ < samples_) rng_.shuffle(std::span<std::int64_t>(order_));
  EpochRecord record;
  record.epoch = epoch;
  std::size_t b = 0;
  if (epoch == first_epoch_ && first_batch_ > 0) {
    record = partial_;
    b = first_batch_;
  }
  for (; b * batch_ < samples_; ++b) {
    if (!run_step(epoch, b, record)) break;
  }
  // Interrupted inside the epoch: its checkpoint is written; the epoch's bookkeeping is not.
  if (summary_.termination == TerminationReason::kInterrupted && (b + 1) * batch_ < samples_)
    return;
  end_epoch(epoch, record);
}

template <typename T>
void FitRun<T>::record_halvings() {
  summary_.slice_samples = step_->slice_samples();
  summary_.slice_halvings = step_->halvings();
  summary_.slice_halving_cause = step_->halving_cause();
}

template <typename T>
bool FitRun<T>::run_step(int epoch, std::size_t b, EpochRecord& record) {
  const std::size_t first = b * batch_;
  const std::size_t count = std::min(batch_, samples_ - first);
  const auto [local_first, local_count] = shares_.shard(first, count);
  typename TrainingSet<T>::Batch batch;
  {
    ScopedPhase timer(summary_.times, Phase::kOther);
    batch = data_.load(std::span<const std::int64_t>(order_.data() + local_first, local_count));
  }
  const PhaseTimes before = summary_.times;
  const StepReport rep = step_->step(theta_, batch.x, batch.y, batch.units, summary_.times,
                                     (static_cast<std::uint64_t>(rank_) << 40) + summary_.steps);
  // A batch with more units than the plan held was planned for again (and the slice may have
  // been halved after an allocation failed): the Summary says what was used.
  if (step_->planned_units() != planned_units_ || step_->halvings() != summary_.slice_halvings)
    describe_plan();
  record_share(before, local_count);
  // A full batch is the training set in its order (no shuffle), so the accepted trial's F is the
  // epoch's.  For lmtrain's own network it is the forward pass and the sums an evaluation runs,
  // bit for bit (with measured shares the ranks split the set elsewhere: rounding apart).
  if (rep.accepted)
    theta_objective_ =
        batch_ == samples_ ? std::optional<double>(rep.data_objective_after) : std::nullopt;
  summary_.count(rep);
  record.accepted += rep.accepted ? 1 : 0;
  record.rejected += rep.rejected;
  record.invalid += rep.invalid;
  record.gradient_max_norm = rep.gradient_max_norm;
  if (rep.accepted) record.step_norm = rep.step_norm;
  if (!rep.block_losses.empty()) record.block_losses = rep.block_losses;
  if (rep.effective_parameters > 0) summary_.effective_parameters = rep.effective_parameters;
  if (rep.termination != TerminationReason::kNone) {
    summary_.termination = rep.termination;
    summary_.message = fmt::format("epoch {}, batch {}: {}", epoch, b, rep.message);
  }
  IterationSummary it;
  it.epoch = epoch;
  it.batch = b;
  it.step = summary_.steps;
  it.batch_loss = data_.reported_rows(rep.data_objective_after,
                                      std::span<const std::int64_t>(order_.data() + first, count));
  it.lambda = step_->lambda();
  it.elapsed_seconds = seconds_since(start_);
  it.report = rep;
  it.step_times = summary_.times.since(before);
  return !outside_stop(it, epoch, b, record) && !stopped();
}

template <typename T>
bool FitRun<T>::outside_stop(const IterationSummary& it, int epoch, std::size_t b,
                             const EpochRecord& record) {
  StopRequests local;
  for (const auto& cb : hooks_.callbacks)
    if (cb(it) == CallbackResult::kStop) local.callback = true;
  local.time = it.elapsed_seconds >= topt_.max_time_seconds;
  local.interrupt =
      hooks_.stop_flag != nullptr && hooks_.stop_flag->load(std::memory_order_relaxed);
  const StopRequests stops = agree_on_stops(local, hooks_.comm, summary_.times);
  if (stopped()) return false;  // the step's own reason stands
  if (stops.callback) {
    summary_.termination = TerminationReason::kUserCallback;
    summary_.message =
        fmt::format("stopped by the iteration callback after step {}", summary_.steps);
  } else if (stops.time) {
    summary_.termination = TerminationReason::kTimeBudget;
    summary_.message = fmt::format("{:.2f} s elapsed ≥ TrainerOptions::max_time_seconds = {}",
                                   it.elapsed_seconds, topt_.max_time_seconds);
  } else if (stops.interrupt) {
    summary_.termination = TerminationReason::kInterrupted;
    summary_.message = fmt::format("interrupted in epoch {} after batch {}", epoch, b);
    // Inside an epoch the checkpoint is written here; after its last batch, by end_epoch.
    if (hooks_.checkpoint && (b + 1) * batch_ < samples_) {
      ScopedPhase files(summary_.times, Phase::kRecords);
      hooks_.checkpoint(state(epoch - 1, b + 1, record));
    }
  }
  return stopped();
}

template <typename T>
void FitRun<T>::end_epoch(int epoch, EpochRecord& record) {
  summary_.epochs = epoch;
  record.training_loss = summary_.final_loss = training_loss();
  record.lambda = step_->lambda();
  if (early_stopping_) {
    record.validation_loss = data_loss(true);
    if (early_stopping_->update(epoch, record.validation_loss, theta_, summary_) && !stopped()) {
      summary_.termination = TerminationReason::kValidationMaxFail;
      summary_.message = fmt::format(
          "validation loss did not improve on {:.6e} (epoch {}) for {} epochs",
          summary_.best_validation_loss, summary_.best_epoch, early_stopping_->failures());
    }
  }
  record.seconds = seconds_since(start_);
  summary_.history.push_back(record);
  ScopedPhase files(summary_.times, Phase::kRecords);
  if (hooks_.epoch_callback) hooks_.epoch_callback(record);
  if (hooks_.epoch_check && hooks_.epoch_check(record) == CallbackResult::kStop && !stopped()) {
    summary_.termination = TerminationReason::kUserCallback;
    summary_.message = fmt::format("stopped by the epoch callback after epoch {}", epoch);
  }
  if (!stopped() && record.training_loss <= topt_.loss_goal) {
    summary_.termination = TerminationReason::kLossGoal;
    summary_.message = fmt::format("training loss {:.6e} ≤ TrainerOptions::loss_goal = {:.6e}",
                                   record.training_loss, topt_.loss_goal);
  }
  const bool periodic = hooks_.checkpoint_every > 0 && epoch % hooks_.checkpoint_every == 0;
  if (hooks_.checkpoint && (periodic || summary_.termination == TerminationReason::kInterrupted) &&
      summary_.termination != TerminationReason::kNonFiniteObjective)
    hooks_.checkpoint(state(epoch, 0, EpochRecord{}));
}

template <typename T>
void FitRun<T>::report_penalties() {
  const std::vector<double> rho = step_->state().weight_decays;
  if (sopt_.regularization != Regularization::kArd) {
    summary_.final_weight_decay = rho.front();
    return;
  }
  const ParameterGroups groups = source_.relevance_groups();
  const std::vector<double>& gamma = step_->effective_parameters();
  for (std::size_t g = 0; g < groups.count(); ++g)
    summary_.penalty_groups.push_back(
        {groups.names[g], groups.sizes[g], rho[g], g < gamma.size() ? gamma[g] : 0.0});
}

template <typename T>
Summary FitRun<T>::finish(std::vector<T>& params) {
  if (!stopped()) {
    summary_.termination = TerminationReason::kMaxEpochs;
    summary_.message = fmt::format("{} epochs done", summary_.epochs);
  }
  if (early_stopping_ && topt_.restore_best && early_stopping_->restore(theta_, summary_)) {
    summary_.restored_best = true;
    theta_objective_.reset();
    // The final figures are the restored network's: its training loss evaluated again, its
    // validation loss the one measured at its epoch.
    summary_.final_loss = training_loss();
    summary_.final_validation_loss = summary_.best_validation_loss;
  }
  summary_.final_lambda = step_->lambda();
  report_penalties();
  summary_.peak_device_bytes =
      device_.memory().peak_bytes_in_use() - bytes_before_ + step_->system_peak_bytes();
  summary_.batch_shares = shares_.shares();
  if (ranks_ > 1) {  // collective: every rank finishes
    const std::uint64_t mine = summary_.peak_device_bytes;
    std::vector<std::uint64_t> all(static_cast<std::size_t>(ranks_));
    hooks_.comm->allgather(&mine, sizeof mine, all.data());
    summary_.rank_peak_bytes.assign(all.begin(), all.end());
  }
  device_.copy_to_host(theta_, params.data(), n_);
  device_.synchronize();
  summary_.total_seconds = seconds_since(start_);
  summary_.threads = device_.thread_report();
  summary_.normal_matrix = step_->normal_matrix_report();
  return summary_;
}

}  // namespace

template <typename T>
Summary run_fit(const SolverOptions& solver, const TrainerOptions& trainer,
                LinearizationSource<T>& source, TrainingSet<T>& data, LinearAlgebra<T>& device,
                T* theta, std::vector<T>& params, const FitDescription& description,
                const FitHooks<T>& hooks, const CallerBuffers& caller,
                const TrainingState<T>* resume) {
  solver.validate();
  trainer.validate();
  if (params.size() != source.num_params())
    throw InvalidArgument(fmt::format("fit: {} initial parameters given, the model {} has {}",
                                      params.size(), description.model, source.num_params()));
  FitRun<T> run(solver, trainer, source, data, device, theta, description, hooks, caller);
  run.start(params, resume);
  for (int epoch = run.first_epoch(); epoch <= trainer.max_epochs && !run.stopped(); ++epoch)
    run.run_epoch(epoch);
  return run.finish(params);
}

RunFingerprint run_fingerprint(std::string architecture, std::uint64_t seed,
                               const TrainerOptions& trainer, std::size_t samples,
                               Precision precision, std::string loss) {
  const std::size_t batch =
      trainer.batch_size == 0 ? samples : std::min(trainer.batch_size, samples);
  return {std::move(architecture), seed, batch, std::string(to_string(precision)), std::move(loss)};
}

template Summary run_fit<float>(const SolverOptions&, const TrainerOptions&,
                                LinearizationSource<float>&, TrainingSet<float>&,
                                LinearAlgebra<float>&, float*, std::vector<float>&,
                                const FitDescription&, const FitHooks<float>&, const CallerBuffers&,
                                const TrainingState<float>*);
template Summary run_fit<double>(const SolverOptions&, const TrainerOptions&,
                                 LinearizationSource<double>&, TrainingSet<double>&,
                                 LinearAlgebra<double>&, double*, std::vector<double>&,
                                 const FitDescription&, const FitHooks<double>&,
                                 const CallerBuffers&, const TrainingState<double>*);

}  // namespace lmtrain
