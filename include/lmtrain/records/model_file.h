// The model file, `model.safetensors`: everything predict needs to reproduce a trained network,
// in a file that Python's `safetensors` reads as it is (DESIGN.md §7).
//
// Tensors (PyTorch nn.Sequential's state_dict names, so that
// `torch.nn.Sequential(...).load_state_dict(safetensors.torch.load_file(path))` works):
//   "i.weight"   layer i's weights: dense (out, in), conv2d (out_channels, in_channels, kh, kw)
//   "i.bias"     layer i's bias (out) — dense always, conv2d when its bias is on
// where i is the index in ModelSpec::layers(): activation, pooling and flatten layers have no
// tensors but keep their index, exactly as nn.Sequential numbers its modules.  Concatenated in
// layer order, weight before bias, the tensors are lmtrain's flat parameter vector (ModelSpec).
// They are F32 or F64 as the training precision; the normalization tensors are always F64:
//   "normalization.input_mean", "normalization.input_std"     (inputs)   x' = (x − mean) / std
//   "normalization.target_mean", "normalization.target_std"   (outputs)  y = y'·std + mean
//
// __metadata__ (strings, as the format requires):
//   "format"                 "pt" (what safetensors.torch.save_file writes; loaders check it)
//   "lmtrain.format_version" "1"
//   "lmtrain.architecture"   model_spec_to_json(architecture), e.g.
//       {"input_shape":[1,28,28],"layers":[{"type":"conv2d","out_channels":8,"kernel":[3,3],
//        "stride":[1,1],"padding":[1,1],"bias":true},{"type":"activation","activation":"relu"},
//        {"type":"max_pool2d","kernel":[2,2],"stride":[2,2],"padding":[0,0]},
//        {"type":"flatten"},{"type":"dense","units":10}]}
//   "lmtrain.loss"           a loss name of core/loss_kind.h ("mse", "cross_entropy", …)
//   "lmtrain.task"           "regression" or "classification"
//   "lmtrain.num_classes"    decimal integer (0 for regression)
//   "lmtrain.class_names"    JSON array of strings (only when class names are given)
//   "lmtrain.input_names"    JSON array of strings, one per input: the training data's column
//                            names (only when it had them); predict and eval select by them
//   "lmtrain.provenance"     JSON object: lmtrain version, date, seed, epochs, final losses, …
#pragma once

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lmtrain/io/standardization.h"
#include "lmtrain/nn/model_spec.h"
#include "lmtrain/train/summary.h"

namespace lmtrain::io {

// Element type of the parameter tensors: F32 for a model trained in float, F64 in double.
enum class ParameterDtype { kF32, kF64 };
std::string_view to_string(ParameterDtype dtype);  // "F32", "F64"

enum class Task { kRegression, kClassification };
std::string_view to_string(Task task);  // "regression", "classification"

// Per-column standardization learned from the training data (io/standardization.h).  Each side
// is either empty (no normalization) or has one entry per input (per output).  Stored as the
// tensors normalization.input_mean, .input_std, .target_mean and .target_std.
struct Normalization {
  Standardization inputs;
  Standardization targets;

  bool normalizes_inputs() const { return !inputs.empty(); }
  bool normalizes_targets() const { return !targets.empty(); }
};

// x ← (x − mean)/std per column with the input standardization: what the network was trained
// on.  Does nothing without it; throws InvalidArgument when x is not whole rows.
template <typename T>
void apply_input_normalization(const Normalization& normalization, std::span<T> x) {
  normalization.inputs.apply(x);
}

// y ← y'·std + mean per column: the network's normalized outputs back in target units.
template <typename T>
void undo_target_normalization(const Normalization& normalization, std::span<T> y) {
  normalization.targets.invert(y);
}

struct ModelFile {
  ModelSpec architecture;
  // The flat parameter vector (ModelSpec's order), architecture.num_params() values.  A float
  // model's parameters convert to double and back exactly.
  std::vector<double> parameters;
  // The dtype read_model_file found; the writer's precision argument decides what it writes.
  ParameterDtype parameter_dtype = ParameterDtype::kF64;
  Normalization normalization;
  std::string loss = "mse";  // a name of core/loss_kind.h
  Task task = Task::kRegression;
  // classification: number of classes (≥ 2); regression: 0.
  std::size_t num_classes = 0;
  // Optional: empty, or num_classes names (class k is output k / label k).
  std::vector<std::string> class_names;
  // Optional: empty, or one name per input (the training data's columns, in input order).
  std::vector<std::string> input_names;
  // Free-form JSON object; make_provenance() starts one.  Conventional keys: "lmtrain_version",
  // "date" (UTC ISO 8601), "seed", "epochs", "final_loss", "final_validation_loss",
  // "termination".  The writer adds "lmtrain_version" when it is missing.
  nlohmann::json provenance = nlohmann::json::object();
};

// One parameter tensor of a model: its name, torch shape and place in the flat vector.
struct ParameterTensor {
  std::string name;                // "3.weight"
  std::size_t layer = 0;           // index in ModelSpec::layers()
  std::vector<std::size_t> shape;  // (out, in) or (out, in_channels, kh, kw), or (out)
  std::size_t offset = 0;          // first value in the flat parameter vector
  std::size_t count = 0;           // product of shape
};

// The parameter tensors of a valid spec in flat order (offsets ascending, contiguous).
std::vector<ParameterTensor> parameter_tensors(const ModelSpec& spec);

// The architecture as JSON (see the header comment) and back.  model_spec_from_json validates
// every field and throws InvalidArgument naming it ("layers[2].kernel: expected …, got …"), then
// runs ModelSpec::validate.  "kernel", "stride" and "padding" accept [h, w] or one integer.
nlohmann::json model_spec_to_json(const ModelSpec& spec);
ModelSpec model_spec_from_json(const nlohmann::json& json);

// The outputs its user reads from a model's network outputs (samples × outputs, in target units:
// after undo_target_normalization), in place: a classifier's softmax of each row (the class
// probabilities; the predicted class is the first of the largest), the sigmoid of each output of
// a network trained with bce (probabilities); a regression's outputs stay as they are.  Returns
// whether they changed.  `lmtrain predict` and the Python package's Model.predict and
// predict_proba both call it.  Throws InvalidArgument when `outputs` is not whole rows.
bool apply_output_link(const ModelFile& model, std::span<double> outputs);

// Throws InvalidArgument saying which field of `model` is inconsistent (parameter count,
// normalization sizes or non-positive std, task/num_classes/class_names, unknown loss,
// provenance not an object); `context` starts the message (a path or "write_model_file").
void validate_model_file(const ModelFile& model, const std::string& context);

// The lmtrain version (CMake's project version, e.g. "0.1.0").
std::string_view lmtrain_version();
// "2025-03-14T15:09:26Z".
std::string utc_iso8601(std::chrono::system_clock::time_point time);
// {"lmtrain_version": lmtrain_version(), "date": utc_iso8601(time)}; a trainer adds its seed,
// epochs, final losses and termination reason.
nlohmann::json make_provenance(
    std::chrono::system_clock::time_point time = std::chrono::system_clock::now());

// What a finished training run leaves in its model file, the same from every front end (lmtrain
// fit, lmtrain.fit): the architecture, the parameters (dtype of T), the normalization, the loss,
// the task (classification when num_classes > 0) and the provenance: `provenance` (a
// make_provenance() the caller may have added to) with the seed, the epochs, the final losses and
// the termination of `summary`.
template <typename T>
ModelFile trained_model_file(const ModelSpec& spec, const std::vector<T>& params,
                             const Normalization& normalization, std::string_view loss,
                             std::size_t num_classes, std::vector<std::string> class_names,
                             std::uint64_t seed, const Summary& summary, nlohmann::json provenance);

// The complete file with parameter tensors of T (float → F32, double → F64).  Validates first
// (validate_model_file).
template <typename T>
std::string encode_model_file(const ModelFile& model);

// Writes the file atomically (io/atomic_write.h): readers see the old file or the complete new
// one, never a partial file.  Throws InvalidArgument as validate_model_file and lmtrain::Error
// when the file cannot be written.
template <typename T>
void write_model_file(const std::string& path, const ModelFile& model);
void write_model_file(const std::string& path, const ModelFile& model, ParameterDtype precision);

// Reads a model file.  Throws InvalidArgument naming the file and the problem: every malformed
// container case of the safetensors reader (header length, JSON, offsets, dtype/shape/byte
// counts), missing or malformed metadata (naming the key and field), a parameter tensor that is
// missing, unexpected, of the wrong shape for its layer (naming the layer, its kind and the
// expected shape and count), parameter tensors of mixed or non-float dtypes, and the
// inconsistencies of validate_model_file.
ModelFile read_model_file(const std::string& path);
// The same on bytes in memory; `source` names them in messages.
ModelFile parse_model_file(std::string_view bytes, const std::string& source);

}  // namespace lmtrain::io
