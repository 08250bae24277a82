// A layer of a sequential network.  Besides the usual forward pass, each layer can
//   * propagate *row seeds* backward: G_out (rows × outputs, rows = samples × group, one row per
//     residual, no reduction over the batch) → G_in (rows × inputs), and
//   * write its block of the exact parameter Jacobian for those rows.
// This is structural reverse mode: one backward pass yields every Jacobian row at once.
//
// Designed to grow: physics-informed residuals will need input-derivative tangents carried through
// forward (Taylor mode) and back; they will travel as extra rows of the same buffers, so callers of
// forward/backward do not change.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/rng.h"
#include "lmtrain/nn/model_spec.h"

namespace lmtrain {

template <typename T>
class Layer {
 public:
  virtual ~Layer() = default;

  virtual std::string describe() const = 0;
  virtual std::size_t inputs() const = 0;   // per-sample input width
  virtual std::size_t outputs() const = 0;  // per-sample output width
  virtual std::size_t num_params() const { return 0; }

  // Offset of this layer's parameters in the model's flat parameter buffer.
  std::size_t param_offset() const { return param_offset_; }
  void set_param_offset(std::size_t offset) { param_offset_ = offset; }

  // Writes initial values of this layer's parameters (host memory, num_params() values).
  virtual void initialize(std::span<T> /*params*/, Init /*init*/, Rng& /*rng*/) const {}

  // Elements per sample the forward pass keeps for backward (e.g. φ'(z) of an activation).
  virtual std::size_t saved_per_sample() const { return 0; }

  // Device elements of scratch the layer allocates for itself at most (im2col columns of a
  // convolution), whatever the batch: a fixed cost for the memory planner.
  virtual std::size_t workspace_elements() const { return 0; }

  // out (batch × outputs) from in (batch × inputs).  `params` points at this layer's first
  // parameter.  When `saved` is not null, also stores what backward needs.
  virtual void forward(Backend<T>& backend, const T* params, const T* in, std::size_t batch, T* out,
                       T* saved) const = 0;

  // Seeds of `samples`·group rows: returns the buffer holding G_in — either g_out, updated in
  // place, or g_in.  `saved` points at the first sample of the slice.
  virtual T* backward(Backend<T>& backend, const T* params, const T* saved, std::size_t samples,
                      std::size_t group, T* g_out, T* g_in) const = 0;

  // Writes J[r, param_offset() …] for the slice's rows given G_out and the layer's input
  // activations `in` (first sample of the slice).  `j` points at the slice's first row, column 0.
  virtual void assemble_jacobian(Backend<T>& /*backend*/, const T* /*in*/, std::size_t /*samples*/,
                                 std::size_t /*group*/, const T* /*g_out*/, T* /*j*/,
                                 std::size_t /*ldj*/) const {}

 private:
  std::size_t param_offset_ = 0;
};

}  // namespace lmtrain
