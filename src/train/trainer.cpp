#include "lmtrain/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"
#include "lmtrain/nn/memory_plan.h"
#include "lmtrain/solve/solver_selection.h"

namespace lmtrain {

bool TrainerOptions::is_valid(std::string* error) const {
  auto fail = [error](const std::string& msg) {
    if (error) *error = msg;
    return false;
  };
  if (max_epochs < 1) return fail(fmt::format("TrainerOptions::max_epochs = {} violates: max_epochs ≥ 1", max_epochs));
  if (!(max_time_seconds > 0))
    return fail(fmt::format("TrainerOptions::max_time_seconds = {} violates: max_time_seconds > 0", max_time_seconds));
  if (max_validation_failures < 1)
    return fail(fmt::format("TrainerOptions::max_validation_failures = {} violates: ≥ 1",
                            max_validation_failures));
  if (!std::isfinite(loss_goal) || loss_goal < 0)
    return fail(fmt::format("TrainerOptions::loss_goal = {} violates: 0 ≤ loss_goal < ∞", loss_goal));
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

// Objective F over rows [begin, begin + rows) of a data set, forward passes of `chunk` samples.
template <typename T>
double total_objective(const Sequential<T>& model, const Loss<T>& loss, const T* params,
                       const DeviceData<T>& data, std::size_t begin, std::size_t rows,
                       std::size_t chunk, ForwardState<T>& state) {
  double f = 0;
  const std::size_t in = model.inputs(), out = model.outputs();
  chunk = std::max<std::size_t>(chunk, 1);
  for (std::size_t first = begin; first < begin + rows; first += chunk) {
    const std::size_t count = std::min(chunk, begin + rows - first);
    const T* z = model.forward(params, data.x.data() + first * in, count, state, false);
    f += loss.objective(count, z, data.y.data() + first * out);
  }
  return f;
}

const char* precision_name(float*) { return "float32"; }
const char* precision_name(double*) { return "float64"; }

}  // namespace

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
}

template <typename T>
Summary Trainer<T>::fit(std::vector<T>& params, const Dataset<T>& train,
                        const Dataset<T>* validation, const TrainingState<T>* resume) {
  const auto start = Clock::now();
  Sequential<T> model(spec_, backend_);
  Loss<T> loss(loss_options_, model.outputs(), backend_);
  const std::size_t n = model.num_params();
  if (params.size() != n)
    throw InvalidArgument(fmt::format("fit: {} initial parameters given, the model {} has {}",
                                      params.size(), spec_.describe(), n));
  train.validate("training data");
  if (train.inputs != model.inputs() || train.outputs != model.outputs())
    throw InvalidArgument(fmt::format(
        "training data has {} inputs and {} outputs per sample but the model {} expects {} and {}",
        train.inputs, train.outputs, spec_.describe(), model.inputs(), model.outputs()));
  if (validation != nullptr) {
    validation->validate("validation data");
    if (validation->inputs != model.inputs() || validation->outputs != model.outputs())
      throw InvalidArgument(fmt::format(
          "validation data has {} inputs and {} outputs per sample but the model expects {} and {}",
          validation->inputs, validation->outputs, model.inputs(), model.outputs()));
  }

  const TrainerOptions& topt = trainer_options_;
  const SolverOptions& sopt = solver_options_;
  const std::size_t batch = topt.batch_size == 0 ? train.samples : std::min(topt.batch_size, train.samples);
  const std::size_t R = loss.residuals_per_sample();

  Summary summary;
  summary.model = spec_.describe();
  summary.loss = std::string(to_string(loss.kind()));
  const bool mixed = std::is_same_v<T, float> &&
                     resolve_system_precision(solver_options_, true) == SystemPrecision::kFloat64;
  summary.precision =
      !mixed ? std::string(precision_name(static_cast<T*>(nullptr)))
      : sopt.system_precision == SystemPrecision::kAuto
          ? fmt::format("mixed (float32 model and Jacobian, float64 A, g and solve: {} "
                        "regularization reads A's small eigenvalues, which float32 rounding swamps)",
                        to_string(sopt.regularization))
          : std::string("mixed (float32 model and Jacobian, float64 A, g and solve)");
  summary.device = backend_.name();
  summary.num_params = n;
  summary.training_samples = train.samples;
  summary.validation_samples = validation ? validation->samples : 0;
  summary.batch_size = batch;
  summary.residuals_per_sample = R;
  summary.batches_per_epoch = (train.samples + batch - 1) / batch;
  summary.linear_solver_given = sopt.linear_solver;
  summary.damping = sopt.damping;
  summary.damping_matrix = sopt.damping_matrix;
  summary.memory_budget_given = sopt.memory_budget_bytes;
  summary.max_slice_samples_given = sopt.max_slice_samples;

  const int ranks = comm_ != nullptr ? comm_->size() : 1;
  const int rank = comm_ != nullptr ? comm_->rank() : 0;
  summary.ranks = ranks;
  summary.communicator = comm_ != nullptr ? comm_->name() : "local";
  // This rank's share of `count` samples starting at `first`: a contiguous block.
  auto shard = [&](std::size_t first, std::size_t count) {
    const std::size_t lo = count * static_cast<std::size_t>(rank) / static_cast<std::size_t>(ranks);
    const std::size_t hi = count * static_cast<std::size_t>(rank + 1) / static_cast<std::size_t>(ranks);
    return std::pair{first + lo, hi - lo};
  };
  const std::size_t local_batch = (batch + static_cast<std::size_t>(ranks) - 1) / static_cast<std::size_t>(ranks);

  // The linear solver and the memory plan; the budget is this rank's device.
  StepProblem problem;
  problem.batch = batch;
  problem.local_batch = local_batch;
  problem.residuals_per_sample = R;
  problem.ranks = ranks;
  problem.collectives = comm_ != nullptr && (ranks > 1 || comm_->supports_device_buffers());
  problem.budget_bytes =
      sopt.memory_budget_bytes > 0
          ? sopt.memory_budget_bytes
          : static_cast<std::size_t>(sopt.memory_fraction *
                                     static_cast<double>(backend_.available_memory_bytes()));
  // θ and the best θ, the batch, and the evaluation's activations.
  problem.caller_elements = 2 * n + local_batch * (model.inputs() + model.outputs()) +
                            local_batch * model.activation_floats_per_sample();
  const SolverChoice choice = choose_linear_solver(sopt, model, problem);
  const LinearSolverType solver_type = choice.type;
  summary.linear_solver_reason = choice.reason;
  const MemoryPlan& plan = choice.plan;
  summary.linear_solver_used = solver_type;
  summary.geodesic_acceleration = uses_geodesic_acceleration(sopt, solver_type);
  summary.memory_plan = plan.describe();
  summary.planned_peak_bytes = plan.peak_bytes;
  backend_.memory().reset_peak();
  const std::size_t bytes_before = backend_.memory().bytes_in_use();
  summary.slice_samples = plan.slice_samples;

  // The engine and the step own every slice-sized buffer.  An allocation that fails at run time
  // although the plan fitted (another process took device memory, a library's workspace) halves
  // the slice and rebuilds both; the step then runs again from its unchanged inputs.  With
  // several ranks the failure ends the job instead: the other ranks are already waiting in a
  // collective of the step.
  std::size_t slice = plan.slice_samples;
  std::unique_ptr<JacobianEngine<T>> engine;
  std::unique_ptr<LmStepper<T>> lm;
  auto halve_slice = [&](const OutOfMemory& e) {
    lm.reset();
    engine.reset();
    if (slice == 1 || ranks > 1)
      throw OutOfMemory(fmt::format("{} (Jacobian slice of {} sample(s){})", e.what(), slice,
                                    ranks > 1 ? "; with several ranks the slice is not halved" : ""));
    slice = (slice + 1) / 2;
    ++summary.slice_halvings;
    summary.slice_samples = slice;
    summary.slice_halving_cause = e.what();
  };
  auto build_step = [&] {
    for (;;) {
      try {
        engine = std::make_unique<JacobianEngine<T>>(model, loss);
        lm = make_lm_step<T>(sopt, solver_type, *engine, slice, local_batch, comm_);
        return;
      } catch (const OutOfMemory& e) {
        halve_slice(e);
      }
    }
  };
  build_step();

  DeviceData<T> train_dev(backend_, train);
  std::unique_ptr<DeviceData<T>> valid_dev;
  if (validation) valid_dev = std::make_unique<DeviceData<T>>(backend_, *validation);
  DeviceBuffer<T> theta = backend_.allocate(n);
  DeviceBuffer<T> best = backend_.allocate(n);
  DeviceBuffer<T> xb = backend_.allocate(local_batch * model.inputs());
  DeviceBuffer<T> yb = backend_.allocate(local_batch * model.outputs());
  ForwardState<T> eval_state;

  // Losses over a whole data set: each rank evaluates its block of rows, the sums are reduced.
  auto data_loss = [&](const DeviceData<T>& data) {
    ScopedPhase timer(summary.times, Phase::kValidation);
    const auto [first, count] = shard(0, data.samples);
    double f = total_objective(model, loss, theta.data(), data, first, count, local_batch, eval_state);
    if (ranks > 1) {
      ScopedPhase comm_timer(summary.times, Phase::kCommunication);
      f = comm_->sum(f);
    }
    return loss.reported(f, data.samples);
  };
  auto training_loss = [&] { return data_loss(train_dev); };
  auto validation_loss = [&] { return data_loss(*valid_dev); };

  Rng rng(topt.seed);
  int validation_failures = 0;
  int first_epoch = 1;
  std::size_t first_batch = 0;
  EpochRecord partial;
  if (resume != nullptr) {
    if (resume->params.size() != n || (!resume->best_params.empty() && resume->best_params.size() != n))
      throw InvalidArgument(fmt::format("resume: the checkpoint holds {} parameters, the model {} has {}",
                                        resume->params.size(), spec_.describe(), n));
    params = resume->params;
    const Summary& r = resume->summary;
    summary.initial_loss = r.initial_loss;
    summary.final_loss = r.final_loss;
    summary.initial_validation_loss = r.initial_validation_loss;
    summary.final_validation_loss = r.final_validation_loss;
    summary.best_validation_loss = r.best_validation_loss;
    summary.best_epoch = r.best_epoch;
    summary.epochs = r.epochs;
    summary.steps = r.steps;
    summary.accepted_steps = r.accepted_steps;
    summary.rejected_steps = r.rejected_steps;
    summary.invalid_steps = r.invalid_steps;
    summary.abandoned_steps = r.abandoned_steps;
    summary.geodesic_applied = r.geodesic_applied;
    summary.geodesic_refused = r.geodesic_refused;
    summary.history = r.history;
    lm->set_state(resume->stepper);
    rng.set_state(resume->epoch_rng);
    validation_failures = resume->validation_failures;
    first_epoch = resume->epochs_done + 1;
    first_batch = resume->batches_done;
    partial = resume->partial_epoch;
    backend_.copy_from_host(params.data(), theta.data(), n);
    if (valid_dev) {
      const std::vector<T>& b = resume->best_params.empty() ? params : resume->best_params;
      backend_.copy_from_host(b.data(), best.data(), n);
    }
  } else {
    backend_.copy_from_host(params.data(), theta.data(), n);
    summary.initial_loss = summary.final_loss = training_loss();
    if (valid_dev) {
      summary.initial_validation_loss = summary.best_validation_loss = validation_loss();
      backend_.copy(theta.data(), best.data(), n);
    }
    if (!std::isfinite(summary.initial_loss)) {
      summary.termination = TerminationReason::kNonFiniteObjective;
      summary.message = fmt::format(
          "the initial training loss is not finite ({}); check the data scale and the "
          "initialization",
          summary.initial_loss);
    }
  }

  // The state a checkpoint stores; `epoch_rng` is the RNG before the current epoch's shuffle.
  std::array<std::uint64_t, 4> epoch_rng = rng.state();
  auto make_state = [&](int epochs_done, std::size_t batches_done, const EpochRecord& current) {
    TrainingState<T> state;
    state.epochs_done = epochs_done;
    state.batches_done = batches_done;
    state.epoch_rng = batches_done == 0 ? rng.state() : epoch_rng;
    state.stepper = lm->state();
    state.params.resize(n);
    backend_.copy_to_host(theta.data(), state.params.data(), n);
    if (valid_dev) {
      state.best_params.resize(n);
      backend_.copy_to_host(best.data(), state.best_params.data(), n);
    }
    state.validation_failures = validation_failures;
    state.partial_epoch = current;
    state.summary = summary;
    return state;
  };

  std::vector<std::int64_t> order(train.samples);
  for (int epoch = first_epoch; epoch <= topt.max_epochs &&
                                summary.termination == TerminationReason::kNone;
       ++epoch) {
    // Each epoch's permutation depends only on the RNG state at its start, so a checkpoint needs
    // that state and nothing of the order itself.
    epoch_rng = rng.state();
    std::iota(order.begin(), order.end(), 0);
    if (topt.shuffle && batch < train.samples) rng.shuffle(std::span<std::int64_t>(order));
    EpochRecord record;
    record.epoch = epoch;
    std::size_t b = 0;
    if (epoch == first_epoch && first_batch > 0) {
      record = partial;
      b = first_batch;
    }
    for (; b * batch < train.samples; ++b) {
      const std::size_t first = b * batch;
      const std::size_t count = std::min(batch, train.samples - first);
      const auto [local_first, local_count] = shard(first, count);
      const std::span<const std::int64_t> rows(order.data() + local_first, local_count);
      const T* x = train_dev.x.data();
      const T* y = train_dev.y.data();
      if (batch < train.samples || ranks > 1) {
        ScopedPhase timer(summary.times, Phase::kOther);
        backend_.gather_rows(train_dev.x.data(), model.inputs(), rows, xb.data());
        backend_.gather_rows(train_dev.y.data(), model.outputs(), rows, yb.data());
        x = xb.data();
        y = yb.data();
      }
      StepReport rep;
      for (;;) {
        const StepperState before = lm->state();
        try {
          rep = lm->step(theta.data(), x, y, local_count, summary.times);
          break;
        } catch (const OutOfMemory& e) {
          halve_slice(e);
          build_step();
          lm->set_state(before);
        }
      }
      ++summary.steps;
      if (rep.effective_parameters > 0) summary.effective_parameters = rep.effective_parameters;
      summary.accepted_steps += rep.accepted ? 1 : 0;
      summary.abandoned_steps += rep.accepted || rep.termination != TerminationReason::kNone ? 0 : 1;
      summary.rejected_steps += rep.rejected;
      summary.invalid_steps += rep.invalid;
      summary.geodesic_applied += rep.geodesic_applied;
      summary.geodesic_refused += rep.geodesic_refused;
      record.accepted += rep.accepted ? 1 : 0;
      record.rejected += rep.rejected;
      record.invalid += rep.invalid;
      record.gradient_max_norm = rep.gradient_max_norm;
      if (rep.accepted) record.step_norm = rep.step_norm;

      if (rep.termination != TerminationReason::kNone) {
        summary.termination = rep.termination;
        summary.message = fmt::format("epoch {}, batch {}: {}", epoch, b, rep.message);
      }

      IterationSummary it;
      it.epoch = epoch;
      it.batch = b;
      it.step = summary.steps;
      it.batch_loss = loss.reported(rep.objective_after - rep.penalty_after, count);  // data only
      it.lambda = lm->lambda();
      it.elapsed_seconds = seconds_since(start);
      it.report = rep;
      // Stops decided outside the LM step (a callback, the clock, the stop flag) may differ
      // between ranks, so with several ranks they are summed: any rank's reason stops them all
      // at the same step.
      double stops[3] = {0, 0, 0};  // callback, time budget, interruption
      for (const auto& cb : callbacks_)
        if (cb(it) == CallbackResult::kStop) stops[0] = 1;
      if (it.elapsed_seconds >= topt.max_time_seconds) stops[1] = 1;
      if (stop_flag_ != nullptr && stop_flag_->load(std::memory_order_relaxed)) stops[2] = 1;
      if (ranks > 1) {
        ScopedPhase timer(summary.times, Phase::kCommunication);
        comm_->allreduce_sum(stops, 3);
      }
      if (summary.termination == TerminationReason::kNone && stops[0] > 0) {
        summary.termination = TerminationReason::kUserCallback;
        summary.message = fmt::format("stopped by the iteration callback after step {}", summary.steps);
      }
      if (summary.termination == TerminationReason::kNone && stops[1] > 0) {
        summary.termination = TerminationReason::kTimeBudget;
        summary.message = fmt::format("{:.2f} s elapsed ≥ max_time_seconds = {}",
                                      it.elapsed_seconds, topt.max_time_seconds);
      }
      if (summary.termination == TerminationReason::kNone && stops[2] > 0) {
        summary.termination = TerminationReason::kInterrupted;
        summary.message = fmt::format("interrupted in epoch {} after batch {}", epoch, b);
        const bool epoch_complete = (b + 1) * batch >= train.samples;
        if (checkpoint_ && !epoch_complete) checkpoint_(make_state(epoch - 1, b + 1, record));
        if (epoch_complete) ++b;  // finish the epoch's bookkeeping below, then checkpoint
      }
      if (summary.termination != TerminationReason::kNone) break;
    }
    if (summary.termination == TerminationReason::kInterrupted && b * batch < train.samples) break;

    summary.epochs = epoch;
    record.training_loss = summary.final_loss = training_loss();
    record.lambda = lm->lambda();
    if (valid_dev) {
      record.validation_loss = summary.final_validation_loss = validation_loss();
      if (record.validation_loss < summary.best_validation_loss) {
        summary.best_validation_loss = record.validation_loss;
        summary.best_epoch = epoch;
        validation_failures = 0;
        backend_.copy(theta.data(), best.data(), n);
      } else if (++validation_failures >= topt.max_validation_failures &&
                 summary.termination == TerminationReason::kNone) {
        summary.termination = TerminationReason::kValidationMaxFail;
        summary.message = fmt::format(
            "validation loss did not improve on {:.6e} (epoch {}) for {} epochs",
            summary.best_validation_loss, summary.best_epoch, validation_failures);
      }
    }
    record.seconds = seconds_since(start);
    summary.history.push_back(record);
    if (epoch_callback_) epoch_callback_(record);
    if (summary.termination == TerminationReason::kNone && record.training_loss <= topt.loss_goal) {
      summary.termination = TerminationReason::kLossGoal;
      summary.message = fmt::format("training loss {:.6e} ≤ loss_goal = {:.6e}",
                                    record.training_loss, topt.loss_goal);
    }
    const bool periodic = checkpoint_every_ > 0 && epoch % checkpoint_every_ == 0;
    if (checkpoint_ && (periodic || summary.termination == TerminationReason::kInterrupted) &&
        summary.termination != TerminationReason::kNonFiniteObjective)
      checkpoint_(make_state(epoch, 0, EpochRecord{}));
  }
  if (summary.termination == TerminationReason::kNone) {
    summary.termination = TerminationReason::kMaxEpochs;
    summary.message = fmt::format("{} epochs done", summary.epochs);
  }

  if (valid_dev && topt.restore_best &&
      summary.best_validation_loss < summary.final_validation_loss) {
    backend_.copy(best.data(), theta.data(), n);
    summary.restored_best = true;
    summary.final_loss = training_loss();
  }
  summary.final_lambda = lm->lambda();
  summary.regularization = sopt.regularization;
  if (sopt.regularization == Regularization::kArd) {
    const ParameterGroups groups = spec_.relevance_groups();
    const std::vector<double>& rho = lm->state().weight_decays;
    const std::vector<double>& gamma = lm->effective_parameters();
    for (std::size_t g = 0; g < groups.count(); ++g)
      summary.penalty_groups.push_back({groups.names[g], groups.sizes[g], rho[g],
                                        g < gamma.size() ? gamma[g] : 0.0});
  } else {
    summary.final_weight_decay = lm->state().weight_decays.front();
  }
  summary.peak_device_bytes =
      backend_.memory().peak_bytes_in_use() - bytes_before + lm->system_peak_bytes();
  backend_.copy_to_host(theta.data(), params.data(), n);
  backend_.synchronize();
  summary.total_seconds = seconds_since(start);
  return summary;
}

template <typename T>
double Trainer<T>::evaluate(const std::vector<T>& params, const Dataset<T>& data) {
  Sequential<T> model(spec_, backend_);
  Loss<T> loss(loss_options_, model.outputs(), backend_);
  data.validate("evaluation data");
  DeviceData<T> dev(backend_, data);
  DeviceBuffer<T> theta = backend_.allocate(params.size());
  backend_.copy_from_host(params.data(), theta.data(), params.size());
  ForwardState<T> state;
  const std::size_t chunk = std::min<std::size_t>(data.samples, 4096);
  return loss.reported(total_objective(model, loss, theta.data(), dev, 0, data.samples, chunk, state),
                       data.samples);
}

template <typename T>
std::vector<T> Trainer<T>::predict(const std::vector<T>& params, const std::vector<T>& x) {
  Sequential<T> model(spec_, backend_);
  const std::size_t samples = x.size() / model.inputs();
  DeviceBuffer<T> xd = backend_.allocate(x.size());
  backend_.copy_from_host(x.data(), xd.data(), x.size());
  DeviceBuffer<T> theta = backend_.allocate(params.size());
  backend_.copy_from_host(params.data(), theta.data(), params.size());
  ForwardState<T> state;
  std::vector<T> out(samples * model.outputs());
  const std::size_t chunk = 4096;
  for (std::size_t first = 0; first < samples; first += chunk) {
    const std::size_t count = std::min(chunk, samples - first);
    const T* z = model.forward(theta.data(), xd.data() + first * model.inputs(), count, state, false);
    backend_.copy_to_host(z, out.data() + first * model.outputs(), count * model.outputs());
  }
  return out;
}

template class Trainer<float>;
template class Trainer<double>;

}  // namespace lmtrain
