// Elementwise activation functions.  The enum lives in core/ because both the backends (which
// run the kernels) and nn/ (which builds layers) need it.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace lmtrain {

//  identity  φ(z) = z
//  tanh      φ(z) = tanh z                          φ' = 1 − φ²
//  sigmoid   φ(z) = 1 / (1 + e^−z)                  φ' = φ(1 − φ)
//  relu      φ(z) = max(z, 0)                       φ' = [z > 0]
//  elu       φ(z) = z if z > 0 else e^z − 1 (α = 1, PyTorch's default)
//  gelu      φ(z) = z Φ(z), Φ the standard normal CDF (PyTorch's exact, non-tanh GELU)
//  softplus  φ(z) = log(1 + e^z) (β = 1; evaluated stably)    φ' = sigmoid(z)
//  sin       φ(z) = sin z                           φ' = cos z
enum class Activation { kIdentity, kTanh, kSigmoid, kRelu, kElu, kGelu, kSoftplus, kSin };

inline constexpr std::array<std::pair<Activation, std::string_view>, 8> kActivationNames = {{
    {Activation::kIdentity, "identity"},
    {Activation::kTanh, "tanh"},
    {Activation::kSigmoid, "sigmoid"},
    {Activation::kRelu, "relu"},
    {Activation::kElu, "elu"},
    {Activation::kGelu, "gelu"},
    {Activation::kSoftplus, "softplus"},
    {Activation::kSin, "sin"},
}};

constexpr std::string_view to_string(Activation a) {
  for (const auto& [kind, name] : kActivationNames)
    if (kind == a) return name;
  return "unknown";
}

inline std::optional<Activation> parse_activation(std::string_view name) {
  for (const auto& [kind, n] : kActivationNames)
    if (n == name) return kind;
  return std::nullopt;
}

}  // namespace lmtrain
