#include "lmtrain/io/checkpoint.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "lmtrain/core/error.h"
#include "lmtrain/io/atomic_write.h"
#include "safetensors.h"

namespace lmtrain::io {

using detail::SafetensorsDtype;
using detail::SafetensorsFile;
using detail::SafetensorsTensor;

namespace {

constexpr int kCheckpointVersion = 1;

// JSON has no NaN: a missing validation loss is stored as null.
nlohmann::json number(double v) {
  return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v);
}
double number(const nlohmann::json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

nlohmann::json to_json(const EpochRecord& e) {
  return {{"epoch", e.epoch},
          {"training_loss", number(e.training_loss)},
          {"validation_loss", number(e.validation_loss)},
          {"lambda", e.lambda},
          {"accepted", e.accepted},
          {"rejected", e.rejected},
          {"invalid", e.invalid},
          {"gradient_max_norm", e.gradient_max_norm},
          {"step_norm", e.step_norm},
          {"seconds", e.seconds}};
}

EpochRecord epoch_from_json(const nlohmann::json& j) {
  EpochRecord e;
  e.epoch = j.at("epoch").get<int>();
  e.training_loss = number(j.at("training_loss"));
  e.validation_loss = number(j.at("validation_loss"));
  e.lambda = j.at("lambda").get<double>();
  e.accepted = j.at("accepted").get<int>();
  e.rejected = j.at("rejected").get<int>();
  e.invalid = j.at("invalid").get<int>();
  e.gradient_max_norm = j.at("gradient_max_norm").get<double>();
  e.step_norm = j.at("step_norm").get<double>();
  e.seconds = j.at("seconds").get<double>();
  return e;
}

template <typename T>
constexpr SafetensorsDtype dtype_of() {
  return std::is_same_v<T, float> ? SafetensorsDtype::kF32 : SafetensorsDtype::kF64;
}

}  // namespace

template <typename T>
void write_checkpoint(const std::string& path, const TrainingState<T>& s,
                      const nlohmann::json& fingerprint) {
  const TrainingProgress& m = s.progress;
  nlohmann::json history = nlohmann::json::array();
  for (const auto& e : m.history) history.push_back(to_json(e));
  nlohmann::json meta = {
      {"version", kCheckpointVersion},
      {"fingerprint", fingerprint},
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
      {"partial_epoch", to_json(s.partial_epoch)},
      {"summary",
       {{"initial_loss", number(m.initial_loss)},
        {"final_loss", number(m.final_loss)},
        {"initial_validation_loss", number(m.initial_validation_loss)},
        {"final_validation_loss", number(m.final_validation_loss)},
        {"best_validation_loss", number(m.best_validation_loss)},
        {"best_epoch", m.best_epoch},
        {"epochs", m.epochs},
        {"steps", m.steps},
        {"accepted_steps", m.accepted_steps},
        {"rejected_steps", m.rejected_steps},
        {"invalid_steps", m.invalid_steps},
        {"abandoned_steps", m.abandoned_steps},
        {"geodesic_applied", m.geodesic_applied},
        {"geodesic_refused", m.geodesic_refused},
        {"geodesic_skipped", m.geodesic_skipped},
        {"history", history}}}};
  SafetensorsFile file;
  file.metadata["format"] = "pt";
  file.metadata["lmtrain.checkpoint"] = meta.dump();
  file.tensors.push_back(SafetensorsTensor::from_values<T>("params", {s.params.size()}, s.params));
  if (!s.best_params.empty())
    file.tensors.push_back(
        SafetensorsTensor::from_values<T>("best_params", {s.best_params.size()}, s.best_params));
  write_file_atomically(path, detail::encode_safetensors(file));
}

template <typename T>
TrainingState<T> read_checkpoint(const std::string& path, const nlohmann::json& fingerprint) {
  const SafetensorsFile file = detail::read_safetensors(path);
  const auto it = file.metadata.find("lmtrain.checkpoint");
  if (it == file.metadata.end())
    throw InvalidArgument(
        fmt::format("{}: not an lmtrain checkpoint (no lmtrain.checkpoint "
                    "metadata); --resume needs the run directory of a previous "
                    "`lmtrain fit`",
                    path));
  TrainingState<T> s;
  try {
    const nlohmann::json meta = nlohmann::json::parse(it->second);
    if (meta.at("version").get<int>() != kCheckpointVersion)
      throw InvalidArgument(fmt::format("{}: checkpoint version {} is not supported (expected {})",
                                        path, meta.at("version").dump(), kCheckpointVersion));
    const nlohmann::json& fp = meta.at("fingerprint");
    for (const auto& [key, value] : fingerprint.items()) {
      if (!fp.contains(key) || fp.at(key) != value)
        throw InvalidArgument(fmt::format(
            "{}: the checkpoint was made with a different {} ({} there, {} now); resume with the "
            "configuration that made it, or start a new run in another output_dir",
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
    const nlohmann::json& m = meta.at("summary");
    TrainingProgress& sum = s.progress;
    sum.initial_loss = number(m.at("initial_loss"));
    sum.final_loss = number(m.at("final_loss"));
    sum.initial_validation_loss = number(m.at("initial_validation_loss"));
    sum.final_validation_loss = number(m.at("final_validation_loss"));
    sum.best_validation_loss = number(m.at("best_validation_loss"));
    sum.best_epoch = m.at("best_epoch").get<int>();
    sum.epochs = m.at("epochs").get<int>();
    sum.steps = m.at("steps").get<int>();
    sum.accepted_steps = m.at("accepted_steps").get<int>();
    sum.rejected_steps = m.at("rejected_steps").get<int>();
    sum.invalid_steps = m.at("invalid_steps").get<int>();
    sum.abandoned_steps = m.at("abandoned_steps").get<int>();
    sum.geodesic_applied = m.value("geodesic_applied", 0);  // absent before geodesic acceleration
    sum.geodesic_refused = m.value("geodesic_refused", 0);
    sum.geodesic_skipped = m.value("geodesic_skipped", 0);  // absent before GeodesicBackoff
    for (const auto& e : m.at("history")) sum.history.push_back(epoch_from_json(e));
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

template void write_checkpoint<float>(const std::string&, const TrainingState<float>&,
                                      const nlohmann::json&);
template void write_checkpoint<double>(const std::string&, const TrainingState<double>&,
                                       const nlohmann::json&);
template TrainingState<float> read_checkpoint<float>(const std::string&, const nlohmann::json&);
template TrainingState<double> read_checkpoint<double>(const std::string&, const nlohmann::json&);

}  // namespace lmtrain::io
