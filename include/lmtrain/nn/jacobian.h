// The Jacobian engine: one forward pass that keeps activations, residuals and seeds for a batch,
// then exact Jacobian rows for any slice of its samples by structural reverse mode.
// Row b·R + k of J is ∂r_{b,k}/∂θ (for the exact cross-entropy, row k of the GGN factor L times
// ∂z_b/∂θ); columns follow the flat parameter order.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lmtrain/core/timer.h"
#include "lmtrain/nn/loss.h"
#include "lmtrain/nn/sequential.h"

namespace lmtrain {

template <typename T>
class JacobianEngine {
 public:
  JacobianEngine(const Sequential<T>& model, const Loss<T>& loss);

  std::size_t num_params() const { return model_.num_params(); }
  Backend<T>& model_backend() const { return backend_; }
  const Sequential<T>& model() const { return model_; }
  const Loss<T>& loss() const { return loss_; }
  std::size_t residuals_per_sample() const { return loss_.residuals_per_sample(); }

  // Sizes the buffers for batches of up to `batch` samples and slices of up to `slice` samples.
  void reserve(std::size_t batch, std::size_t slice);
  // Frees the slice-sized buffers (an out-of-memory halving sizes them again, smaller).
  void release_slices();

  // Elements it allocates, for the memory plan: independent of the slice (two sets of
  // activations — the linearization's and the trial's —, residuals and seeds of a batch, and the
  // seeds and F beside residuals_at's residuals when it is used), and per slice sample (two buffers
  // of seed rows as wide as the widest layer).
  static std::size_t fixed_elements(const Sequential<T>& model, std::size_t batch,
                                    std::size_t residuals_per_sample, bool trial_residuals) {
    const std::size_t m = batch * residuals_per_sample;
    return 2 * batch * model.activation_floats_per_sample() + m + m * model.outputs() +
           (trial_residuals ? m * model.outputs() + sizeof(double) / sizeof(T) : 0);
  }
  static std::size_t slice_sample_elements(const Sequential<T>& model,
                                           std::size_t residuals_per_sample) {
    return 2 * residuals_per_sample * model.max_width();
  }

  // Forward pass, residuals and seeds of a batch (x: batch × inputs, y: batch × outputs, both
  // device pointers that must stay valid until the next call).  Returns the objective F.
  double linearize(const T* params, const T* x, const T* y, std::size_t batch);
  // The same with F left on the device at `objective` (one double) instead of read back.
  void linearize_into(const T* params, const T* x, const T* y, std::size_t batch,
                      double* objective);

  std::size_t batch() const { return batch_; }
  // cross_entropy_sampled: the next linearization draws with key + 1 (each one counts up from
  // there).  The Trainer sets it from its rank and step count, so that ranks draw independently
  // and a resumed or retried step draws what the uninterrupted run would.
  void set_draw_key(std::uint64_t key) { draw_key_ = key; }
  std::uint64_t draw_key() const { return draw_key_; }
  // Marks the current batch empty (a rank whose shard of a batch has no samples).
  void clear_batch() { batch_ = 0; }
  // Residuals of the current batch (batch·R), valid after linearize.
  const T* residuals() const { return residuals_.data(); }
  // Writes rows of samples [first, first + count) of the current batch into j (count·R × n,
  // leading dimension ldj ≥ n).
  void jacobian_rows(const T* params, std::size_t first, std::size_t count, T* j, std::size_t ldj);

  // Objective F at other parameters on the current batch (a trial step): forward only.
  double objective(const T* params);
  // The same with F left on the device at `result`.
  void objective_into(const T* params, double* result);
  // Residuals of the current batch at other parameters (batch·R values into r), without reading
  // F there.  Leaves the linearization (activations, residuals, seeds) untouched.
  void residuals_at(const T* params, T* r);
  // What objective_into and residuals_at queue depends on besides their arguments — the batch
  // (x, y, its size), the residuals and the buffers the trial pass writes, the draws of
  // cross_entropy_sampled — for a recording of that work (LinearizationSource::evaluation_key).
  // nullopt where a layer allocates for itself (a convolution's columns).
  std::optional<std::vector<std::uintptr_t>> evaluation_key() const;

 private:
  // The forward pass of linearize(), keeping what jacobian_rows needs; returns the outputs z.
  const T* forward_batch(const T* params, const T* x, const T* y, std::size_t batch);

  const Sequential<T>& model_;
  const Loss<T>& loss_;
  Backend<T>& backend_;
  ForwardState<T> state_;
  ForwardState<T> trial_state_;
  DeviceBuffer<T> residuals_;
  DeviceBuffer<T> seeds_;
  DeviceBuffer<T> trial_seeds_;           // residuals_at's seeds (unused, but the loss writes them)
  DeviceBuffer<double> trial_objective_;  // … and its F (likewise: never read)
  DeviceBuffer<T> g_a_;
  DeviceBuffer<T> g_b_;
  std::size_t slice_capacity_ = 0;
  const T* x_ = nullptr;
  const T* y_ = nullptr;
  std::size_t batch_ = 0;
  // Counts linearizations: the key of cross_entropy_sampled's draws, which residuals_at reuses
  // so that its residuals are those of the linearization's rows.
  std::uint64_t draw_key_ = 0;
};

}  // namespace lmtrain
