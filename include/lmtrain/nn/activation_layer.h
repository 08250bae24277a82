// Elementwise activation layer; keeps φ'(z) from the forward pass so backward is one scaling.
#pragma once

#include "lmtrain/nn/layer.h"

namespace lmtrain {

template <typename T>
class ActivationLayer final : public Layer<T> {
 public:
  ActivationLayer(Activation f, std::size_t width) : f_(f), width_(width) {}

  Activation function() const { return f_; }
  std::string describe() const override;
  std::size_t inputs() const override { return width_; }
  std::size_t outputs() const override { return width_; }
  std::size_t saved_per_sample() const override { return width_; }
  void forward(Backend<T>& backend, const T* params, const T* in, std::size_t batch, T* out,
               T* saved) const override;
  T* backward(Backend<T>& backend, const T* params, const T* saved, std::size_t samples,
              std::size_t group, T* g_out, T* g_in) const override;

 private:
  Activation f_;
  std::size_t width_;
};

}  // namespace lmtrain
