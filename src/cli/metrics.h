// Quality figures of predictions against targets, in the data's own units:
// classification — accuracy and the confusion matrix (rows: true class, columns: predicted);
// regression — MSE per output averaged, and R² = 1 − SS_res/SS_tot over all outputs.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lmtrain::cli {

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

}  // namespace lmtrain::cli
