// The Trainer: lmtrain's own network trained on data sets in memory — the fit run of
// fit_run.h (epochs, batches, early stopping, stops, checkpoints) with the network's structural
// Jacobians as the step's linearization and the data on the backend's device.  `lmtrain fit`
// and `lmtrain.fit` train through it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "lmtrain/dist/communicator.h"
#include "lmtrain/nn/loss.h"
#include "lmtrain/nn/model_spec.h"
#include "lmtrain/solve/lm_step.h"
#include "lmtrain/solve/step_planner.h"
#include "lmtrain/train/dataset.h"
#include "lmtrain/train/fit_run.h"
#include "lmtrain/train/summary.h"
#include "lmtrain/train/trainer_options.h"

namespace lmtrain {

template <typename T>
class Trainer {
 public:
  Trainer(ModelSpec model, LossOptions loss, SolverOptions solver, TrainerOptions trainer,
          Backend<T>& backend);

  void add_callback(IterationCallback callback) { callbacks_.push_back(std::move(callback)); }

  // Called with the state after every `every_epochs` epochs (0: never at epoch ends) and when
  // training stops on the stop flag.  The handler writes the checkpoint; it must not throw.
  using CheckpointHandler = std::function<void(const TrainingState<T>&)>;
  void set_checkpoint_handler(CheckpointHandler handler, int every_epochs) {
    checkpoint_ = std::move(handler);
    checkpoint_every_ = every_epochs;
  }
  // Polled after every step; when it reads true, training stops with kInterrupted after a
  // checkpoint.  Async-signal-safe to set from a signal handler.
  void set_stop_flag(const std::atomic<bool>* flag) { stop_flag_ = flag; }
  // Data-parallel training: every rank calls fit with the same data and options; each
  // linearizes its shard of every batch (DESIGN.md §6).  Null: one rank.  The stop flag, when
  // used with several ranks, must be raised on every rank.
  void set_communicator(dist::Communicator* comm) { comm_ = comm; }
  // Called after every completed epoch with its record (losses over all samples).
  void set_epoch_callback(std::function<void(const EpochRecord&)> callback) {
    epoch_callback_ = std::move(callback);
  }
  // Called after the epoch callback; kStop ends training (TerminationReason::kUserCallback).
  void set_epoch_check(std::function<CallbackResult(const EpochRecord&)> check) {
    epoch_check_ = std::move(check);
  }

  // Trains `params` (host, model.num_params() values) in place.  Returns the Summary; on a
  // non-finite loss the parameters are the last finite ones and the Summary says so.  With
  // `resume`, continues that state (its params replace `params`).
  Summary fit(std::vector<T>& params, const Dataset<T>& train,
              const Dataset<T>* validation = nullptr, const TrainingState<T>* resume = nullptr);

  // Reported loss of `params` on `data` (lmtrain::evaluate with this trainer's model and loss).
  double evaluate(const std::vector<T>& params, const Dataset<T>& data);
  // Network outputs (samples × outputs) for `x` (samples × inputs): lmtrain::predict.
  std::vector<T> predict(const std::vector<T>& params, const std::vector<T>& x);

  const ModelSpec& model() const { return spec_; }
  // The linear solver and the memory plan a fit on `samples` training samples would get on each
  // of `ranks` ranks of this backend's kind, without training (lmtrain info --plan): what fit()
  // resolves, with the budget of this backend's device.  Throws MemoryPlanError when nothing
  // fits, as fit() would.
  StepPlan plan(std::size_t samples, int ranks) const;

 private:
  ModelSpec spec_;
  LossOptions loss_options_;
  SolverOptions solver_options_;
  TrainerOptions trainer_options_;
  Backend<T>& backend_;
  std::vector<IterationCallback> callbacks_;
  CheckpointHandler checkpoint_;
  int checkpoint_every_ = 0;
  const std::atomic<bool>* stop_flag_ = nullptr;
  dist::Communicator* comm_ = nullptr;
  std::function<void(const EpochRecord&)> epoch_callback_;
  std::function<CallbackResult(const EpochRecord&)> epoch_check_;
};

}  // namespace lmtrain
