#include "lmtrain/records/summary_json.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "lmtrain/core/error.h"

namespace lmtrain::io {
namespace {

// JSON has no NaN: a missing validation loss is stored as null.
nlohmann::json number(double v) {
  return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v);
}
double number(const nlohmann::json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

template <typename E>
E enum_from(const nlohmann::json& j, const char* field,
            std::optional<E> (*parse)(std::string_view)) {
  const std::string name = j.at(field).get<std::string>();
  const std::optional<E> value = parse(name);
  if (!value)
    throw InvalidArgument(fmt::format("summary field {}: unknown value \"{}\"", field, name));
  return *value;
}

std::optional<TerminationReason> parse_termination(std::string_view name) {
  for (int r = static_cast<int>(TerminationReason::kNone);
       r <= static_cast<int>(TerminationReason::kInterrupted); ++r)
    if (to_string(static_cast<TerminationReason>(r)) == name)
      return static_cast<TerminationReason>(r);
  return std::nullopt;
}

// Residual blocks in the source's order: an array of {"name", "loss"} (a JSON object would sort
// them by name).
nlohmann::json blocks_to_json(const std::vector<BlockLoss>& blocks) {
  nlohmann::json out = nlohmann::json::array();
  for (const BlockLoss& b : blocks) out.push_back({{"name", b.name}, {"loss", number(b.loss)}});
  return out;
}
// Absent in files written before residual blocks existed: none.
std::vector<BlockLoss> blocks_from_json(const nlohmann::json& j, const char* field) {
  std::vector<BlockLoss> out;
  if (!j.contains(field)) return out;
  for (const auto& b : j.at(field))
    out.push_back({b.at("name").get<std::string>(), number(b.at("loss"))});
  return out;
}

}  // namespace

nlohmann::json epoch_to_json(const EpochRecord& e) {
  nlohmann::json j = {{"epoch", e.epoch},
                      {"training_loss", number(e.training_loss)},
                      {"validation_loss", number(e.validation_loss)},
                      {"lambda", e.lambda},
                      {"accepted", e.accepted},
                      {"rejected", e.rejected},
                      {"invalid", e.invalid},
                      {"gradient_max_norm", e.gradient_max_norm},
                      {"step_norm", e.step_norm},
                      {"seconds", e.seconds}};
  // Only where the source declared blocks: the native network's files stay as they were.
  if (!e.block_losses.empty()) j["block_losses"] = blocks_to_json(e.block_losses);
  return j;
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
  e.block_losses = blocks_from_json(j, "block_losses");
  return e;
}

nlohmann::json progress_to_json(const TrainingProgress& m) {
  nlohmann::json history = nlohmann::json::array();
  for (const auto& e : m.history) history.push_back(epoch_to_json(e));
  nlohmann::json j = {{"initial_loss", number(m.initial_loss)},
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
                      {"host_reads", m.host_reads},
                      {"host_reads_per_step", m.host_reads_per_step()},
                      {"history", history}};
  if (!m.final_block_losses.empty()) j["final_block_losses"] = blocks_to_json(m.final_block_losses);
  return j;
}

void progress_from_json(const nlohmann::json& m, TrainingProgress& sum) {
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
  sum.geodesic_skipped = m.value("geodesic_skipped", 0);    // absent before GeodesicBackoff
  sum.host_reads = m.value("host_reads", std::int64_t{0});  // absent before it was counted
  sum.history.clear();
  for (const auto& e : m.at("history")) sum.history.push_back(epoch_from_json(e));
  sum.final_block_losses = blocks_from_json(m, "final_block_losses");
}

nlohmann::json summary_to_json(const Summary& s) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : s.penalty_groups)
    groups.push_back({{"name", g.name},
                      {"size", g.size},
                      {"weight_decay", g.weight_decay},
                      {"effective_parameters", g.effective_parameters}});
  nlohmann::json times = nlohmann::json::object();
  for (std::size_t p = 0; p < static_cast<std::size_t>(Phase::kCount); ++p)
    times[std::string(phase_name(static_cast<Phase>(p)))] = s.times.seconds[p];
  return {{"progress", progress_to_json(s)},
          {"model", s.model},
          {"loss", s.loss},
          {"precision", s.precision},
          {"precision_reason", s.precision_reason},
          {"float32_system", s.float32_system},
          {"device", s.device},
          {"communicator", s.communicator},
          {"ranks", s.ranks},
          {"rank_devices", s.rank_devices},
          {"num_params", s.num_params},
          {"training_samples", s.training_samples},
          {"training_weight", s.training_weight},
          {"validation_weight", s.validation_weight},
          {"validation_samples", s.validation_samples},
          {"batch_size", s.batch_size},
          {"residuals_per_sample", s.residuals_per_sample},
          {"batches_per_epoch", s.batches_per_epoch},
          {"linear_solver_given", to_string(s.linear_solver_given)},
          {"linear_solver_used", to_string(s.linear_solver_used)},
          {"linear_solver_reason", s.linear_solver_reason},
          {"damping", to_string(s.damping)},
          {"damping_matrix", to_string(s.damping_matrix)},
          {"damping_per_sample", s.damping_per_sample},
          {"memory_budget_given", s.memory_budget_given},
          {"max_slice_samples_given", s.max_slice_samples_given},
          {"memory_plan", s.memory_plan},
          {"planned_peak_bytes", s.planned_peak_bytes},
          {"peak_device_bytes", s.peak_device_bytes},
          {"slice_samples", s.slice_samples},
          {"slice_halvings", s.slice_halvings},
          {"slice_halving_cause", s.slice_halving_cause},
          {"distribution", s.distribution},
          {"rank_peak_bytes", s.rank_peak_bytes},
          {"balance", to_string(s.balance)},
          {"batch_shares", s.batch_shares},
          {"geodesic_acceleration", s.geodesic_acceleration},
          {"restored_best", s.restored_best},
          {"final_lambda", s.final_lambda},
          {"regularization", to_string(s.regularization)},
          {"final_weight_decay", s.final_weight_decay},
          {"effective_parameters", s.effective_parameters},
          {"penalty_groups", groups},
          {"termination", to_string(s.termination)},
          {"converged", s.converged()},
          {"message", s.message},
          {"times", times},
          {"total_seconds", s.total_seconds},
          {"threads", s.threads},
          {"normal_matrix", s.normal_matrix},
          {"options_ignored", s.options_ignored}};
}

Summary summary_from_json(const nlohmann::json& j) {
  Summary s;
  try {
    progress_from_json(j.at("progress"), s);
    s.model = j.at("model").get<std::string>();
    s.loss = j.at("loss").get<std::string>();
    s.precision = j.at("precision").get<std::string>();
    s.precision_reason = j.at("precision_reason").get<std::string>();
    s.float32_system = j.at("float32_system").get<bool>();
    s.device = j.at("device").get<std::string>();
    s.communicator = j.at("communicator").get<std::string>();
    s.ranks = j.at("ranks").get<int>();
    s.rank_devices = j.at("rank_devices").get<std::vector<std::string>>();
    s.num_params = j.at("num_params").get<std::size_t>();
    s.training_samples = j.at("training_samples").get<std::size_t>();
    s.validation_samples = j.at("validation_samples").get<std::size_t>();
    s.training_weight = j.value("training_weight", 0.0);  // absent before sample weights
    s.validation_weight = j.value("validation_weight", 0.0);
    s.batch_size = j.at("batch_size").get<std::size_t>();
    s.residuals_per_sample = j.at("residuals_per_sample").get<std::size_t>();
    s.batches_per_epoch = j.at("batches_per_epoch").get<std::size_t>();
    s.linear_solver_given = enum_from(j, "linear_solver_given", &parse_linear_solver);
    s.linear_solver_used = enum_from(j, "linear_solver_used", &parse_linear_solver);
    s.linear_solver_reason = j.at("linear_solver_reason").get<std::string>();
    s.damping = enum_from(j, "damping", &parse_damping);
    s.damping_matrix = enum_from(j, "damping_matrix", &parse_damping_matrix);
    s.damping_per_sample = j.value("damping_per_sample", false);  // absent before issue 35
    s.memory_budget_given = j.at("memory_budget_given").get<std::size_t>();
    s.max_slice_samples_given = j.at("max_slice_samples_given").get<std::size_t>();
    s.memory_plan = j.at("memory_plan").get<std::string>();
    s.planned_peak_bytes = j.at("planned_peak_bytes").get<std::size_t>();
    s.peak_device_bytes = j.at("peak_device_bytes").get<std::size_t>();
    s.slice_samples = j.at("slice_samples").get<std::size_t>();
    s.slice_halvings = j.at("slice_halvings").get<int>();
    s.slice_halving_cause = j.at("slice_halving_cause").get<std::string>();
    // Absent before distributed_cholesky and measured batch shares (issue 30).
    s.distribution = j.value("distribution", std::string());
    s.rank_peak_bytes = j.value("rank_peak_bytes", std::vector<std::size_t>());
    if (j.contains("balance")) s.balance = enum_from(j, "balance", &parse_batch_balance);
    s.batch_shares = j.value("batch_shares", std::vector<double>());
    s.geodesic_acceleration = j.at("geodesic_acceleration").get<bool>();
    s.restored_best = j.at("restored_best").get<bool>();
    s.final_lambda = j.at("final_lambda").get<double>();
    s.regularization = enum_from(j, "regularization", &parse_regularization);
    s.final_weight_decay = j.at("final_weight_decay").get<double>();
    s.effective_parameters = j.at("effective_parameters").get<double>();
    for (const auto& g : j.at("penalty_groups"))
      s.penalty_groups.push_back({g.at("name").get<std::string>(), g.at("size").get<std::size_t>(),
                                  g.at("weight_decay").get<double>(),
                                  g.at("effective_parameters").get<double>()});
    s.termination = enum_from(j, "termination", &parse_termination);
    s.message = j.at("message").get<std::string>();
    const nlohmann::json& times = j.at("times");
    for (std::size_t p = 0; p < static_cast<std::size_t>(Phase::kCount); ++p)
      s.times.seconds[p] = times.value(std::string(phase_name(static_cast<Phase>(p))), 0.0);
    s.total_seconds = j.at("total_seconds").get<double>();
    s.threads = j.value("threads", std::string());
    s.normal_matrix = j.value("normal_matrix", std::string());  // absent before issue 36
    s.options_ignored = j.value("options_ignored", std::vector<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(fmt::format("not a summary of lmtrain: {}", e.what()));
  }
  return s;
}

}  // namespace lmtrain::io
