#include "lmtrain/nn/sequential.h"

#include <algorithm>

#include "lmtrain/nn/activation_layer.h"
#include "lmtrain/nn/conv2d.h"
#include "lmtrain/nn/dense.h"
#include "lmtrain/nn/flatten.h"
#include "lmtrain/nn/pool2d.h"

namespace lmtrain {

template <typename T>
Sequential<T>::Sequential(const ModelSpec& spec, Backend<T>& backend)
    : spec_(spec), backend_(backend) {
  spec_.validate();
  const std::vector<ImageShape> shapes = spec_.output_shapes();
  ImageShape shape = spec_.input_shape();
  max_width_ = shape.size();
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const LayerSpec& l = spec_.layers()[i];
    switch (l.kind) {
      case LayerSpec::Kind::kDense:
        layers_.push_back(std::make_unique<Dense<T>>(shape.size(), l.units));
        break;
      case LayerSpec::Kind::kActivation:
        layers_.push_back(std::make_unique<ActivationLayer<T>>(l.activation, shape.size()));
        break;
      case LayerSpec::Kind::kConv2d:
        layers_.push_back(
            std::make_unique<Conv2d<T>>(shape, l.channels, l.window, l.bias,
                                        Conv2d<T>::workspace_cap_for(backend.device_kind())));
        break;
      case LayerSpec::Kind::kMaxPool2d:
        layers_.push_back(std::make_unique<Pool2d<T>>(PoolKind::kMax, shape, l.window));
        break;
      case LayerSpec::Kind::kAvgPool2d:
        layers_.push_back(std::make_unique<Pool2d<T>>(PoolKind::kAverage, shape, l.window));
        break;
      case LayerSpec::Kind::kFlatten:
        layers_.push_back(std::make_unique<Flatten<T>>(shape.size()));
        break;
    }
    shape = shapes[i];
    layers_.back()->set_param_offset(num_params_);
    num_params_ += layers_.back()->num_params();
    max_width_ = std::max(max_width_, layers_.back()->outputs());
  }
}

template <typename T>
std::size_t Sequential<T>::workspace_elements() const {
  std::size_t elements = 0;
  for (const auto& l : layers_) elements += l->workspace_elements();
  return elements;
}

template <typename T>
std::size_t Sequential<T>::activation_floats_per_sample() const {
  std::size_t floats = 0;
  for (const auto& l : layers_) floats += l->outputs() + l->saved_per_sample();
  return floats;
}

template <typename T>
std::vector<T> Sequential<T>::initial_parameters(Init init, std::uint64_t seed) const {
  std::vector<T> params(num_params_);
  Rng rng(seed);
  for (const auto& l : layers_)
    l->initialize(std::span<T>(params.data() + l->param_offset(), l->num_params()), init, rng);
  return params;
}

template <typename T>
void Sequential<T>::reserve(ForwardState<T>& state, std::size_t batch) const {
  if (state.capacity >= batch && state.outputs.size() == layers_.size()) return;
  state.outputs.clear();
  state.saved.clear();
  for (const auto& l : layers_) {
    state.outputs.push_back(backend_.allocate(batch * l->outputs()));
    state.saved.push_back(backend_.allocate(batch * l->saved_per_sample()));
  }
  state.capacity = batch;
}

template <typename T>
const T* Sequential<T>::forward(const T* params, const T* x, std::size_t batch,
                                ForwardState<T>& state, bool keep_for_backward) const {
  reserve(state, batch);
  const T* in = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer<T>& l = *layers_[i];
    T* saved = keep_for_backward && l.saved_per_sample() > 0 ? state.saved[i].data() : nullptr;
    l.forward(backend_, params + l.param_offset(), in, batch, state.outputs[i].data(), saved);
    in = state.outputs[i].data();
  }
  return in;
}

template class Sequential<float>;
template class Sequential<double>;

}  // namespace lmtrain
