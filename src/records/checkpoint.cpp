#include "lmtrain/records/checkpoint.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "lmtrain/core/error.h"
#include "lmtrain/io/atomic_write.h"
#include "lmtrain/records/summary_json.h"
#include "safetensors.h"

namespace lmtrain::io {

using detail::SafetensorsDtype;
using detail::SafetensorsFile;
using detail::SafetensorsTensor;

namespace {

constexpr int kCheckpointVersion = 1;

template <typename T>
constexpr SafetensorsDtype dtype_of() {
  return std::is_same_v<T, float> ? SafetensorsDtype::kF32 : SafetensorsDtype::kF64;
}

// The fingerprint as checkpoints store it: the architecture as JSON when it is (a model file's
// architecture), else as a string (a torch module's description).
nlohmann::json fingerprint_json(const RunFingerprint& f) {
  nlohmann::json architecture = nlohmann::json::accept(f.architecture)
                                    ? nlohmann::json::parse(f.architecture)
                                    : nlohmann::json(f.architecture);
  return {{"architecture", std::move(architecture)},
          {"seed", f.seed},
          {"batch_size", f.batch_size},
          {"precision", f.precision},
          {"loss", f.loss}};
}

}  // namespace

template <typename T>
void write_checkpoint(const std::string& path, const TrainingState<T>& s,
                      const RunFingerprint& run) {
  nlohmann::json meta = {
      {"version", kCheckpointVersion},
      {"fingerprint", fingerprint_json(run)},
      {"epochs_done", s.epochs_done},
      {"batches_done", s.batches_done},
      {"epoch_rng", s.epoch_rng},
      {"damping",
       {{"lambda", s.stepper.damping.lambda},
        {"nu", s.stepper.damping.nu},
        {"floor", s.stepper.damping.floor}}},
      {"geodesic_backoff",
       {{"skip", s.stepper.geodesic.skip}, {"backoff", s.stepper.geodesic.backoff}}},
      {"weight_decays", s.stepper.weight_decays},
      {"validation_failures", s.validation_failures},
      {"partial_epoch", epoch_to_json(s.partial_epoch)},
      {"summary", progress_to_json(s.progress)}};
  SafetensorsFile file;
  file.metadata["format"] = "pt";
  file.metadata["lmtrain.checkpoint"] = meta.dump();
  file.tensors.push_back(SafetensorsTensor::from_values<T>("params", {s.params.size()}, s.params));
  if (!s.best_params.empty())
    file.tensors.push_back(
        SafetensorsTensor::from_values<T>("best_params", {s.best_params.size()}, s.best_params));
  write_file_atomically(path, detail::encode_safetensors(file));
}

namespace {

// The checkpoint's "lmtrain.checkpoint" metadata (JSON text); InvalidArgument naming the file
// when it has none.
const std::string& checkpoint_metadata(const SafetensorsFile& file, const std::string& path) {
  const auto it = file.metadata.find("lmtrain.checkpoint");
  if (it == file.metadata.end())
    throw InvalidArgument(
        fmt::format("{}: not an lmtrain checkpoint (no lmtrain.checkpoint metadata); resume "
                    "from a checkpoint.safetensors that training wrote (lmtrain fit's run "
                    "directory, lmtrain.fit's checkpoint=)",
                    path));
  return it->second;
}

}  // namespace

template <typename T>
TrainingState<T> read_checkpoint(const std::string& path, const RunFingerprint& run) {
  const nlohmann::json fingerprint = fingerprint_json(run);
  const SafetensorsFile file = detail::read_safetensors(path);
  const std::string& metadata = checkpoint_metadata(file, path);
  TrainingState<T> s;
  try {
    const nlohmann::json meta = nlohmann::json::parse(metadata);
    if (meta.at("version").get<int>() != kCheckpointVersion)
      throw InvalidArgument(fmt::format("{}: checkpoint version {} is not supported (expected {})",
                                        path, meta.at("version").dump(), kCheckpointVersion));
    const nlohmann::json& fp = meta.at("fingerprint");
    for (const auto& [key, value] : fingerprint.items()) {
      if (!fp.contains(key) || fp.at(key) != value)
        throw InvalidArgument(fmt::format(
            "{}: the checkpoint was made with a different {} ({} there, {} now); resume with the "
            "settings that made it, or start a new run (without resuming)",
            path, key, fp.contains(key) ? fp.at(key).dump() : "none", value.dump()));
    }
    s.epochs_done = meta.at("epochs_done").get<int>();
    s.batches_done = meta.at("batches_done").get<std::size_t>();
    s.epoch_rng = meta.at("epoch_rng").get<std::array<std::uint64_t, 4>>();
    s.stepper.damping.lambda = meta.at("damping").at("lambda").get<double>();
    s.stepper.damping.nu = meta.at("damping").at("nu").get<double>();
    // The learned floor of invalid attempts; checkpoints from before it existed have none.
    s.stepper.damping.floor = meta.at("damping").value("floor", 0.0);
    // Where GeodesicBackoff stood; checkpoints from before it compute the next correction.
    if (const auto g = meta.find("geodesic_backoff"); g != meta.end()) {
      s.stepper.geodesic = {g->at("skip").get<int>(), g->at("backoff").get<int>()};
      if (s.stepper.geodesic.skip < 0 || s.stepper.geodesic.backoff < 0)
        throw InvalidArgument(fmt::format(
            "{}: damaged checkpoint metadata (geodesic_backoff {}: expected counts ≥ 0)", path,
            g->dump()));
    }
    // One ρ per penalty group; older checkpoints hold a single "weight_decay" (or none, before
    // regularization existed).
    if (meta.contains("weight_decays"))
      s.stepper.weight_decays = meta.at("weight_decays").get<std::vector<double>>();
    else
      s.stepper.weight_decays = {meta.value("weight_decay", 0.0)};
    s.validation_failures = meta.at("validation_failures").get<int>();
    s.partial_epoch = epoch_from_json(meta.at("partial_epoch"));
    progress_from_json(meta.at("summary"), s.progress);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("{}: damaged checkpoint metadata ({})", path, e.what()));
  }
  auto values = [&](const char* name, bool required) {
    std::vector<T> out;
    const SafetensorsTensor* t = file.find(name);
    if (t == nullptr) {
      if (required)
        throw InvalidArgument(fmt::format("{}: checkpoint has no '{}' tensor", path, name));
      return out;
    }
    if (t->dtype != dtype_of<T>())
      throw InvalidArgument(fmt::format(
          "{}: '{}' is {} but this run's precision needs {}; resume with the precision that made "
          "the checkpoint",
          path, name, to_string(t->dtype), to_string(dtype_of<T>())));
    const std::vector<double> v = detail::tensor_values(*t, path);
    out.assign(v.begin(), v.end());
    return out;
  };
  s.params = values("params", true);
  s.best_params = values("best_params", false);
  return s;
}

CheckpointPosition read_checkpoint_position(const std::string& path) {
  const SafetensorsFile file = detail::read_safetensors(path);
  const std::string& metadata = checkpoint_metadata(file, path);
  const SafetensorsTensor* params = file.find("params");
  if (params == nullptr)
    throw InvalidArgument(fmt::format("{}: checkpoint has no 'params' tensor", path));
  CheckpointPosition position;
  try {
    position.epochs_done = nlohmann::json::parse(metadata).at("epochs_done").get<int>();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("{}: damaged checkpoint metadata ({})", path, e.what()));
  }
  position.params = detail::tensor_values(*params, path);  // F32 or F64, else it throws
  return position;
}

template void write_checkpoint<float>(const std::string&, const TrainingState<float>&,
                                      const RunFingerprint&);
template void write_checkpoint<double>(const std::string&, const TrainingState<double>&,
                                       const RunFingerprint&);
template TrainingState<float> read_checkpoint<float>(const std::string&, const RunFingerprint&);
template TrainingState<double> read_checkpoint<double>(const std::string&, const RunFingerprint&);

}  // namespace lmtrain::io
