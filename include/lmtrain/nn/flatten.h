// Flatten C×H×W → (C·H·W)×1×1, as PyTorch's nn.Flatten.  Samples are already flat in NCHW order,
// so forward is a copy and backward passes the seeds through unchanged; the layer exists so that
// shapes (and an exported PyTorch model) say what the network does.
#pragma once

#include "lmtrain/nn/layer.h"

namespace lmtrain {

template <typename T>
class Flatten final : public Layer<T> {
 public:
  explicit Flatten(std::size_t width) : width_(width) {}

  std::string describe() const override;
  std::size_t inputs() const override { return width_; }
  std::size_t outputs() const override { return width_; }
  void forward(Backend<T>& backend, const T* params, const T* in, std::size_t batch, T* out,
               T* saved) const override;
  T* backward(Backend<T>& backend, const T* params, const T* saved, std::size_t samples,
              std::size_t group, T* g_out, T* g_in) const override;

 private:
  std::size_t width_;
};

}  // namespace lmtrain
