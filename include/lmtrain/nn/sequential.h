// A sequential network instantiated for one precision on one backend.  Parameters are *not*
// owned here: they live in one flat device buffer owned by the caller (Trainer, tests), and every
// call takes a pointer to it, so a step, a backup or a restore is a single vector operation.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lmtrain/nn/layer.h"
#include "lmtrain/nn/model_spec.h"

namespace lmtrain {

// Activations kept by a forward pass: outputs of every layer and what backward needs.
template <typename T>
struct ForwardState {
  std::size_t capacity = 0;  // samples
  std::vector<DeviceBuffer<T>> outputs;
  std::vector<DeviceBuffer<T>> saved;
};

template <typename T>
class Sequential {
 public:
  Sequential(const ModelSpec& spec, Backend<T>& backend);

  const ModelSpec& spec() const { return spec_; }
  Backend<T>& backend() const { return backend_; }
  std::size_t num_params() const { return num_params_; }
  std::size_t inputs() const { return spec_.inputs(); }
  std::size_t outputs() const { return spec_.outputs(); }
  // Widest layer input or output, per sample (sizes the seed buffers of backward).
  std::size_t max_width() const { return max_width_; }
  // Floats a forward pass keeps per sample (layer outputs + saved), for the memory planner.
  std::size_t activation_floats_per_sample() const;
  // Scratch elements the layers allocate for themselves at most (convolution columns), whatever
  // the batch, for the memory planner.
  std::size_t workspace_elements() const;
  const std::vector<std::unique_ptr<Layer<T>>>& layers() const { return layers_; }

  // Seeded initial parameters (host), layer by layer in the flat order.
  std::vector<T> initial_parameters(Init init, std::uint64_t seed) const;

  // Allocates (or grows) `state` to hold `batch` samples.
  void reserve(ForwardState<T>& state, std::size_t batch) const;
  // Forward pass of `batch` samples x (batch × inputs); returns the output (batch × outputs),
  // which lives in `state`.  With keep_for_backward, also stores what backward needs.
  const T* forward(const T* params, const T* x, std::size_t batch, ForwardState<T>& state,
                   bool keep_for_backward) const;

 private:
  ModelSpec spec_;
  Backend<T>& backend_;
  std::vector<std::unique_ptr<Layer<T>>> layers_;
  std::size_t num_params_ = 0;
  std::size_t max_width_ = 0;
};

}  // namespace lmtrain
