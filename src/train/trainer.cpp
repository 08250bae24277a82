#include "lmtrain/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"
#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/solve/engine_source.h"
#include "lmtrain/solve/memory_plan.h"
#include "lmtrain/solve/step_planner.h"
#include "lmtrain/train/early_stopping.h"
#include "lmtrain/train/predict.h"
#include "lmtrain/train/stop_consensus.h"

namespace lmtrain {

bool TrainerOptions::is_valid(std::string* error) const {
  auto fail = [error](const std::string& msg) {
    if (error) *error = msg;
    return false;
  };
  if (max_epochs < 1)
    return fail(
        fmt::format("TrainerOptions::max_epochs = {} violates: max_epochs ≥ 1", max_epochs));
  if (!(max_time_seconds > 0))
    return fail(fmt::format("TrainerOptions::max_time_seconds = {} violates: max_time_seconds > 0",
                            max_time_seconds));
  if (max_validation_failures < 1)
    return fail(fmt::format("TrainerOptions::max_validation_failures = {} violates: ≥ 1",
                            max_validation_failures));
  if (!(stop_grace_s >= 0))
    return fail(
        fmt::format("TrainerOptions::stop_grace_s = {} violates: stop_grace_s ≥ 0", stop_grace_s));
  if (!std::isfinite(loss_goal) || loss_goal < 0)
    return fail(
        fmt::format("TrainerOptions::loss_goal = {} violates: 0 ≤ loss_goal < ∞", loss_goal));
  return true;
}

void TrainerOptions::validate() const {
  std::string error;
  if (!is_valid(&error)) throw InvalidArgument(error);
}

namespace {

template <typename T>
struct DeviceData {
  DeviceBuffer<T> x, y;
  std::size_t samples = 0;
  DeviceData(Backend<T>& backend, const Dataset<T>& d) : samples(d.samples) {
    x = backend.allocate(d.x.size());
    y = backend.allocate(d.y.size());
    backend.copy_from_host(d.x.data(), x.data(), d.x.size());
    backend.copy_from_host(d.y.data(), y.data(), d.y.size());
  }
};

const char* precision_name(float*) {
  return "float32";
}
const char* precision_name(double*) {
  return "float64";
}

template <typename T>
void check_data(const Dataset<T>& data, const char* what, const Sequential<T>& model,
                const ModelSpec& spec) {
  data.validate(what);
  if (data.inputs != model.inputs() || data.outputs != model.outputs())
    throw InvalidArgument(fmt::format(
        "{} has {} inputs and {} outputs per sample but the model {} expects {} and {}", what,
        data.inputs, data.outputs, spec.describe(), model.inputs(), model.outputs()));
}

// The step's problem on one rank of `ranks`, as fit() plans it (and Trainer::plan before a run).
template <typename T>
StepProblem step_problem(const Sequential<T>& model, const Loss<T>& loss, std::size_t batch,
                         std::size_t local_batch, int ranks) {
  StepProblem problem;
  problem.batch = batch;
  problem.local_batch = local_batch;
  problem.ranks = ranks;
  problem.loss = loss.kind();
  // θ and the best θ, the batch, and the evaluation's activations.
  problem.caller_bytes =
      (2 * model.num_params() + local_batch * (model.inputs() + model.outputs()) +
       local_batch * model.activation_floats_per_sample()) *
      sizeof(T);
  return problem;
}

}  // namespace

template <typename T>
StepPlan Trainer<T>::plan(std::size_t samples, int ranks) const {
  if (ranks < 1)
    throw InvalidArgument(fmt::format("Trainer::plan: ranks = {}; expected ≥ 1", ranks));
  Sequential<T> model(spec_, backend_);
  Loss<T> loss(loss_options_, model.outputs(), backend_);
  JacobianEngine<T> engine(model, loss);
  EngineSource<T> source(engine);
  const std::size_t batch =
      trainer_options_.batch_size == 0 ? samples : std::min(trainer_options_.batch_size, samples);
  const BatchShares shares(trainer_options_.balance, ranks, 0);
  StepProblem problem = step_problem(model, loss, batch, shares.max_shard(batch), ranks);
  problem.collectives = ranks > 1;
  if (ranks > 1 && !dist::distributed_normal_matrix_built(backend_.device_kind()))
    problem.distributed_unavailable =
        dist::distributed_normal_matrix_unavailable(nullptr, backend_.device_kind());
  else if (ranks > 1)
    problem.distributed_unavailable.reset();  // an MPI (NCCL) launch of this build can
  return plan_step(solver_options_, source, problem);
}

template <typename T>
Trainer<T>::Trainer(ModelSpec model, LossOptions loss, SolverOptions solver, TrainerOptions trainer,
                    Backend<T>& backend)
    : spec_(std::move(model)),
      loss_options_(std::move(loss)),
      solver_options_(solver),
      trainer_options_(trainer),
      backend_(backend) {
  spec_.validate();
  loss_options_.validate(spec_.outputs());
  solver_options_.validate();
  trainer_options_.validate();
  solver_options_.geodesic_acceleration =
      geodesic_acceleration_for(solver_options_, loss_options_.kind);
}

// One fit: the model, the step and the device data it builds (setup), the epochs it runs, and
// what it reports at the end.
template <typename T>
class Trainer<T>::Run {
 public:
  Run(Trainer& trainer, std::size_t params, const Dataset<T>& train, const Dataset<T>* validation);
  // From `params` (initial losses) or from a checkpoint's state.
  void start(std::vector<T>& params, const TrainingState<T>* resume);
  bool stopped() const { return summary_.termination != TerminationReason::kNone; }
  int first_epoch() const { return first_epoch_; }
  void run_epoch(int epoch);
  Summary finish(std::vector<T>& params);

 private:
  void describe_problem();
  // This rank's equal share of `count` samples starting at `first`: a contiguous block (the
  // evaluations; the steps' blocks come from shares_).
  std::pair<std::size_t, std::size_t> shard(std::size_t first, std::size_t count) const;
  // After a step of `samples` on this rank: its forward and Jacobian time since `before`.
  void record_share(const PhaseTimes& before, std::size_t samples);
  // The reported loss on a whole data set: each rank evaluates its block of rows, summed.
  double data_loss(const DeviceData<T>& data);
  // One LM step on batch b of the epoch's order; false when training stops.
  bool run_step(int epoch, std::size_t b, EpochRecord& record);
  StepReport step_with_memory_recovery(const T* x, const T* y, std::size_t count);
  // The planner's slice and its halvings, into the Summary.
  void record_halvings();
  // The stops decided outside the step, agreed over the ranks; checkpoints an interruption.
  bool outside_stop(const IterationSummary& it, int epoch, std::size_t b,
                    const EpochRecord& record);
  void end_epoch(int epoch, EpochRecord& record);
  TrainingState<T> state(int epochs_done, std::size_t batches_done,
                         const EpochRecord& current) const;

  Trainer& t_;
  const TrainerOptions& topt_;
  const SolverOptions& sopt_;
  const Clock::time_point start_ = Clock::now();
  Sequential<T> model_;
  Loss<T> loss_;
  std::size_t n_;
  int ranks_, rank_;
  std::size_t samples_, batch_;
  BatchShares shares_;  // each rank's block of a batch (train/batch_shares.h)
  std::size_t local_batch_;
  Summary summary_;
  std::size_t bytes_before_ = 0;
  JacobianEngine<T> engine_;
  EngineSource<T> source_;
  // Plans the step, builds it and rebuilds it after an out-of-memory error (solve/).
  std::unique_ptr<StepPlanner<T>> planner_;
  std::unique_ptr<LmStepper<T>> lm_;
  std::unique_ptr<DeviceData<T>> train_, validation_;
  DeviceBuffer<T> theta_, xb_, yb_;
  std::unique_ptr<EarlyStopping<T>> early_stopping_;
  ForwardState<T> eval_state_;
  Rng rng_;
  std::array<std::uint64_t, 4> epoch_rng_{};  // the RNG before the current epoch's shuffle
  std::vector<std::int64_t> order_;
  int first_epoch_ = 1;
  std::size_t first_batch_ = 0;
  EpochRecord partial_;
};

template <typename T>
Trainer<T>::Run::Run(Trainer& trainer, std::size_t params, const Dataset<T>& train,
                     const Dataset<T>* validation)
    : t_(trainer),
      topt_(trainer.trainer_options_),
      sopt_(trainer.solver_options_),
      model_(trainer.spec_, trainer.backend_),
      loss_(trainer.loss_options_, model_.outputs(), trainer.backend_),
      n_(model_.num_params()),
      ranks_(trainer.comm_ != nullptr ? trainer.comm_->size() : 1),
      rank_(trainer.comm_ != nullptr ? trainer.comm_->rank() : 0),
      samples_(train.samples),
      batch_(topt_.batch_size == 0 ? train.samples : std::min(topt_.batch_size, train.samples)),
      shares_(topt_.balance, ranks_, rank_),
      local_batch_(shares_.max_shard(batch_)),
      engine_(model_, loss_),
      source_(engine_),
      rng_(topt_.seed) {
  if (params != n_)
    throw InvalidArgument(fmt::format("fit: {} initial parameters given, the model {} has {}",
                                      params, trainer.spec_.describe(), n_));
  check_data(train, "training data", model_, trainer.spec_);
  if (validation != nullptr) check_data(*validation, "validation data", model_, trainer.spec_);
  describe_problem();  // and the step, planned before the data take device memory
  train_ = std::make_unique<DeviceData<T>>(trainer.backend_, train);
  if (validation != nullptr) {
    summary_.validation_samples = validation->samples;
    validation_ = std::make_unique<DeviceData<T>>(trainer.backend_, *validation);
    early_stopping_ =
        std::make_unique<EarlyStopping<T>>(trainer.backend_, n_, topt_.max_validation_failures);
  }
  Backend<T>& backend = trainer.backend_;
  theta_ = backend.allocate(n_);
  xb_ = backend.allocate(local_batch_ * model_.inputs());
  yb_ = backend.allocate(local_batch_ * model_.outputs());
  order_.resize(samples_);
}

template <typename T>
void Trainer<T>::Run::describe_problem() {
  Summary& s = summary_;
  const std::size_t R = loss_.residuals_per_sample();
  s.model = t_.spec_.describe();
  s.loss = std::string(to_string(loss_.kind()));
  const bool mixed = std::is_same_v<T, float> &&
                     resolve_system_precision(sopt_, true) == SystemPrecision::kFloat64;
  s.precision =
      !mixed ? std::string(precision_name(static_cast<T*>(nullptr)))
      : sopt_.system_precision == SystemPrecision::kAuto
          ? fmt::format(
                "mixed (float32 model and Jacobian, float64 A, g and solve: {} "
                "regularization reads A's small eigenvalues, which float32 rounding swamps)",
                to_string(sopt_.regularization))
          : std::string("mixed (float32 model and Jacobian, float64 A, g and solve)");
  s.device = t_.backend_.name();
  s.num_params = n_;
  s.training_samples = samples_;
  s.batch_size = batch_;
  s.residuals_per_sample = R;
  s.batches_per_epoch = (samples_ + batch_ - 1) / batch_;
  s.linear_solver_given = sopt_.linear_solver;
  s.damping = sopt_.damping;
  s.damping_matrix = sopt_.damping_matrix;
  s.memory_budget_given = sopt_.memory_budget_bytes;
  s.max_slice_samples_given = sopt_.max_slice_samples;
  s.regularization = sopt_.regularization;
  s.ranks = ranks_;
  s.communicator = t_.comm_ != nullptr ? t_.comm_->name() : "local";

  // The linear solver and the memory plan; the budget is this rank's device.
  StepProblem problem = step_problem(model_, loss_, batch_, local_batch_, ranks_);
  problem.collectives = t_.comm_ != nullptr && (ranks_ > 1 || t_.comm_->supports_device_buffers());
  problem.distributed_unavailable =
      dist::distributed_normal_matrix_unavailable(t_.comm_, t_.backend_.device_kind());
  planner_ = std::make_unique<StepPlanner<T>>(sopt_, source_, problem, t_.comm_);
  const StepPlan& plan = planner_->plan();
  s.linear_solver_reason = plan.solver_reason;
  s.linear_solver_used = plan.solver();
  s.geodesic_acceleration = plan.geodesic();
  s.memory_plan = plan.memory.describe();
  s.distribution = plan.distribution;
  s.balance = topt_.balance;
  s.planned_peak_bytes = plan.memory.peak_bytes;
  t_.backend_.memory().reset_peak();
  bytes_before_ = t_.backend_.memory().bytes_in_use();
  lm_ = planner_->build();
  record_halvings();
}

template <typename T>
std::pair<std::size_t, std::size_t> Trainer<T>::Run::shard(std::size_t first,
                                                           std::size_t count) const {
  const auto r = static_cast<std::size_t>(rank_), size = static_cast<std::size_t>(ranks_);
  const std::size_t lo = count * r / size, hi = count * (r + 1) / size;
  return {first + lo, hi - lo};
}

template <typename T>
void Trainer<T>::Run::record_share(const PhaseTimes& before, std::size_t samples) {
  const PhaseTimes& now = summary_.times;
  const double seconds = now[Phase::kForward] - before[Phase::kForward] + now[Phase::kJacobian] -
                         before[Phase::kJacobian];
  shares_.record(seconds, samples, t_.comm_);
}

template <typename T>
double Trainer<T>::Run::data_loss(const DeviceData<T>& data) {
  ScopedPhase timer(summary_.times, Phase::kValidation);
  const auto [first, count] = shard(0, data.samples);
  double f = 0;
  {
    // On the device's clock too, which chooses the CPU's threads per phase (the time is the
    // host timer's above).
    const std::unique_ptr<PhaseClock> clock = t_.backend_.make_phase_clock();
    ScopedDevicePhase phase(*clock, Phase::kValidation);
    f = total_objective(model_, loss_, theta_.data(), data.x.data(), data.y.data(), first, count,
                        local_batch_, eval_state_);
  }
  if (ranks_ > 1) {
    ScopedPhase comm_timer(summary_.times, Phase::kCommunication);
    f = t_.comm_->sum(f);
  }
  return loss_.reported(f, data.samples);
}

template <typename T>
void Trainer<T>::Run::start(std::vector<T>& params, const TrainingState<T>* resume) {
  Backend<T>& backend = t_.backend_;
  if (resume == nullptr) {
    backend.copy_from_host(params.data(), theta_.data(), n_);
    summary_.initial_loss = summary_.final_loss = data_loss(*train_);
    if (early_stopping_) early_stopping_->start(theta_.data(), data_loss(*validation_), summary_);
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
                    resume->params.size(), t_.spec_.describe(), n_));
  params = resume->params;
  static_cast<TrainingProgress&>(summary_) = resume->progress;
  lm_->set_state(resume->stepper);
  rng_.set_state(resume->epoch_rng);
  first_epoch_ = resume->epochs_done + 1;
  first_batch_ = resume->batches_done;
  partial_ = resume->partial_epoch;
  backend.copy_from_host(params.data(), theta_.data(), n_);
  if (early_stopping_) {
    early_stopping_->set_failures(resume->validation_failures);
    const std::vector<T>& b = resume->best_params.empty() ? params : resume->best_params;
    backend.copy_from_host(b.data(), early_stopping_->best(), n_);
  }
}

template <typename T>
TrainingState<T> Trainer<T>::Run::state(int epochs_done, std::size_t batches_done,
                                        const EpochRecord& current) const {
  TrainingState<T> s;
  s.epochs_done = epochs_done;
  s.batches_done = batches_done;
  s.epoch_rng = batches_done == 0 ? rng_.state() : epoch_rng_;
  s.stepper = lm_->state();
  s.params.resize(n_);
  t_.backend_.copy_to_host(theta_.data(), s.params.data(), n_);
  if (early_stopping_) {
    s.best_params.resize(n_);
    t_.backend_.copy_to_host(early_stopping_->best(), s.best_params.data(), n_);
    s.validation_failures = early_stopping_->failures();
  }
  s.partial_epoch = current;
  s.progress = summary_;
  return s;
}

template <typename T>
void Trainer<T>::Run::run_epoch(int epoch) {
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
StepReport Trainer<T>::Run::step_with_memory_recovery(const T* x, const T* y, std::size_t count) {
  for (;;) {
    const StepperState before = lm_->state();
    engine_.set_draw_key((static_cast<std::uint64_t>(rank_) << 40) + summary_.steps);
    try {
      return lm_->step(theta_.data(), x, y, count, summary_.times);
    } catch (const OutOfMemory& e) {
      lm_ = planner_->rebuild_after(std::move(lm_), e, before);
      record_halvings();
    }
  }
}

template <typename T>
void Trainer<T>::Run::record_halvings() {
  summary_.slice_samples = planner_->slice_samples();
  summary_.slice_halvings = planner_->halvings();
  summary_.slice_halving_cause = planner_->halving_cause();
}

template <typename T>
bool Trainer<T>::Run::run_step(int epoch, std::size_t b, EpochRecord& record) {
  const std::size_t first = b * batch_;
  const std::size_t count = std::min(batch_, samples_ - first);
  const auto [local_first, local_count] = shares_.shard(first, count);
  const T* x = train_->x.data();
  const T* y = train_->y.data();
  if (batch_ < samples_ || ranks_ > 1) {
    ScopedPhase timer(summary_.times, Phase::kOther);
    const std::span<const std::int64_t> rows(order_.data() + local_first, local_count);
    t_.backend_.gather_rows(train_->x.data(), model_.inputs(), rows, xb_.data());
    t_.backend_.gather_rows(train_->y.data(), model_.outputs(), rows, yb_.data());
    x = xb_.data();
    y = yb_.data();
  }
  const PhaseTimes before = summary_.times;
  const StepReport rep = step_with_memory_recovery(x, y, local_count);
  record_share(before, local_count);
  summary_.count(rep);
  record.accepted += rep.accepted ? 1 : 0;
  record.rejected += rep.rejected;
  record.invalid += rep.invalid;
  record.gradient_max_norm = rep.gradient_max_norm;
  if (rep.accepted) record.step_norm = rep.step_norm;
  if (rep.effective_parameters > 0) summary_.effective_parameters = rep.effective_parameters;
  if (rep.termination != TerminationReason::kNone) {
    summary_.termination = rep.termination;
    summary_.message = fmt::format("epoch {}, batch {}: {}", epoch, b, rep.message);
  }
  IterationSummary it;
  it.epoch = epoch;
  it.batch = b;
  it.step = summary_.steps;
  it.batch_loss = loss_.reported(rep.objective_after - rep.penalty_after, count);  // data only
  it.lambda = lm_->lambda();
  it.elapsed_seconds = seconds_since(start_);
  it.report = rep;
  return !outside_stop(it, epoch, b, record) && !stopped();
}

template <typename T>
bool Trainer<T>::Run::outside_stop(const IterationSummary& it, int epoch, std::size_t b,
                                   const EpochRecord& record) {
  StopRequests local;
  for (const auto& cb : t_.callbacks_)
    if (cb(it) == CallbackResult::kStop) local.callback = true;
  local.time = it.elapsed_seconds >= topt_.max_time_seconds;
  local.interrupt = t_.stop_flag_ != nullptr && t_.stop_flag_->load(std::memory_order_relaxed);
  const StopRequests stops = agree_on_stops(local, t_.comm_, summary_.times);
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
    if (t_.checkpoint_ && (b + 1) * batch_ < samples_)
      t_.checkpoint_(state(epoch - 1, b + 1, record));
  }
  return stopped();
}

template <typename T>
void Trainer<T>::Run::end_epoch(int epoch, EpochRecord& record) {
  summary_.epochs = epoch;
  record.training_loss = summary_.final_loss = data_loss(*train_);
  record.lambda = lm_->lambda();
  if (early_stopping_) {
    record.validation_loss = data_loss(*validation_);
    if (early_stopping_->update(epoch, record.validation_loss, theta_.data(), summary_) &&
        !stopped()) {
      summary_.termination = TerminationReason::kValidationMaxFail;
      summary_.message = fmt::format(
          "validation loss did not improve on {:.6e} (epoch {}) for {} epochs",
          summary_.best_validation_loss, summary_.best_epoch, early_stopping_->failures());
    }
  }
  record.seconds = seconds_since(start_);
  summary_.history.push_back(record);
  if (t_.epoch_callback_) t_.epoch_callback_(record);
  if (!stopped() && record.training_loss <= topt_.loss_goal) {
    summary_.termination = TerminationReason::kLossGoal;
    summary_.message = fmt::format("training loss {:.6e} ≤ TrainerOptions::loss_goal = {:.6e}",
                                   record.training_loss, topt_.loss_goal);
  }
  const bool periodic = t_.checkpoint_every_ > 0 && epoch % t_.checkpoint_every_ == 0;
  if (t_.checkpoint_ && (periodic || summary_.termination == TerminationReason::kInterrupted) &&
      summary_.termination != TerminationReason::kNonFiniteObjective)
    t_.checkpoint_(state(epoch, 0, EpochRecord{}));
}

template <typename T>
Summary Trainer<T>::Run::finish(std::vector<T>& params) {
  if (!stopped()) {
    summary_.termination = TerminationReason::kMaxEpochs;
    summary_.message = fmt::format("{} epochs done", summary_.epochs);
  }
  if (early_stopping_ && topt_.restore_best && early_stopping_->restore(theta_.data(), summary_)) {
    summary_.restored_best = true;
    summary_.final_loss = data_loss(*train_);
  }
  summary_.final_lambda = lm_->lambda();
  const std::vector<double> rho = lm_->state().weight_decays;
  if (sopt_.regularization == Regularization::kArd) {
    const ParameterGroups groups = t_.spec_.relevance_groups();
    const std::vector<double>& gamma = lm_->effective_parameters();
    for (std::size_t g = 0; g < groups.count(); ++g)
      summary_.penalty_groups.push_back(
          {groups.names[g], groups.sizes[g], rho[g], g < gamma.size() ? gamma[g] : 0.0});
  } else {
    summary_.final_weight_decay = rho.front();
  }
  summary_.peak_device_bytes =
      t_.backend_.memory().peak_bytes_in_use() - bytes_before_ + lm_->system_peak_bytes();
  summary_.batch_shares = shares_.shares();
  if (ranks_ > 1) {  // collective: every rank finishes
    const std::uint64_t mine = summary_.peak_device_bytes;
    std::vector<std::uint64_t> all(static_cast<std::size_t>(ranks_));
    t_.comm_->allgather(&mine, sizeof mine, all.data());
    summary_.rank_peak_bytes.assign(all.begin(), all.end());
  }
  t_.backend_.copy_to_host(theta_.data(), params.data(), n_);
  t_.backend_.synchronize();
  summary_.total_seconds = seconds_since(start_);
  summary_.threads = t_.backend_.thread_report();
  return summary_;
}

template <typename T>
Summary Trainer<T>::fit(std::vector<T>& params, const Dataset<T>& train,
                        const Dataset<T>* validation, const TrainingState<T>* resume) {
  Run run(*this, params.size(), train, validation);
  run.start(params, resume);
  for (int epoch = run.first_epoch(); epoch <= trainer_options_.max_epochs && !run.stopped();
       ++epoch)
    run.run_epoch(epoch);
  return run.finish(params);
}

template <typename T>
double Trainer<T>::evaluate(const std::vector<T>& params, const Dataset<T>& data) {
  return lmtrain::evaluate(spec_, loss_options_, params, data, backend_);
}

template <typename T>
std::vector<T> Trainer<T>::predict(const std::vector<T>& params, const std::vector<T>& x) {
  return lmtrain::predict(spec_, params, x, backend_);
}

template class Trainer<float>;
template class Trainer<double>;

}  // namespace lmtrain
