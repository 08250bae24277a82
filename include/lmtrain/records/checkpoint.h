// Checkpoints: a TrainingState (train/trainer.h) in a safetensors file, written atomically
// (temp file, fsync, rename), so a crash at any moment leaves the previous checkpoint intact.
//   tensors   "params", "best_params" (F32 or F64 as the training precision)
//   metadata  "lmtrain.checkpoint": JSON with the position (epochs_done, batches_done), the
//             shuffling RNG state, the damping and geodesic-backoff state, validation
//             bookkeeping, the Summary counters and history, and a fingerprint of what must
//             not change on resume (RunFingerprint: architecture, seed, batch size, precision,
//             loss).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lmtrain/train/fit_run.h"
#include "lmtrain/train/trainer.h"

namespace lmtrain::io {

template <typename T>
void write_checkpoint(const std::string& path, const TrainingState<T>& state,
                      const RunFingerprint& fingerprint);

// Throws InvalidArgument naming the file when it is not a checkpoint of this precision, or when
// its fingerprint differs from `fingerprint` (naming the field that differs).
template <typename T>
TrainingState<T> read_checkpoint(const std::string& path, const RunFingerprint& fingerprint);

// Where a checkpoint stands, read without a run to check it against: the epochs done and its
// "params" (widened to double, exactly).  For a front end that must act
// before the library resumes (lmtrain.torch: a PINN's draw after the last epoch needs that
// epoch's parameters); read_checkpoint checks the file again at the resume.  Throws
// InvalidArgument naming the file when it is not an lmtrain checkpoint.
struct CheckpointPosition {
  int epochs_done = 0;
  std::vector<double> params;
};
CheckpointPosition read_checkpoint_position(const std::string& path);

}  // namespace lmtrain::io
