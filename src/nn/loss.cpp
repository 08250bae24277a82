#include "lmtrain/nn/loss.h"

#include <fmt/format.h>

#include <cmath>

#include "lmtrain/core/error.h"

namespace lmtrain {

void LossOptions::validate(std::size_t outputs) const {
  if (!output_weights.empty()) {
    if (kind != LossKind::kMse)
      throw InvalidArgument(fmt::format(
          "LossOptions::output_weights is set but LossOptions::kind = \"{}\"; per-output weights "
          "apply to \"mse\" only",
          to_string(kind)));
    if (output_weights.size() != outputs)
      throw InvalidArgument(
          fmt::format("LossOptions::output_weights has {} values but the model has {} outputs; "
                      "give one weight per output",
                      output_weights.size(), outputs));
    for (std::size_t i = 0; i < output_weights.size(); ++i)
      if (!(output_weights[i] > 0) || !std::isfinite(output_weights[i]))
        throw InvalidArgument(
            fmt::format("LossOptions::output_weights[{}] = {}; weights must be positive and finite",
                        i, output_weights[i]));
  }
  if (kind == LossKind::kHuber && (!(huber_delta > 0) || !std::isfinite(huber_delta)))
    throw InvalidArgument(
        fmt::format("LossOptions::huber_delta = {}; it must be positive and finite", huber_delta));
  if (is_softmax_loss(kind) && outputs < 2)
    throw InvalidArgument(fmt::format(
        "LossOptions::kind = \"{}\" needs at least 2 outputs (one logit per class) but the model "
        "has {}; for a binary target with one output use LossOptions::kind = \"bce\"",
        to_string(kind), outputs));
}

std::vector<std::string> LossOptions::ignored_options() const {
  std::vector<std::string> lines;
  if (huber_delta != LossOptions{}.huber_delta && kind != LossKind::kHuber)
    lines.push_back(
        fmt::format("LossOptions::huber_delta = {}: ignored, the loss is {} (huber uses it)",
                    huber_delta, to_string(kind)));
  return lines;
}

namespace {

template <typename T>
void check_probabilities(LossKind kind, const T* y, std::size_t samples, std::size_t outputs,
                         std::string_view what) {
  if (kind != LossKind::kBce) return;
  for (std::size_t i = 0; i < samples * outputs; ++i)
    if (!(y[i] >= 0 && y[i] <= 1))
      throw InvalidArgument(fmt::format(
          "{}: target of sample {} column {} is {}; LossOptions::kind = \"bce\" takes targets in "
          "[0, 1] (0/1 labels or probabilities); for other targets use \"mse\", for classes "
          "the classification task",
          what, i / outputs, i % outputs, y[i]));
}

}  // namespace

void LossOptions::check_targets(const float* y, std::size_t samples, std::size_t outputs,
                                std::string_view what) const {
  check_probabilities(kind, y, samples, outputs, what);
}

void LossOptions::check_targets(const double* y, std::size_t samples, std::size_t outputs,
                                std::string_view what) const {
  check_probabilities(kind, y, samples, outputs, what);
}

template <typename T>
Loss<T>::Loss(const LossOptions& options, std::size_t outputs, Backend<T>& backend,
              bool sample_weighted)
    : outputs_(outputs), backend_(backend) {
  options.validate(outputs);
  params_.kind = options.kind;
  params_.huber_delta = options.huber_delta;
  params_.sample_weighted = sample_weighted;
  if (!options.output_weights.empty()) {
    std::vector<T> w(options.output_weights.begin(), options.output_weights.end());
    weights_ = backend.allocate(w.size());
    // copy_from_host reads `w` before returning (backend.h), so the temporary may go at once.
    backend.copy_from_host(w.data(), weights_.data(), w.size());
    params_.weights = weights_.data();
  }
}

template <typename T>
double Loss<T>::reported(double objective, std::size_t batch) const {
  return reported_loss(params_.kind, objective, batch, outputs_);
}

template <typename T>
double Loss<T>::reported_of_weight(double objective, double weight) const {
  return reported_loss_of_weight(params_.kind, objective, weight, outputs_);
}

template class Loss<float>;
template class Loss<double>;

}  // namespace lmtrain
