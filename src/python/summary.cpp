// lmtrain.Summary, lmtrain.EpochRecord and lmtrain.PenaltyGroup: the library's own classes, read
// only, with the report's text from the library (full_report) — no dict in between.  They pickle
// (scikit-learn estimators keep a Summary in summary_) as the JSON of records/summary_json.h.
#include <fmt/format.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "errors.h"
#include "lmtrain/records/summary_json.h"
#include "module.h"
#include "step_report.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

std::map<std::string, double> phase_times(const PhaseTimes& times) {
  std::map<std::string, double> out;
  for (std::size_t p = 0; p < static_cast<std::size_t>(Phase::kCount); ++p)
    out[std::string(phase_name(static_cast<Phase>(p)))] = times.seconds[p];
  return out;
}

void bind_records(nb::module_& m) {
  using E = EpochRecord;
  nb::class_<E>(m, "EpochRecord", "One epoch of training.")
      .def_ro("epoch", &E::epoch, "1-based epoch number.")
      .def_ro("training_loss", &E::training_loss,
              "Reported loss (PyTorch's mean reduction) on all training samples after the epoch.")
      .def_ro("validation_loss", &E::validation_loss,
              "The same on the validation samples; NaN without validation data.")
      .def_ro("lambda_", &E::lambda, "λ at the end of the epoch.")
      .def_ro("accepted", &E::accepted, "Accepted LM steps of the epoch.")
      .def_ro("rejected", &E::rejected, "Trials that did not lower the loss.")
      .def_ro("invalid", &E::invalid, "Failed factorizations or non-finite steps.")
      .def_ro("gradient_max_norm", &E::gradient_max_norm, "‖Jᵀr‖∞ of the epoch's last step.")
      .def_ro("step_norm", &E::step_norm, "‖δ‖₂ of the epoch's last accepted step.")
      .def_ro("seconds", &E::seconds, "Wall-clock seconds since training started.")
      .def_prop_ro(
          "block_losses", [](const E& e) { return block_loss_dict(e.block_losses); },
          "Each residual block's loss of the epoch's last step, at its linearization point "
          "(StepReport.block_losses; {} without blocks).")
      .def("__repr__", [](const E& e) {
        return fmt::format("EpochRecord(epoch={}, training_loss={:.6g})", e.epoch, e.training_loss);
      });
  using G = Summary::PenaltyGroup;
  nb::class_<G>(m, "PenaltyGroup",
                "One relevance group of regularization=\"ard\" (bayesian has one ρ and no "
                "groups).")
      .def_ro("name", &G::name, "\"input 3 (age)\", \"layer 2 (dense) weights\", …")
      .def_ro("size", &G::size, "Parameters in the group.")
      .def_ro("weight_decay", &G::weight_decay,
              "The group's ρ at the end: large when the data do not support the group.")
      .def_ro("effective_parameters", &G::effective_parameters,
              "γ, how many of the group's parameters the data determine (0 … size).")
      .def("__repr__", [](const G& g) {
        return fmt::format("PenaltyGroup(name='{}', weight_decay={:.6g})", g.name, g.weight_decay);
      });
}

// A read-only property of a Summary field (its own or TrainingProgress's).
template <typename V, typename C>
auto field(V C::*member) {
  return [member](const Summary& s) { return s.*member; };
}

// A read-only sequence field as a tuple, as the Summary is read only.
template <typename V, typename C>
auto tuple_field(std::vector<V> C::*member) {
  return [member](const Summary& s) {
    return nb::typed<nb::tuple, V, nb::ellipsis>(nb::tuple(nb::cast(s.*member)));
  };
}

using SummaryClass = nb::class_<Summary>;
using S = Summary;

// The problem: model, loss, precision, where it ran and its sizes.
void bind_problem(SummaryClass& summary) {
  summary.def_prop_ro("model", field(&S::model))
      .def_prop_ro("loss", field(&S::loss))
      .def_prop_ro("precision", field(&S::precision))
      .def_prop_ro("precision_reason", field(&S::precision_reason),
                   "Why precision = \"auto\" chose it; empty when it was asked for.")
      .def_prop_ro("device", field(&S::device))
      .def_prop_ro("communicator", field(&S::communicator))
      .def_prop_ro("ranks", field(&S::ranks))
      .def_prop_ro("rank_devices", field(&S::rank_devices))
      .def_prop_ro("num_params", field(&S::num_params))
      .def_prop_ro("training_samples", field(&S::training_samples))
      .def_prop_ro("validation_samples", field(&S::validation_samples))
      .def_prop_ro("training_weight", field(&S::training_weight),
                   "Σ of the training samples' weights; 0: unweighted.")
      .def_prop_ro("validation_weight", field(&S::validation_weight),
                   "Σ of the validation samples' weights; 0: unweighted.")
      .def_prop_ro("batch_size", field(&S::batch_size))
      .def_prop_ro("residuals_per_sample", field(&S::residuals_per_sample))
      .def_prop_ro("batches_per_epoch", field(&S::batches_per_epoch));
}

// The options as given and as used.
void bind_choices(SummaryClass& summary) {
  summary
      .def_prop_ro("linear_solver_given",
                   [](const S& s) { return std::string(to_string(s.linear_solver_given)); })
      .def_prop_ro("linear_solver_used",
                   [](const S& s) { return std::string(to_string(s.linear_solver_used)); })
      .def_prop_ro("linear_solver_reason", field(&S::linear_solver_reason))
      .def_prop_ro("damping", [](const S& s) { return std::string(to_string(s.damping)); })
      .def_prop_ro("damping_per_sample", field(&S::damping_per_sample))
      .def_prop_ro("regularization",
                   [](const S& s) { return std::string(to_string(s.regularization)); })
      .def_prop_ro("memory_plan", field(&S::memory_plan))
      .def_prop_ro("slice_samples", field(&S::slice_samples))
      .def_prop_ro("slice_halvings", field(&S::slice_halvings))
      .def_prop_ro("geodesic_acceleration", field(&S::geodesic_acceleration));
}

// The outcome: losses, step counts, regularization, termination and the history.
void bind_outcome(SummaryClass& summary) {
  summary.def_prop_ro("initial_loss", field(&S::initial_loss))
      .def_prop_ro("final_loss", field(&S::final_loss))
      .def_prop_ro("initial_validation_loss", field(&S::initial_validation_loss))
      .def_prop_ro("final_validation_loss", field(&S::final_validation_loss))
      .def_prop_ro("best_validation_loss", field(&S::best_validation_loss))
      .def_prop_ro("best_epoch", field(&S::best_epoch))
      .def_prop_ro("restored_best", field(&S::restored_best))
      .def_prop_ro("epochs", field(&S::epochs))
      .def_prop_ro("steps", field(&S::steps))
      .def_prop_ro("accepted_steps", field(&S::accepted_steps))
      .def_prop_ro("rejected_steps", field(&S::rejected_steps))
      .def_prop_ro("invalid_steps", field(&S::invalid_steps))
      .def_prop_ro("host_reads", field(&S::host_reads),
                   "Device→host reads the LM steps waited for (each a stream synchronization on "
                   "a GPU), summed over the steps.")
      .def_prop_ro("host_reads_per_step", &S::host_reads_per_step,
                   "host_reads per LM step, as full_report() prints it.")
      .def_prop_ro("final_lambda", field(&S::final_lambda))
      .def_prop_ro("final_weight_decay", field(&S::final_weight_decay))
      .def_prop_ro("effective_parameters", field(&S::effective_parameters))
      .def_prop_ro("penalty_groups", tuple_field(&S::penalty_groups))
      .def_prop_ro("termination", field(&S::termination),
                   "Why training stopped (compares equal to its name, e.g. 'max_epochs').")
      .def_prop_ro("converged", &S::converged)
      .def_prop_ro("message", field(&S::message))
      .def_prop_ro("history", tuple_field(&S::history))
      .def_prop_ro(
          "block_losses", [](const S& s) { return block_loss_dict(s.final_block_losses); },
          "Each residual block's loss of the run's last step, at its linearization point "
          "(StepReport.block_losses; {} without blocks).");
}

// What the run cost: seconds per phase, memory planned and measured, each rank's share.
void bind_costs(SummaryClass& summary) {
  summary
      .def_prop_ro(
          "times", [](const S& s) { return phase_times(s.times); },
          "Seconds per phase of the step, keyed by the report's names.")
      .def_prop_ro("total_seconds", field(&S::total_seconds))
      .def_prop_ro("planned_peak_bytes", field(&S::planned_peak_bytes))
      .def_prop_ro("peak_device_bytes", field(&S::peak_device_bytes))
      .def_prop_ro("distribution", field(&S::distribution),
                   "distributed_cholesky: the process grid and A's largest share; else empty.")
      .def_prop_ro("rank_peak_bytes", tuple_field(&S::rank_peak_bytes),
                   "With several ranks: each rank's measured peak device bytes, in rank order.")
      .def_prop_ro("balance", [](const S& s) { return std::string(to_string(s.balance)); })
      .def_prop_ro("batch_shares", tuple_field(&S::batch_shares),
                   "Each rank's share of a batch at the end, in rank order.")
      .def_prop_ro("threads", field(&S::threads))
      .def_prop_ro("options_ignored", tuple_field(&S::options_ignored),
                   "Options given that this run does not use, one line each (weight_decay "
                   "without a regularization, …); lmtrain.fit warns of each.")
      .def_prop_ro("normal_matrix", field(&S::normal_matrix),
                   "How A = JᵀJ was formed and why, one line per shape (the CUDA backend's "
                   "measured choice between SYRK and split-K); empty on the CPU.");
}

void bind_curves(SummaryClass& summary) {
  summary
      .def_prop_ro(
          "loss_curve",
          [](const S& s) {
            std::vector<double> v;
            for (const auto& e : s.history) v.push_back(e.training_loss);
            return v;
          },
          "Training loss after each epoch.")
      .def_prop_ro(
          "validation_curve",
          [](const S& s) {
            std::vector<double> v;
            for (const auto& e : s.history)
              if (!std::isnan(e.validation_loss)) v.push_back(e.validation_loss);
            return v;
          },
          "Validation loss after each epoch (empty without validation data).");
}

// The report's text, summary.json's, and pickling through the latter.
void bind_reports(SummaryClass& summary) {
  // The fits rewrite the fields' option names (rewrite_text); the reports add text of their own.
  summary
      .def(
          "full_report", [](const S& s) { return in_python_terms(s.full_report()); },
          "The full report, as `lmtrain fit` prints it (options named as keyword arguments).")
      .def(
          "brief_report", [](const S& s) { return in_python_terms(s.brief_report()); },
          "One line: epochs, losses, termination.")
      .def(
          "to_json", [](const S& s) { return io::summary_to_json(s).dump(2); },
          "summary.json's text.")
      .def("__str__", [](const S& s) { return in_python_terms(s.brief_report()); })
      .def(
          "__repr__",
          [](const S& s) { return "<lmtrain.Summary: " + in_python_terms(s.brief_report()) + ">"; })
      .def("__getstate__", [](const S& s) { return io::summary_to_json(s).dump(); })
      .def("__setstate__", [](S& s, const std::string& json) {
        new (&s) S(io::summary_from_json(nlohmann::json::parse(json)));
      });
}

}  // namespace

void bind_summary(nb::module_& m) {
  bind_records(m);
  SummaryClass summary(
      m, "Summary",
      "lmtrain's training summary: sizes, choices given and used, losses, counts and "
      "timings.  full_report() is the text `lmtrain fit` prints and writes to "
      "summary.txt; every figure in it is also an attribute.  Losses are PyTorch's "
      "definitions (mean squared error, mean cross-entropy).");
  bind_problem(summary);
  bind_choices(summary);
  bind_outcome(summary);
  bind_costs(summary);
  bind_curves(summary);
  bind_reports(summary);
}

}  // namespace lmtrain::python
