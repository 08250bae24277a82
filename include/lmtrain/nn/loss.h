// A loss bound to a backend: residual definition, objective and reported value.  The formulas are
// in core/loss_kind.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/loss_kind.h"

namespace lmtrain {

struct LossOptions {
  LossKind kind = LossKind::kMse;
  // Per-output weights of mse (empty: all ones).  Must be positive and finite.
  std::vector<double> output_weights;
  // Transition point δ of huber (PyTorch default 1).
  double huber_delta = 1.0;
  // Throws InvalidArgument naming the field and the constraint.
  void validate(std::size_t outputs) const;
  // The options set away from their defaults that `kind` does not read (huber_delta without
  // huber), one line each as solve/ignored_options.h's; Trainer::fit adds them to the Summary's
  // options_ignored.
  std::vector<std::string> ignored_options() const;
  // Whether a front end standardizes the targets when its user asked for it: bce's targets are
  // probabilities (0/1 labels or values in [0, 1]) and are never standardized.
  bool standardizes_targets(bool requested) const { return requested && kind != LossKind::kBce; }
  // Throws InvalidArgument naming `what`, the sample and the column of the first target outside
  // the loss's range (bce: [0, 1]); other losses take any finite target.
  void check_targets(const float* y, std::size_t samples, std::size_t outputs,
                     std::string_view what) const;
  void check_targets(const double* y, std::size_t samples, std::size_t outputs,
                     std::string_view what) const;
};

template <typename T>
class Loss {
 public:
  // `sample_weighted`: each sample's target row is its targets and then its weight
  // (core/loss_kind.h's sample weights): the batches this loss reads hold target_columns() values
  // per sample.
  Loss(const LossOptions& options, std::size_t outputs, Backend<T>& backend,
       bool sample_weighted = false);

  LossKind kind() const { return params_.kind; }
  std::size_t outputs() const { return outputs_; }
  bool sample_weighted() const { return params_.sample_weighted; }
  std::size_t target_columns() const {
    return lmtrain::target_columns(outputs_, params_.sample_weighted);
  }
  std::size_t residuals_per_sample() const {
    return lmtrain::residuals_per_sample(params_.kind, outputs_);
  }
  const LossParams<T>& params() const { return params_; }

  // Objective F of a batch (see core/loss_kind.h).
  double objective(std::size_t batch, const T* z, const T* y) const {
    return backend_.loss_objective(params_, batch, outputs_, z, y);
  }
  // Residuals, seed rows and F of a batch.  cross_entropy_sampled's draws are a function of
  // `draw_key` and the sample's index: the same key gives the same rows.
  double linearize(std::size_t batch, const T* z, const T* y, T* r, T* seeds,
                   std::uint64_t draw_key = 0) const {
    LossParams<T> params = params_;
    params.draw_key = draw_key;
    return backend_.loss_linearize(params, batch, outputs_, z, y, r, seeds);
  }
  // The same with F left on the device at `result` (one double, read with others later).
  void objective(std::size_t batch, const T* z, const T* y, double* result) const {
    backend_.loss_objective_into(params_, batch, outputs_, z, y, result);
  }
  void linearize(std::size_t batch, const T* z, const T* y, T* r, T* seeds, std::uint64_t draw_key,
                 double* result) const {
    LossParams<T> params = params_;
    params.draw_key = draw_key;
    backend_.loss_linearize_into(params, batch, outputs_, z, y, r, seeds, result);
  }
  // The loss users read (PyTorch's mean reduction) from the objective of `batch` samples.
  double reported(double objective, std::size_t batch) const;
  // The same of samples of total weight `weight` (a weighted mean).
  double reported_of_weight(double objective, double weight) const;

 private:
  std::size_t outputs_;
  Backend<T>& backend_;
  DeviceBuffer<T> weights_;
  LossParams<T> params_;
};

}  // namespace lmtrain
