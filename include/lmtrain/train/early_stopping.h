// Validation-based early stopping, MATLAB trainlm's max_fail: after every epoch the validation
// loss either sets a new best (whose parameters are kept on the device) or counts a failure;
// max_validation_failures consecutive failures stop training, and the best parameters are
// restored at the end (TrainerOptions::restore_best).
#pragma once

#include "lmtrain/backend/linear_algebra.h"
#include "lmtrain/train/summary.h"

namespace lmtrain {

template <typename T>
class EarlyStopping {
 public:
  EarlyStopping(LinearAlgebra<T>& backend, std::size_t n, int max_failures)
      : backend_(backend), n_(n), max_failures_(max_failures), best_(backend.allocate(n)) {}

  // Before the first epoch: θ is the best so far, with validation loss `loss`.
  void start(const T* theta, double loss, TrainingProgress& progress);
  // After `epoch` with validation loss `loss` at θ: a new best (kept), or one more failure.
  // Returns true when the failures reach max_validation_failures (the caller stops).
  bool update(int epoch, double loss, const T* theta, TrainingProgress& progress);
  // The best parameters back into θ when they beat the final ones; true if it did.
  bool restore(T* theta, const TrainingProgress& progress);

  const T* best() const { return best_.data(); }
  T* best() { return best_.data(); }
  int failures() const { return failures_; }
  void set_failures(int failures) { failures_ = failures; }

 private:
  LinearAlgebra<T>& backend_;
  std::size_t n_;
  int max_failures_;
  int failures_ = 0;
  DeviceBuffer<T> best_;
};

}  // namespace lmtrain
