// 2-D max and average pooling on NCHW samples (PyTorch's MaxPool2d / AvgPool2d with floor mode;
// average pooling counts padding as zeros).  No parameters.
//   max      forward keeps, per output, the flat index of its window's maximum (saved, stored as
//            T); backward routes each seed row to those inputs: G_in[r, argmax[o]] += G_out[r, o].
//   average  backward spreads each seed over its window: G_in[r, i] += G_out[r, o] / (kh·kw).
#pragma once

#include "lmtrain/core/image_shape.h"
#include "lmtrain/nn/layer.h"

namespace lmtrain {

enum class PoolKind { kMax, kAverage };

template <typename T>
class Pool2d final : public Layer<T> {
 public:
  // Throws InvalidArgument for max pooling in float over more than 2²⁴ values per sample, whose
  // indices a float cannot hold exactly.
  Pool2d(PoolKind kind, ImageShape input, Window2d window);

  PoolKind kind() const { return kind_; }
  const WindowGeometry& geometry() const { return geometry_; }

  std::string describe() const override;
  std::size_t inputs() const override { return geometry_.in_size(); }
  std::size_t outputs() const override { return geometry_.channels * geometry_.out_spatial(); }
  std::size_t saved_per_sample() const override { return kind_ == PoolKind::kMax ? outputs() : 0; }
  void forward(Backend<T>& backend, const T* params, const T* in, std::size_t batch, T* out,
               T* saved) const override;
  T* backward(Backend<T>& backend, const T* params, const T* saved, std::size_t samples,
              std::size_t group, T* g_out, T* g_in) const override;

 private:
  PoolKind kind_;
  WindowGeometry geometry_;
};

}  // namespace lmtrain
