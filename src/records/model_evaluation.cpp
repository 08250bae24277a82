#include "lmtrain/records/model_evaluation.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <span>
#include <type_traits>

#include "lmtrain/backend/backend.h"
#include "lmtrain/core/error.h"
#include "lmtrain/nn/loss.h"
#include "lmtrain/nn/sequential.h"
#include "lmtrain/train/predict.h"

namespace lmtrain::io {

Metrics compute_metrics(const std::vector<double>& outputs, const std::vector<double>& targets,
                        std::size_t cols, bool classification) {
  Metrics m;
  m.classification = classification;
  m.samples = cols ? outputs.size() / cols : 0;
  if (m.samples == 0) return m;
  if (classification) {
    m.confusion.assign(cols, std::vector<std::size_t>(cols, 0));
    std::size_t correct = 0;
    for (std::size_t s = 0; s < m.samples; ++s) {
      const auto row = [&](const std::vector<double>& v) {
        const auto begin = v.begin() + static_cast<long>(s * cols);
        return static_cast<std::size_t>(
            std::distance(begin, std::max_element(begin, begin + static_cast<long>(cols))));
      };
      const std::size_t truth = row(targets), predicted = row(outputs);
      ++m.confusion[truth][predicted];
      correct += truth == predicted ? 1 : 0;
    }
    m.accuracy = static_cast<double>(correct) / static_cast<double>(m.samples);
    return m;
  }
  std::vector<double> mean(cols, 0.0);
  for (std::size_t i = 0; i < targets.size(); ++i) mean[i % cols] += targets[i];
  for (auto& v : mean) v /= static_cast<double>(m.samples);
  double ss_res = 0, ss_tot = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    ss_res += (outputs[i] - targets[i]) * (outputs[i] - targets[i]);
    ss_tot += (targets[i] - mean[i % cols]) * (targets[i] - mean[i % cols]);
  }
  m.mse = ss_res / static_cast<double>(targets.size());
  m.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 0.0;
  return m;
}

std::string Metrics::describe() const {
  if (classification) return fmt::format("accuracy {:.4f} ({} samples)", accuracy, samples);
  return fmt::format("MSE {:.6e}, R² {:.6f} ({} samples)", mse, r2, samples);
}

nlohmann::json Metrics::to_json(const std::string& description) const {
  nlohmann::json j = {{"description", description}, {"samples", samples}};
  if (classification) {
    j["accuracy"] = accuracy;
    j["confusion"] = confusion;
  } else {
    j["mse"] = mse;
    j["r2"] = r2;
  }
  return j;
}

std::string Metrics::confusion_table() const {
  if (!classification) return {};
  std::string s = "confusion matrix (rows: true class, columns: predicted)\n      ";
  for (std::size_t c = 0; c < confusion.size(); ++c) s += fmt::format("{:>7}", c);
  s += "\n";
  for (std::size_t r = 0; r < confusion.size(); ++r) {
    s += fmt::format("{:>6}", r);
    for (std::size_t c = 0; c < confusion.size(); ++c) s += fmt::format("{:>7}", confusion[r][c]);
    s += "\n";
  }
  return s;
}

ModelEvaluation evaluate_outputs(const ModelFile& model, std::vector<double> z,
                                 const std::vector<double>& targets, std::size_t rows) {
  const std::size_t cols = model.architecture.outputs();
  if (z.size() != rows * cols || targets.size() != rows * cols || rows == 0)
    throw InvalidArgument(fmt::format(
        "evaluate: {} outputs and {} targets for {} rows of {} outputs; expected {} of each",
        z.size(), targets.size(), rows, cols, rows * cols));
  const bool classification = model.task == Task::kClassification;
  ModelEvaluation e;
  // The loss as training reported it: on normalized targets.
  std::vector<double> normalized_targets = targets;
  model.normalization.targets.apply(std::span<double>(normalized_targets));
  auto backend = make_cpu_backend<double>();
  LossOptions loss_options;
  const std::optional<LossKind> kind = parse_loss(model.loss);
  if (!kind) throw InvalidArgument(fmt::format("evaluate: unknown loss \"{}\"", model.loss));
  loss_options.kind = *kind;
  Loss<double> loss(loss_options, cols, *backend);
  e.loss = loss.reported(loss.objective(rows, z.data(), normalized_targets.data()), rows);
  e.loss_on_standardized_targets = model.normalization.normalizes_targets();
  if (!classification) undo_target_normalization<double>(model.normalization, z);
  e.metrics = compute_metrics(z, targets, cols, classification);
  return e;
}

nlohmann::json ModelEvaluation::to_json(const ModelFile& model,
                                        const std::string& description) const {
  nlohmann::json j = metrics.to_json(description);
  j["loss"] = loss;
  j["loss_name"] = model.loss;
  j["loss_on_standardized_targets"] = loss_on_standardized_targets;
  if (model.task == Task::kClassification) {
    std::vector<std::string> classes = model.class_names;
    for (std::size_t k = classes.size(); k < model.num_classes; ++k)
      classes.push_back(std::to_string(k));
    j["classes"] = classes;
  }
  return j;
}

namespace {

template <typename T, typename S>
std::vector<double> outputs_in(const ModelFile& model, std::span<const S> x, std::size_t rows,
                               const DeviceChoice& device) {
  const ModelSpec& spec = model.architecture;
  auto backend = make_backend<T>(device);
  const std::vector<T> params(model.parameters.begin(), model.parameters.end());
  std::vector<T> out;
  if constexpr (std::is_same_v<S, T>) {
    if (backend->device_kind() == DeviceKind::kCpu && !model.normalization.normalizes_inputs()) {
      const Sequential<T> net(spec, *backend);
      DeviceBuffer<T> theta = backend->allocate(params.size());
      backend->copy_from_host(params.data(), theta.data(), params.size());
      out = predict(net, theta.data(), x.data(), rows);
      return std::vector<double>(out.begin(), out.end());
    }
  }
  // Standardized in double, rounded to T once, through a block of whole rows at a time.
  std::vector<T> inputs(x.size());
  const std::size_t cols = std::max<std::size_t>(spec.inputs(), 1);
  const std::size_t block = cols * std::max<std::size_t>(1, 4096 / cols);
  std::vector<double> values;
  for (std::size_t first = 0; first < x.size(); first += block) {
    const std::size_t count = std::min(block, x.size() - first);
    values.assign(x.begin() + static_cast<std::ptrdiff_t>(first),
                  x.begin() + static_cast<std::ptrdiff_t>(first + count));
    apply_input_normalization<double>(model.normalization, values);
    std::transform(values.begin(), values.end(),
                   inputs.begin() + static_cast<std::ptrdiff_t>(first),
                   [](double v) { return static_cast<T>(v); });
  }
  out = predict(spec, params, inputs, *backend);
  return std::vector<double>(out.begin(), out.end());
}

}  // namespace

template <typename S>
std::vector<double> model_outputs(const ModelFile& model, std::span<const S> x, std::size_t rows,
                                  const DeviceChoice& device) {
  const ModelSpec& spec = model.architecture;
  if (x.size() != rows * spec.inputs())
    throw InvalidArgument(
        fmt::format("{} input values for {} rows, but the model {} takes {} "
                    "inputs per row",
                    x.size(), rows, spec.describe(), spec.inputs()));
  return model.parameter_dtype == ParameterDtype::kF32 ? outputs_in<float>(model, x, rows, device)
                                                       : outputs_in<double>(model, x, rows, device);
}

template std::vector<double> model_outputs<float>(const ModelFile&, std::span<const float>,
                                                  std::size_t, const DeviceChoice&);
template std::vector<double> model_outputs<double>(const ModelFile&, std::span<const double>,
                                                   std::size_t, const DeviceChoice&);

}  // namespace lmtrain::io
