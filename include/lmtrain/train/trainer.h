// The Trainer runs epochs of LM steps over mini-batches (or the full batch), with seeded
// shuffling, validation-based early stopping (MATLAB trainlm's max_fail, best model restored),
// the termination criteria of solver_options.h and an iteration callback.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "lmtrain/nn/loss.h"
#include "lmtrain/nn/model_spec.h"
#include "lmtrain/solve/lm_step.h"
#include "lmtrain/solve/summary.h"
#include "lmtrain/train/dataset.h"

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

  bool is_valid(std::string* error) const;
  void validate() const;
};

// Passed to callbacks after every LM step.
struct IterationSummary {
  int epoch = 0;              // 1-based
  std::size_t batch = 0;      // 0-based index within the epoch
  int step = 0;               // 1-based over the run
  double batch_loss = 0;      // reported loss of the batch after the step
  double lambda = 0;          // λ for the next step
  double elapsed_seconds = 0;
  StepReport report;
};

enum class CallbackResult { kContinue, kStop };
using IterationCallback = std::function<CallbackResult(const IterationSummary&)>;

template <typename T>
class Trainer {
 public:
  Trainer(ModelSpec model, LossOptions loss, SolverOptions solver, TrainerOptions trainer,
          Backend<T>& backend);

  void add_callback(IterationCallback callback) { callbacks_.push_back(std::move(callback)); }

  // Trains `params` (host, model.num_params() values) in place.  Returns the Summary; on a
  // non-finite loss the parameters are the last finite ones and the Summary says so.
  Summary fit(std::vector<T>& params, const Dataset<T>& train,
              const Dataset<T>* validation = nullptr);

  // Reported loss of `params` on `data` (forward passes in batches).
  double evaluate(const std::vector<T>& params, const Dataset<T>& data);
  // Network outputs (samples × outputs) for `x` (samples × inputs).
  std::vector<T> predict(const std::vector<T>& params, const std::vector<T>& x);

  const ModelSpec& model() const { return spec_; }

 private:
  ModelSpec spec_;
  LossOptions loss_options_;
  SolverOptions solver_options_;
  TrainerOptions trainer_options_;
  Backend<T>& backend_;
  std::vector<IterationCallback> callbacks_;
};

}  // namespace lmtrain
