// What both of lmtrain.torch's fit runs (the torch path's foreign_fit, the fast path's
// native_fit) share: the request's trainer options and checkpoint, the first Python error of a
// callback and the stop flag it raises, and the run's hooks — Python's pending signals after
// every step (Ctrl-C: KeyboardInterrupt, the run stops after the step with a checkpoint), the
// epoch callback whose True stops, the checkpoint file and what the front end keeps beside it.
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <optional>
#include <string>
#include <utility>

#include "lmtrain/records/checkpoint.h"
#include "lmtrain/train/fit_run.h"

namespace lmtrain::python {

// Python's side of a fit: its callbacks' first error, and the stop flag it raises.
struct PythonErrors {
  std::atomic<bool> stop{false};
  std::optional<nanobind::python_error> error;
  void record(nanobind::python_error& e) {
    if (!error) error.emplace(std::move(e));
    stop = true;
  }
};

// on_epoch(record) after every epoch: True (or an exception, kept for the caller) stops.
inline CallbackResult epoch_check(nanobind::object& on_epoch, const EpochRecord& e,
                                  PythonErrors& errors) {
  nanobind::gil_scoped_acquire gil;
  if (errors.error || on_epoch.is_none()) return CallbackResult::kContinue;
  try {
    return nanobind::cast<bool>(on_epoch(e)) ? CallbackResult::kStop : CallbackResult::kContinue;
  } catch (nanobind::python_error& err) {
    errors.record(err);
  }
  return CallbackResult::kContinue;
}

// on_checkpoint(epochs_done) after the run wrote a checkpoint (must not throw: an exception is
// kept for the caller and stops the run).
inline void checkpoint_written(const nanobind::object& on_checkpoint, int epochs_done,
                               PythonErrors& errors) {
  nanobind::gil_scoped_acquire gil;
  if (on_checkpoint.is_none()) return;
  try {
    on_checkpoint(epochs_done);
  } catch (nanobind::python_error& err) {
    errors.record(err);
  }
}

// Everything of a fit but the objects: the trainer's options, the Summary's description, the
// checkpoint.
struct ForeignFitRequest {
  TrainerOptions trainer;
  std::string model;               // the Summary's description of the module
  std::string precision = "auto";  // as the user asked for it (auto, float32, mixed, float64)
  std::string checkpoint;          // path; empty: none
  int checkpoint_every = 1;
  std::string resume;  // checkpoint path to continue from
  // on_checkpoint(epochs_done) after each checkpoint the run writes (every `checkpoint_every`
  // epochs and on an interruption: the engine's rule, not a copy of it), on the rank that
  // writes it; None: nothing.  lmtrain.torch's fit keeps the state of data that changes between
  // epochs there (pinn's Problem.draws: FILE.data).  An exception stops the run, as a callback's.
  nanobind::object on_checkpoint = nanobind::none();
};

// What a resume of this fit must match (run_fingerprint), for `samples` training samples: the
// module's description, the seed, the batch, the precision asked for and the loss.
inline RunFingerprint request_fingerprint(const ForeignFitRequest& r, std::size_t samples,
                                          const std::string& loss) {
  const std::optional<Precision> precision = parse_precision(r.precision);
  if (!precision)
    throw InvalidArgument("precision = \"" + r.precision +
                          "\": expected \"auto\", \"float32\", \"mixed\" or \"float64\"");
  return run_fingerprint(r.model, r.trainer.seed, r.trainer, samples, *precision, loss);
}

// The hooks of a fit run from Python (`comm` may be null: one rank; only rank 0 writes).
template <typename T>
FitHooks<T> python_hooks(const ForeignFitRequest& request, const RunFingerprint& fingerprint,
                         PythonErrors& errors, nanobind::object& on_epoch,
                         dist::Communicator* comm) {
  FitHooks<T> hooks;
  hooks.comm = comm;
  hooks.stop_flag = &errors.stop;
  const bool root = comm == nullptr || comm->is_root();
  if (!request.checkpoint.empty()) {
    hooks.checkpoint_every = request.checkpoint_every;
    // `request` outlives the run; its callable is referenced, never copied without the GIL.
    hooks.checkpoint = [path = request.checkpoint, fingerprint, root, &request,
                        &errors](const TrainingState<T>& s) {
      if (!root) return;
      io::write_checkpoint(path, s, fingerprint);
      checkpoint_written(request.on_checkpoint, s.epochs_done, errors);
    };
  }
  hooks.callbacks.push_back([&errors](const IterationSummary&) {
    nanobind::gil_scoped_acquire gil;
    if (!errors.error && PyErr_CheckSignals() != 0) {
      nanobind::python_error e;
      errors.record(e);
    }
    return CallbackResult::kContinue;
  });
  hooks.epoch_check = [&on_epoch, &errors](const EpochRecord& e) {
    return epoch_check(on_epoch, e, errors);
  };
  return hooks;
}

}  // namespace lmtrain::python
