// Architecture of a sequential network, independent of precision and device: what a config file,
// a model file's metadata and the C++ API all describe.  Sequential<T> instantiates it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lmtrain/core/activation.h"
#include "lmtrain/core/image_shape.h"
#include "lmtrain/core/parameter_groups.h"

namespace lmtrain {

// Parameter initialization of Dense layers (fan_in = inputs, fan_out = units) and of Conv2d
// layers (fan_in = in_channels·kh·kw, fan_out = out_channels·kh·kw, as torch.nn.init computes):
//   torch    W, b ~ U(−1/√fan_in, 1/√fan_in)  — PyTorch nn.Linear's and nn.Conv2d's default
//            (kaiming_uniform with a = √5 gives exactly this bound)
//   glorot   W ~ U(−√(6/(fan_in+fan_out)), +√(6/(fan_in+fan_out))), b = 0  (Glorot & Bengio 2010)
//   he       W ~ N(0, 2/fan_in), b = 0                                     (He et al. 2015)
enum class Init { kTorch, kGlorot, kHe };

std::string to_string(Init init);
// Throws InvalidArgument naming the accepted values.
Init parse_init(const std::string& name);

struct LayerSpec {
  enum class Kind { kDense, kActivation, kConv2d, kMaxPool2d, kAvgPool2d, kFlatten };
  Kind kind = Kind::kDense;
  std::size_t units = 0;                          // kDense: output features
  Activation activation = Activation::kIdentity;  // kActivation
  std::size_t channels = 0;                       // kConv2d: output channels
  Window2d window{};                              // kConv2d, kMaxPool2d, kAvgPool2d
  bool bias = true;                               // kConv2d: with a per-channel bias
};

// "dense", "activation", "conv2d", "max_pool2d", "avg_pool2d", "flatten".
std::string to_string(LayerSpec::Kind kind);

// A sequential network: an input shape and layers.  Samples are flat vectors in NCHW order
// (core/image_shape.h); ModelSpec(n) is the flat input n × 1 × 1, ModelSpec(ImageShape{c, h, w})
// an image.  Shapes are inferred layer by layer:
//   dense(u)            flat n×1×1 → u×1×1           (an image input needs flatten() first)
//   activation(f)       shape unchanged
//   conv2d(o, window)   C×H×W → o×Ho×Wo, Ho = ⌊(H + 2·pad_h − kernel_h) / stride_h⌋ + 1 (same for
//   W) max/avg_pool2d      C×H×W → C×Ho×Wo with the same formula (padding ≤ kernel / 2, as PyTorch)
//   flatten()           C×H×W → (C·H·W)×1×1, the identity on the flat layout
// Parameters per layer, in PyTorch's order: dense W (u × n) then b (u); conv2d W (o × C × kh × kw)
// then b (o) when bias is on.
class ModelSpec {
 public:
  ModelSpec() = default;
  explicit ModelSpec(std::size_t inputs) : input_shape_{inputs, 1, 1} {}
  explicit ModelSpec(ImageShape input) : input_shape_(input) {}

  // Builder: ModelSpec(1).dense(20).activation(Activation::kTanh).dense(1), or
  // ModelSpec(ImageShape{1, 28, 28}).conv2d(8, 4, 2).activation(Activation::kElu).flatten()....
  ModelSpec& dense(std::size_t units);
  ModelSpec& activation(Activation f);
  // Square kernel, stride and padding.
  ModelSpec& conv2d(std::size_t out_channels, std::size_t kernel, std::size_t stride = 1,
                    std::size_t padding = 0, bool bias = true);
  ModelSpec& conv2d(std::size_t out_channels, Window2d window, bool bias = true);
  // stride = 0 means stride = kernel, PyTorch's default for pooling.
  ModelSpec& max_pool2d(std::size_t kernel, std::size_t stride = 0);
  ModelSpec& max_pool2d(Window2d window);
  ModelSpec& avg_pool2d(std::size_t kernel, std::size_t stride = 0);
  ModelSpec& avg_pool2d(Window2d window);
  ModelSpec& flatten();

  // inputs → hidden[0] → … → outputs, `hidden_activation` after every hidden Dense layer.
  static ModelSpec mlp(std::size_t inputs, const std::vector<std::size_t>& hidden,
                       std::size_t outputs, Activation hidden_activation);

  const ImageShape& input_shape() const { return input_shape_; }
  std::size_t inputs() const { return input_shape_.size(); }
  // Output shape of every layer ([i] is layer i's), by the rules above.  On an invalid spec the
  // sizes that cannot be formed are 0; validate() says why.
  std::vector<ImageShape> output_shapes() const;
  std::size_t outputs() const;
  std::size_t num_params() const;
  // Parameters of layer i alone.
  std::size_t layer_params(std::size_t i) const;
  // The relevance groups above (throws InvalidArgument, as validate(), on an invalid spec).
  ParameterGroups relevance_groups() const;
  const std::vector<LayerSpec>& layers() const { return layers_; }
  // One line: "1-20-1 tanh (61 parameters)" for a flat network of dense and activation layers;
  // otherwise every layer with its output shape, e.g.
  // "1×28×28 → conv2d 8 k4 s2 → 8×13×13 → elu → … → dense 10 → 10 (1026 parameters)".
  std::string describe() const;
  // Throws InvalidArgument naming the layer index, its kind and the inconsistent sizes when the
  // spec cannot be built (no layers with parameters, zero sizes, a kernel larger than its padded
  // input, a dense layer on an image, …).
  void validate() const;

 private:
  ImageShape input_shape_{0, 1, 1};
  std::vector<LayerSpec> layers_;
};

}  // namespace lmtrain
