// The Summary as JSON, both ways: `lmtrain fit` writes it as summary.json beside summary.txt (a
// report a program reads), checkpoints store the training progress part of it, and Python
// pickles lmtrain.Summary through it.  NaN (a missing validation loss) is JSON's null; enums are
// their names as the TOML and the report spell them.
#pragma once

#include <nlohmann/json.hpp>

#include "lmtrain/train/summary.h"

namespace lmtrain::io {

nlohmann::json epoch_to_json(const EpochRecord& e);
EpochRecord epoch_from_json(const nlohmann::json& j);

// The counters, losses and history (what a checkpoint carries).
nlohmann::json progress_to_json(const TrainingProgress& p);
// Throws nlohmann::json::exception on a missing or mistyped field.
void progress_from_json(const nlohmann::json& j, TrainingProgress& p);

nlohmann::json summary_to_json(const Summary& s);
// Throws InvalidArgument naming the field when `j` is not a summary_to_json document.
Summary summary_from_json(const nlohmann::json& j);

}  // namespace lmtrain::io
