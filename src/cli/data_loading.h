// From the [data] section of a run configuration to training, validation and test sets:
// reading each source (io/ readers), selecting input and target columns, class labels to
// one-hot rows, splits by fraction, and standardization fitted on the training set.
#pragma once

#include <optional>
#include <vector>

#include "lmtrain/io/numeric_table.h"
#include "lmtrain/train/dataset.h"
#include "run_config.h"

namespace lmtrain::cli {

// Inputs and targets of one source, row-aligned.  For classification, targets are one-hot rows.
struct LabeledTable {
  io::NumericTable inputs;
  io::NumericTable targets;
  std::string description;  // "train.csv (800 rows)"
};

// Column-wise affine normalization x' = (x − mean) / scale; empty vectors mean none.
struct Standardization {
  std::vector<double> mean;
  std::vector<double> scale;
  bool empty() const { return mean.empty(); }
  // Fits mean and standard deviation per column (a constant column gets scale 1).
  static Standardization fit(const io::NumericTable& table);
  void apply(io::NumericTable& table) const;
  void invert(std::vector<double>& values, std::size_t cols) const;
};

struct PreparedData {
  LabeledTable train;
  std::optional<LabeledTable> validation;
  std::optional<LabeledTable> test;
  std::size_t classes = 0;  // classification
  Standardization input_norm;
  Standardization target_norm;
};

// Reads one source; `classes` = 0 infers the count from the labels (for classification).
LabeledTable load_source(const DataSource& source, Task task, std::size_t classes);

// Everything `lmtrain fit` needs: sources read, splits made (seeded), normalization fitted on the
// training rows and applied to every set.  `expected_inputs` (0: any) is the model's input width.
PreparedData prepare_data(const RunConfig& config, std::size_t expected_inputs);

// Converts to the trainer's dataset type.
template <typename T>
Dataset<T> to_dataset(const LabeledTable& table);

}  // namespace lmtrain::cli
