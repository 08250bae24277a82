#include "lmtrain/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "lmtrain/core/error.h"
#include "lmtrain/dist/communicator.h"
#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/train/engine_source.h"
#include "lmtrain/train/predict.h"

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

std::vector<std::string> ignored_options(const TrainerOptions& o, bool validation_data, int ranks) {
  const TrainerOptions d;
  std::vector<std::string> lines;
  if (!validation_data && o.max_validation_failures != d.max_validation_failures)
    lines.push_back(fmt::format(
        "TrainerOptions::max_validation_failures = {}: ignored, the run has no validation data "
        "(a validation set or fraction uses it)",
        o.max_validation_failures));
  if (!validation_data && o.restore_best != d.restore_best)
    lines.push_back(
        "TrainerOptions::restore_best is off: ignored, the run has no validation data (a "
        "validation set or fraction uses it)");
  if (ranks == 1 && o.balance != d.balance)
    lines.push_back(
        "TrainerOptions::balance = measured: ignored, the run has one rank (the ranks' shares of "
        "a batch use it)");
  return lines;
}

namespace {

// A data set on the device: x, and the target rows the loss reads (with each sample's weight
// after its targets when the loss is sample-weighted).
template <typename T>
struct DeviceData {
  DeviceBuffer<T> x, y;
  std::size_t samples = 0;
  double total_weight = 0;
  DeviceData(Backend<T>& backend, const Dataset<T>& d, bool sample_weighted)
      : samples(d.samples), total_weight(d.total_weight()) {
    // Unweighted, y goes to the device as it is: no copy of it on the host.
    const std::vector<T> packed = sample_weighted ? d.targets_with_weights() : std::vector<T>();
    const std::vector<T>& targets = sample_weighted ? packed : d.y;
    x = backend.allocate(d.x.size());
    y = backend.allocate(targets.size());
    backend.copy_from_host(d.x.data(), x.data(), d.x.size());
    backend.copy_from_host(targets.data(), y.data(), targets.size());
  }
};

template <typename T>
void check_data(const Dataset<T>& data, const char* what, const Sequential<T>& model,
                const ModelSpec& spec, const LossOptions& loss) {
  data.validate(what);
  if (data.inputs != model.inputs() || data.outputs != model.outputs())
    throw InvalidArgument(fmt::format(
        "{} has {} inputs and {} outputs per sample but the model {} expects {} and {}", what,
        data.inputs, data.outputs, spec.describe(), model.inputs(), model.outputs()));
  loss.check_targets(data.y.data(), data.samples, data.outputs, what);
}

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
  solver_options_.geodesic_acceleration =
      geodesic_acceleration_for(solver_options_, loss_options_.kind);
}

namespace {

// lmtrain's own network's training set: the data on the backend's device, a batch gathered
// into buffers of this rank's shard, losses by forward passes in chunks of the shard's size (on
// a GPU as large as memory allows) and one read.
template <typename T>
class DeviceTrainingSet final : public TrainingSet<T> {
 public:
  DeviceTrainingSet(const Sequential<T>& model, const Loss<T>& loss, Backend<T>& backend,
                    const Dataset<T>& train, const Dataset<T>* validation, std::size_t chunk)
      : model_(model),
        loss_(loss),
        backend_(backend),
        train_(backend, train, loss.sample_weighted()),
        train_weights_(train.weights.begin(), train.weights.end()),
        chunk_(std::max<std::size_t>(chunk, 1)),
        evaluation_chunk_(chunk_),
        xb_(backend.allocate(chunk_ * model.inputs())),
        yb_(backend.allocate(chunk_ * loss.target_columns())) {
    if (validation != nullptr)
      validation_ = std::make_unique<DeviceData<T>>(backend, *validation, loss.sample_weighted());
  }

  std::size_t samples() const override { return train_.samples; }
  std::size_t validation_samples() const override { return validation_ ? validation_->samples : 0; }
  std::size_t max_units(std::size_t samples) const override { return samples; }
  typename TrainingSet<T>::Batch load(std::span<const std::int64_t> rows) override {
    // The whole set in its own order: the step reads it in place.
    bool whole = rows.size() == train_.samples;
    for (std::size_t i = 0; whole && i < rows.size(); ++i)
      whole = rows[i] == static_cast<std::int64_t>(i);
    if (whole) return {train_.x.data(), train_.y.data(), rows.size()};
    backend_.gather_rows(train_.x.data(), model_.inputs(), rows, xb_.data());
    backend_.gather_rows(train_.y.data(), loss_.target_columns(), rows, yb_.data());
    return {xb_.data(), yb_.data(), rows.size()};
  }
  double objective(const T* theta, bool validation, std::size_t first, std::size_t count) override {
    const DeviceData<T>& d = validation ? *validation_ : train_;
    return total_objective(model_, loss_, theta, d.x.data(), d.y.data(), first, count,
                           evaluation_chunk_, eval_state_, objectives_);
  }
  // An evaluation's chunks: the step's shard, which the plan counted activations for.  A device
  // that runs work best as large as memory allows (SlicePreference::bytes = 0: a GPU, where a
  // chunk is a handful of kernel launches) takes as many more samples as `bytes` hold, up to
  // the larger set: one forward pass per set.  A CPU keeps the shard's chunks, its caches'
  // size: W2's 100 000 samples in one chunk took 16 ms, in ten 8–9 ms (2-core AMD EPYC, one
  // thread), and other chunks would add F's parts in another order.
  void set_evaluation_memory(std::size_t bytes) override {
    evaluation_chunk_ = chunk_;
    if (backend_.slice_preference(model_.num_params()).bytes > 0) return;
    const std::size_t per_sample = model_.activation_floats_per_sample() * sizeof(T);
    const std::size_t largest = std::max(train_.samples, validation_samples());
    evaluation_chunk_ = std::min(largest, chunk_ + bytes / std::max<std::size_t>(per_sample, 1));
  }
  double reported(double objective, std::size_t samples) const override {
    return loss_.reported(objective, samples);
  }
  // Weighted sets divide by the rows' total weight (a weighted mean), summed in the rows' order.
  double reported_rows(double objective, std::span<const std::int64_t> rows) const override {
    if (train_weights_.empty()) return loss_.reported(objective, rows.size());
    double weight = 0;
    for (const std::int64_t row : rows) weight += train_weights_[static_cast<std::size_t>(row)];
    return loss_.reported_of_weight(objective, weight);
  }
  double reported_set(double objective, bool validation) const override {
    return loss_.reported_of_weight(
        objective, validation && validation_ ? validation_->total_weight : train_.total_weight);
  }

 private:
  const Sequential<T>& model_;
  const Loss<T>& loss_;
  Backend<T>& backend_;
  DeviceData<T> train_;
  std::vector<double> train_weights_;  // empty: unweighted
  std::unique_ptr<DeviceData<T>> validation_;
  std::size_t chunk_;             // the step's shard: what a batch's buffers hold
  std::size_t evaluation_chunk_;  // samples per forward pass of an evaluation
  DeviceBuffer<T> xb_, yb_;
  ForwardState<T> eval_state_;
  DeviceBuffer<double> objectives_;  // each chunk's F, read together
};

}  // namespace

template <typename T>
Summary Trainer<T>::fit(std::vector<T>& params, const Dataset<T>& train,
                        const Dataset<T>* validation, const TrainingState<T>* resume) {
  Sequential<T> model(spec_, backend_);
  // One set with sample weights makes the loss weighted; the other's samples weigh 1.
  const bool weighted =
      !train.weights.empty() || (validation != nullptr && !validation->weights.empty());
  Loss<T> loss(loss_options_, model.outputs(), backend_, weighted);
  check_data(train, "training data", model, spec_, loss_options_);
  if (validation != nullptr)
    check_data(*validation, "validation data", model, spec_, loss_options_);
  const int ranks = comm_ != nullptr ? comm_->size() : 1;
  const std::size_t batch = trainer_options_.batch_size == 0
                                ? train.samples
                                : std::min(trainer_options_.batch_size, train.samples);
  // The largest block of a batch any rank may be given (equal or measured shares).
  const std::size_t local_batch = BatchShares(trainer_options_.balance, ranks, 0).max_shard(batch);
  JacobianEngine<T> engine(model, loss);
  EngineSource<T> source(engine);
  DeviceTrainingSet<T> data(model, loss, backend_, train, validation, local_batch);
  DeviceBuffer<T> theta = backend_.allocate(model.num_params());
  FitDescription description;
  description.model = spec_.describe();
  description.loss = std::string(to_string(loss.kind()));
  description.residuals_per_sample = loss.residuals_per_sample();
  description.loss_kind = loss.kind();
  FitHooks<T> hooks;
  hooks.callbacks = callbacks_;
  hooks.epoch_callback = epoch_callback_;
  hooks.epoch_check = epoch_check_;
  hooks.checkpoint = checkpoint_;
  hooks.checkpoint_every = checkpoint_every_;
  hooks.stop_flag = stop_flag_;
  hooks.comm = comm_;
  // The best θ of early stopping and the evaluation's activations (the data, θ and the batch are
  // allocated already: the budget counts them as used).
  const CallerBuffers caller{1, model.activation_floats_per_sample()};
  Summary summary = run_fit(solver_options_, trainer_options_, source, data, backend_, theta.data(),
                            params, description, hooks, caller, resume);
  for (std::string& line : loss_options_.ignored_options())
    summary.options_ignored.push_back(std::move(line));
  if (!train.weights.empty()) summary.training_weight = train.total_weight();
  if (validation != nullptr && !validation->weights.empty())
    summary.validation_weight = validation->total_weight();
  return summary;
}

template <typename T>
StepPlan Trainer<T>::plan(std::size_t samples, int ranks) const {
  if (ranks < 1)
    throw InvalidArgument(fmt::format("Trainer::plan: ranks = {}; expected ≥ 1", ranks));
  if (samples == 0) throw InvalidArgument("Trainer::plan: the training set has no samples");
  Sequential<T> model(spec_, backend_);
  Loss<T> loss(loss_options_, model.outputs(), backend_);
  JacobianEngine<T> engine(model, loss);
  EngineSource<T> source(engine);
  const std::size_t batch =
      trainer_options_.batch_size == 0 ? samples : std::min(trainer_options_.batch_size, samples);
  // The problem as fit() gives it to its planner (fit_run.cpp), on one rank of `ranks`.
  StepProblem problem;
  problem.local_batch = BatchShares(trainer_options_.balance, ranks, 0).max_shard(batch);
  problem.batch = std::min(problem.local_batch * static_cast<std::size_t>(ranks), batch);
  problem.ranks = ranks;
  problem.collectives = ranks > 1;
  problem.loss = loss.kind();
  // θ and the best θ, this rank's batch and the evaluation's activations (fit() counts the data
  // sets as used device memory when it plans; here they are not yet loaded).
  problem.caller = {2, model.inputs() + model.outputs() + model.activation_floats_per_sample()};
  if (ranks > 1 && !dist::distributed_normal_matrix_built(backend_.device_kind()))
    problem.distributed_unavailable =
        dist::distributed_normal_matrix_unavailable(nullptr, backend_.device_kind());
  else if (ranks > 1)
    problem.distributed_unavailable.reset();  // an MPI (NCCL) launch of this build can
  return plan_step(solver_options_, source, problem);
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
