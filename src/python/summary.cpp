#include "summary.h"

#include <nanobind/stl/string.h>

#include <string>

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

nb::list epoch_records(const std::vector<EpochRecord>& history) {
  nb::list out;
  for (const EpochRecord& e : history) {
    nb::dict d;
    d["epoch"] = e.epoch;
    d["training_loss"] = e.training_loss;
    d["validation_loss"] = e.validation_loss;
    d["lambda_"] = e.lambda;
    d["accepted"] = e.accepted;
    d["rejected"] = e.rejected;
    d["invalid"] = e.invalid;
    d["gradient_max_norm"] = e.gradient_max_norm;
    d["step_norm"] = e.step_norm;
    d["seconds"] = e.seconds;
    out.append(d);
  }
  return out;
}

nb::list penalty_groups(const std::vector<Summary::PenaltyGroup>& groups) {
  nb::list out;
  for (const auto& g : groups) {
    nb::dict d;
    d["name"] = g.name;
    d["size"] = g.size;
    d["weight_decay"] = g.weight_decay;
    d["effective_parameters"] = g.effective_parameters;
    out.append(d);
  }
  return out;
}

nb::dict phase_times(const PhaseTimes& times) {
  nb::dict d;
  for (std::size_t p = 0; p < static_cast<std::size_t>(Phase::kCount); ++p)
    d[std::string(phase_name(static_cast<Phase>(p))).c_str()] = times.seconds[p];
  return d;
}

}  // namespace

nb::dict summary_fields(const Summary& s) {
  nb::dict d;
  d["report"] = s.full_report();
  d["brief"] = s.brief_report();
  d["model"] = s.model;
  d["loss"] = s.loss;
  d["precision"] = s.precision;
  d["precision_reason"] = s.precision_reason;
  d["device"] = s.device;
  d["num_params"] = s.num_params;
  d["training_samples"] = s.training_samples;
  d["validation_samples"] = s.validation_samples;
  d["batch_size"] = s.batch_size;
  d["batches_per_epoch"] = s.batches_per_epoch;
  d["linear_solver_given"] = std::string(to_string(s.linear_solver_given));
  d["linear_solver_used"] = std::string(to_string(s.linear_solver_used));
  d["linear_solver_reason"] = s.linear_solver_reason;
  d["damping"] = std::string(to_string(s.damping));
  d["regularization"] = std::string(to_string(s.regularization));
  d["initial_loss"] = s.initial_loss;
  d["final_loss"] = s.final_loss;
  d["initial_validation_loss"] = s.initial_validation_loss;
  d["final_validation_loss"] = s.final_validation_loss;
  d["best_validation_loss"] = s.best_validation_loss;
  d["best_epoch"] = s.best_epoch;
  d["restored_best"] = s.restored_best;
  d["epochs"] = s.epochs;
  d["steps"] = s.steps;
  d["accepted_steps"] = s.accepted_steps;
  d["rejected_steps"] = s.rejected_steps;
  d["invalid_steps"] = s.invalid_steps;
  d["final_lambda"] = s.final_lambda;
  d["final_weight_decay"] = s.final_weight_decay;
  d["effective_parameters"] = s.effective_parameters;
  d["penalty_groups"] = penalty_groups(s.penalty_groups);
  d["termination"] = std::string(to_string(s.termination));
  d["converged"] = s.converged();
  d["message"] = s.message;
  d["history"] = epoch_records(s.history);
  d["times"] = phase_times(s.times);
  d["total_seconds"] = s.total_seconds;
  d["planned_peak_bytes"] = s.planned_peak_bytes;
  d["peak_device_bytes"] = s.peak_device_bytes;
  return d;
}

}  // namespace lmtrain::python
