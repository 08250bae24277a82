// Architecture of a sequential network, independent of precision and device: what a config file,
// a model file's metadata and the C++ API all describe.  Sequential<T> instantiates it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lmtrain/core/activation.h"

namespace lmtrain {

// Parameter initialization of Dense layers (fan_in = inputs, fan_out = units):
//   torch    W, b ~ U(−1/√fan_in, 1/√fan_in)  — PyTorch nn.Linear's default
//            (kaiming_uniform with a = √5 gives exactly this bound)
//   glorot   W ~ U(−√(6/(fan_in+fan_out)), +√(6/(fan_in+fan_out))), b = 0  (Glorot & Bengio 2010)
//   he       W ~ N(0, 2/fan_in), b = 0                                     (He et al. 2015)
enum class Init { kTorch, kGlorot, kHe };

std::string to_string(Init init);
// Throws InvalidArgument naming the accepted values.
Init parse_init(const std::string& name);

struct LayerSpec {
  enum class Kind { kDense, kActivation };
  Kind kind = Kind::kDense;
  std::size_t units = 0;                        // kDense
  Activation activation = Activation::kIdentity;  // kActivation
};

class ModelSpec {
 public:
  ModelSpec() = default;
  explicit ModelSpec(std::size_t inputs) : inputs_(inputs) {}

  // Builder: ModelSpec(1).dense(20).activation(Activation::kTanh).dense(1).
  ModelSpec& dense(std::size_t units);
  ModelSpec& activation(Activation f);

  // inputs → hidden[0] → … → outputs, `hidden_activation` after every hidden Dense layer.
  static ModelSpec mlp(std::size_t inputs, const std::vector<std::size_t>& hidden,
                       std::size_t outputs, Activation hidden_activation);

  std::size_t inputs() const { return inputs_; }
  std::size_t outputs() const;
  std::size_t num_params() const;
  const std::vector<LayerSpec>& layers() const { return layers_; }
  // "1-20-1 tanh (61 parameters)"-style one-line description.
  std::string describe() const;
  // Throws InvalidArgument when the spec cannot be built (no layers, zero sizes, …).
  void validate() const;

 private:
  std::size_t inputs_ = 0;
  std::vector<LayerSpec> layers_;
};

}  // namespace lmtrain
