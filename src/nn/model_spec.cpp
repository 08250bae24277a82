#include "lmtrain/nn/model_spec.h"

#include <fmt/format.h>

#include "lmtrain/core/error.h"

namespace lmtrain {

std::string to_string(Init init) {
  switch (init) {
    case Init::kTorch: return "torch";
    case Init::kGlorot: return "glorot";
    case Init::kHe: return "he";
  }
  return "unknown";
}

Init parse_init(const std::string& name) {
  if (name == "torch") return Init::kTorch;
  if (name == "glorot") return Init::kGlorot;
  if (name == "he") return Init::kHe;
  throw InvalidArgument(
      fmt::format("init = \"{}\" is not known; expected one of \"torch\", \"glorot\", \"he\"", name));
}

ModelSpec& ModelSpec::dense(std::size_t units) {
  layers_.push_back({LayerSpec::Kind::kDense, units, Activation::kIdentity});
  return *this;
}

ModelSpec& ModelSpec::activation(Activation f) {
  layers_.push_back({LayerSpec::Kind::kActivation, 0, f});
  return *this;
}

ModelSpec ModelSpec::mlp(std::size_t inputs, const std::vector<std::size_t>& hidden,
                         std::size_t outputs, Activation hidden_activation) {
  ModelSpec spec(inputs);
  for (std::size_t h : hidden) spec.dense(h).activation(hidden_activation);
  spec.dense(outputs);
  return spec;
}

std::size_t ModelSpec::outputs() const {
  std::size_t width = inputs_;
  for (const auto& l : layers_)
    if (l.kind == LayerSpec::Kind::kDense) width = l.units;
  return width;
}

std::size_t ModelSpec::num_params() const {
  std::size_t width = inputs_, n = 0;
  for (const auto& l : layers_) {
    if (l.kind == LayerSpec::Kind::kDense) {
      n += l.units * width + l.units;
      width = l.units;
    }
  }
  return n;
}

std::string ModelSpec::describe() const {
  std::string sizes = fmt::format("{}", inputs_);
  std::string acts;
  for (const auto& l : layers_) {
    if (l.kind == LayerSpec::Kind::kDense) {
      sizes += fmt::format("-{}", l.units);
    } else {
      if (!acts.empty()) acts += ",";
      acts += std::string(to_string(l.activation));
    }
  }
  return fmt::format("{} {}({} parameters)", sizes, acts.empty() ? "" : acts + " ", num_params());
}

void ModelSpec::validate() const {
  if (inputs_ == 0) throw InvalidArgument("model: inputs = 0; a network needs at least one input");
  bool any_dense = false;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    if (layers_[i].kind == LayerSpec::Kind::kDense) {
      any_dense = true;
      if (layers_[i].units == 0)
        throw InvalidArgument(fmt::format("model: layer {} is dense with units = 0; expected ≥ 1", i));
    }
  }
  if (!any_dense)
    throw InvalidArgument("model: no dense layer; a network needs at least one to have parameters");
}

}  // namespace lmtrain
