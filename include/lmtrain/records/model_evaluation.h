// A model's figures on labelled data, as `lmtrain eval` (text and --json), the Summary's held-out
// set and Python's Model.evaluate report them — one definition:
// the loss as training reported it (on standardized targets when training standardized them),
// and quality figures in the data's own units: classification — accuracy and the confusion
// matrix (rows: true class, columns: predicted); regression — MSE per output averaged, and
// R² = 1 − SS_res/SS_tot over all outputs.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "lmtrain/backend/device.h"
#include "lmtrain/records/model_file.h"

namespace lmtrain::io {

// The network's outputs (rows × outputs, row-major) for `rows` rows of inputs `x` in the data's
// units: the inputs standardized as in training (in double, rounded once to the model's stored
// precision), the forward pass in that precision on `device`; the outputs in the units the model
// trained in (undo_target_normalization gives the data's, apply_output_link probabilities).
// The one prediction of `lmtrain predict`, `lmtrain eval` and Python's Model.predict/evaluate.
// A CPU model without input standardization reads `x` in place when S is its precision.
template <typename S>
std::vector<double> model_outputs(const ModelFile& model, std::span<const S> x, std::size_t rows,
                                  const DeviceChoice& device = {});

struct Metrics {
  bool classification = false;
  std::size_t samples = 0;
  double accuracy = 0;
  std::vector<std::vector<std::size_t>> confusion;  // [true][predicted]
  double mse = 0;
  double r2 = 0;
  std::string describe() const;
  std::string confusion_table() const;
  // {"description", "samples", "accuracy" and "confusion" | "mse" and "r2"}: the fields of
  // summary.json's held_out and of `lmtrain eval --json`.
  nlohmann::json to_json(const std::string& description) const;
};

// `outputs` and `targets` are samples × cols, row-major.  For classification the targets are
// one-hot (or probability) rows and the predicted class is the arg-max output.
Metrics compute_metrics(const std::vector<double>& outputs, const std::vector<double>& targets,
                        std::size_t cols, bool classification);

// The loss and the metrics of a model on `rows` samples: `z` the network's outputs (rows ×
// outputs, in the units it was trained in: standardized targets when it standardized them),
// `targets` in the data's own units (classification: one-hot rows).
struct ModelEvaluation {
  double loss = 0;
  bool loss_on_standardized_targets = false;
  Metrics metrics;
  // Metrics::to_json with "loss", "loss_name", "loss_on_standardized_targets" and, for a
  // classifier, "classes" (its names, or the indices as text).
  nlohmann::json to_json(const ModelFile& model, const std::string& description) const;
};
ModelEvaluation evaluate_outputs(const ModelFile& model, std::vector<double> z,
                                 const std::vector<double>& targets, std::size_t rows);

}  // namespace lmtrain::io
