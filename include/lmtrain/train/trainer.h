// The Trainer runs epochs of LM steps over mini-batches (or the full batch), with seeded
// shuffling, validation-based early stopping (MATLAB trainlm's max_fail, best model restored),
// the termination criteria of solver_options.h and an iteration callback.
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
#include "lmtrain/train/batch_shares.h"
#include "lmtrain/train/dataset.h"
#include "lmtrain/train/summary.h"

namespace lmtrain {

struct TrainerOptions {
  // Epochs (passes over the training data).
  int max_epochs = 50;
  // Samples per LM step; 0 (or ≥ the training set) means full batch.
  std::size_t batch_size = 0;
  // Reshuffle the training samples every epoch (seeded by `seed`).
  bool shuffle = true;
  std::uint64_t seed = 0;
  // Stop once the epoch's training loss (reported units) ≤ loss_goal (MATLAB trainlm's goal).
  double loss_goal = 0.0;
  // Wall-clock budget in seconds, checked after every step.
  double max_time_seconds = std::numeric_limits<double>::infinity();
  // With a validation set: stop after this many consecutive epochs without a new best
  // validation loss and restore the best parameters (MATLAB trainlm: max_fail = 6).
  int max_validation_failures = 6;
  bool restore_best = true;
  // After a stop is asked for (the first SIGINT/SIGTERM to `lmtrain fit`, the first Ctrl-C in
  // Python), the seconds the step under way may take to finish and write its checkpoint before
  // the process ends at once (Python: KeyboardInterrupt at once).  A second signal does not wait.
  // ∞: wait for the step however long it runs; 0: the first signal ends the process.
  double stop_grace_s = 30.0;
  // Each rank's share of a batch with several ranks (train/batch_shares.h): equal blocks, or
  // blocks that follow each rank's measured forward-and-Jacobian throughput of the previous steps
  // (heterogeneous ranks).  Measured shares change A only by the order of its sums, but that
  // order then depends on timing: runs are no longer bit-reproducible.
  BatchBalance balance = BatchBalance::kEqual;

  bool is_valid(std::string* error) const;
  void validate() const;
};

// Passed to callbacks after every LM step.
struct IterationSummary {
  int epoch = 0;          // 1-based
  std::size_t batch = 0;  // 0-based index within the epoch
  int step = 0;           // 1-based over the run
  double batch_loss = 0;  // reported loss of the batch after the step
  double lambda = 0;      // λ for the next step
  double elapsed_seconds = 0;
  StepReport report;
};

enum class CallbackResult { kContinue, kStop };

// Everything needed to continue a run exactly where it stopped: a checkpoint.  Taken at an epoch
// boundary (batches_done = 0) or, on interruption, after any step.  Resuming from it with the
// same data, options and thread count reproduces the uninterrupted run bit for bit.
template <typename T>
struct TrainingState {
  int epochs_done = 0;                       // completed epochs
  std::size_t batches_done = 0;              // completed batches of epoch epochs_done + 1
  std::array<std::uint64_t, 4> epoch_rng{};  // shuffling RNG before that epoch's permutation
  StepperState stepper;                      // λ's schedule, geodesic backoff, penalties' ρ
  std::vector<T> params;
  std::vector<T> best_params;  // best validation model (empty without validation)
  int validation_failures = 0;
  EpochRecord partial_epoch;  // counts of the unfinished epoch
  TrainingProgress progress;  // counters, losses and history so far
};
using IterationCallback = std::function<CallbackResult(const IterationSummary&)>;

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
  class Run;  // one fit(): its state and phases (trainer.cpp)
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
};

}  // namespace lmtrain
