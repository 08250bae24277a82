// One training run, for every front end (DESIGN.md §9): epochs of LM steps over mini-batches
// (or the full batch) with seeded shuffling, sharding over the ranks, the planned step and its
// out-of-memory recovery, validation-based early stopping (MATLAB trainlm's max_fail, best model
// restored), the stop criteria (solver_options.h, trainer.h), iteration and epoch callbacks,
// checkpoints and resume — and the Summary.  `lmtrain fit` and `lmtrain.fit` reach it through
// Trainer<T>::fit with lmtrain's own network and data on the device; lmtrain.torch's fit reaches
// it with a foreign linearization (torch.func slices) and data held by torch.  What differs is
// behind two interfaces: the LinearizationSource (solve/) and the TrainingSet below.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lmtrain/backend/linear_algebra.h"
#include "lmtrain/dist/communicator.h"
#include "lmtrain/solve/linearization_source.h"
#include "lmtrain/solve/lm_step.h"
#include "lmtrain/solve/step_planner.h"
#include "lmtrain/train/summary.h"
#include "lmtrain/train/trainer_options.h"

namespace lmtrain {

// What a run trains on: the samples, how a batch of them becomes the source's current batch, and
// the losses over whole sets.
template <typename T>
class TrainingSet {
 public:
  virtual ~TrainingSet() = default;
  virtual std::size_t samples() const = 0;
  // Samples of the validation set (0: none).
  virtual std::size_t validation_samples() const = 0;
  // The most units (the source's batch unit: samples, or residual rows of a residual function)
  // a batch of `samples` samples gives, for the plan.
  virtual std::size_t max_units(std::size_t samples) const = 0;
  // Makes the training samples `rows` (this rank's share of a batch, indices into the training
  // set) the batch of the next step.  Returns its units and the device pointers the source's
  // linearize takes (null for a source that holds its own batch).
  struct Batch {
    const T* x = nullptr;
    const T* y = nullptr;
    std::size_t units = 0;
  };
  virtual Batch load(std::span<const std::int64_t> rows) = 0;
  // The objective F of samples [first, first + count) of the training set (validation = false)
  // or of the validation set at θ (n device values).
  virtual double objective(const T* theta, bool validation, std::size_t first,
                           std::size_t count) = 0;
  // The device memory an evaluation may use beyond what the step's plan counted for it (the
  // activations of one shard of a batch): the plan's budget less its peak, after each plan.  A
  // set may evaluate in fewer, larger chunks with it; by default it keeps its own.
  virtual void set_evaluation_memory(std::size_t /*bytes*/) {}
  // The loss users read (PyTorch's mean reduction) of an objective over `samples` samples.
  virtual double reported(double objective, std::size_t samples) const = 0;
  // The same of the training rows `rows` (a batch) and of a whole set: a set with sample weights
  // divides by their total weight (a weighted mean); by default, by the count.
  virtual double reported_rows(double objective, std::span<const std::int64_t> rows) const {
    return reported(objective, rows.size());
  }
  virtual double reported_set(double objective, bool validation) const {
    return reported(objective, validation ? validation_samples() : samples());
  }
};

// What the Summary says about the problem, given by the caller (who knows the model).
struct FitDescription {
  std::string model;  // "1-20-1 (dense 20, tanh, dense 1), 61 parameters"
  std::string loss;   // the loss's name
  std::size_t residuals_per_sample = 1;
  LossKind loss_kind = LossKind::kMse;  // for geodesic_acceleration = auto
};

// What must not change between a run and its resume, so a checkpoint carries it and a resume
// must match it (records/checkpoint.h): the architecture (the model file's JSON, or the description
// of a torch module), the seed, the batch in samples, the precision asked for and the loss.  Every
// front end builds it with run_fingerprint.
struct RunFingerprint {
  std::string architecture;
  std::uint64_t seed = 0;
  std::size_t batch_size = 0;
  std::string precision;
  std::string loss;
};
// `trainer.batch_size` resolved against the `samples` of the training set (0: all of them).
RunFingerprint run_fingerprint(std::string architecture, std::uint64_t seed,
                               const TrainerOptions& trainer, std::size_t samples,
                               Precision precision, std::string loss);

// Passed to callbacks after every LM step.
struct IterationSummary {
  int epoch = 0;          // 1-based
  std::size_t batch = 0;  // 0-based index within the epoch
  int step = 0;           // 1-based over the run
  double batch_loss = 0;  // reported loss of the batch after the step
  double lambda = 0;      // λ for the next step
  double elapsed_seconds = 0;
  StepReport report;
  // The step's own phases: what the run's table (Summary::times) gained over the step — not the
  // batch's loading before it, nor an epoch's evaluation after it.  Lets a caller take each
  // phase's median over steps where the Summary gives run totals.
  PhaseTimes step_times;
};

enum class CallbackResult { kContinue, kStop };
using IterationCallback = std::function<CallbackResult(const IterationSummary&)>;

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

// How the caller watches and steers a run.
template <typename T>
struct FitHooks {
  std::vector<IterationCallback> callbacks;
  std::function<void(const EpochRecord&)> epoch_callback;
  // After every epoch (after epoch_callback): kStop ends training (kUserCallback).  Its answer
  // must be the same on every rank (it sees the same record everywhere).
  std::function<CallbackResult(const EpochRecord&)> epoch_check;
  // Called with the state every `checkpoint_every` epochs (0: never at epoch ends) and when
  // training stops on the stop flag; it writes the checkpoint and must not throw.
  std::function<void(const TrainingState<T>&)> checkpoint;
  int checkpoint_every = 0;
  // Polled after every step; when it reads true, training stops with kInterrupted after a
  // checkpoint.  Async-signal-safe to set from a signal handler.
  const std::atomic<bool>* stop_flag = nullptr;
  // Data-parallel training: every rank runs with the same data and options and linearizes its
  // shard of every batch (DESIGN.md §6).  Null: one rank.
  dist::Communicator* comm = nullptr;
};

// Runs the epochs.  `theta` (n device values of `device`, the source's device) is trained in
// place; `params` (host) gives the start and receives the result.  `caller`: what the caller
// holds on the device during the run beside what it allocated already, for the memory plan.
template <typename T>
Summary run_fit(const SolverOptions& solver, const TrainerOptions& trainer,
                LinearizationSource<T>& source, TrainingSet<T>& data, LinearAlgebra<T>& device,
                T* theta, std::vector<T>& params, const FitDescription& description,
                const FitHooks<T>& hooks, const CallerBuffers& caller,
                const TrainingState<T>* resume = nullptr);

}  // namespace lmtrain
