// Fully connected layer z = a Wᵀ + b, W stored (out × in) row-major then b, as PyTorch orders them.
#pragma once

#include "lmtrain/nn/layer.h"

namespace lmtrain {

template <typename T>
class Dense final : public Layer<T> {
 public:
  Dense(std::size_t inputs, std::size_t outputs) : in_(inputs), out_(outputs) {}

  std::string describe() const override;
  std::size_t inputs() const override { return in_; }
  std::size_t outputs() const override { return out_; }
  std::size_t num_params() const override { return out_ * in_ + out_; }
  void initialize(std::span<T> params, Init init, Rng& rng) const override;
  void forward(Backend<T>& backend, const T* params, const T* in, std::size_t batch, T* out,
               T* saved) const override;
  T* backward(Backend<T>& backend, const T* params, const T* saved, std::size_t samples,
              std::size_t group, T* g_out, T* g_in) const override;
  void assemble_jacobian(Backend<T>& backend, const T* in, std::size_t samples, std::size_t group,
                         const T* g_out, T* j, std::size_t ldj) const override;

 private:
  std::size_t in_;
  std::size_t out_;
};

}  // namespace lmtrain
