// The options of a training run (TrainerOptions): epochs, batches, shuffling and the stops a run
// decides outside the LM step.  Every front end takes them: the TOML's [trainer] table,
// lmtrain.fit's keyword arguments, lmtrain.torch's fit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lmtrain/train/batch_shares.h"

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

// The options of `given` set away from their defaults that a run with (or without)
// `validation_data` on `ranks` ranks does not use — the early stop's without validation data, a
// measured balance on one rank — one line each, as solve/ignored_options.h's: the Summary's
// options_ignored holds both.
std::vector<std::string> ignored_options(const TrainerOptions& given, bool validation_data,
                                         int ranks);

}  // namespace lmtrain
