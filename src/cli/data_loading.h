// From the [data] section of a run configuration to training, validation and test sets: each
// source read by io/table.h, splits by fraction (seeded), and the standardization fitted on the
// training rows (io/standardization.h) applied to every set.
#pragma once

#include <optional>
#include <vector>

#include "lmtrain/io/table.h"
#include "lmtrain/records/model_file.h"
#include "lmtrain/train/dataset.h"
#include "run_config.h"

namespace lmtrain::cli {

struct PreparedData {
  io::LabeledTable train;
  std::optional<io::LabeledTable> validation;
  std::optional<io::LabeledTable> test;
  std::size_t classes = 0;               // classification
  std::vector<std::string> class_names;  // the training CSV's text labels, sorted; or empty
  io::Normalization normalization;       // fitted on the training rows; what the model file stores
};

// The io::TableSource of a configured source.
io::TableSource table_source(const DataSource& source);

// Everything `lmtrain fit` needs: sources read, splits made (seeded), normalization fitted on the
// training rows and applied to every set.  `expected_inputs` (0: any) is the model's input width.
PreparedData prepare_data(const RunConfig& config, std::size_t expected_inputs);

// Converts to the trainer's dataset type.
template <typename T>
Dataset<T> to_dataset(const io::LabeledTable& table);

}  // namespace lmtrain::cli
