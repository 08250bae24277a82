#include "step_report.h"

#include <fmt/format.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>

#include "errors.h"
#include "module.h"

namespace lmtrain::python {

namespace nb = nanobind;

std::map<std::string, double> phase_seconds(const PhaseTimes& times) {
  constexpr std::array<const char*, static_cast<std::size_t>(Phase::kCount)> keys = {
      "forward",  "jacobian",   "normal_equations", "factorization", "trial_evaluation",
      "geodesic", "validation", "communication",    "records",       "other"};
  std::map<std::string, double> out;
  for (std::size_t p = 0; p < keys.size(); ++p) out[keys[p]] = times.seconds[p];
  return out;
}

nb::typed<nb::dict, nb::str, float> block_loss_dict(const std::vector<BlockLoss>& blocks) {
  nb::dict out;
  for (const BlockLoss& b : blocks) out[nb::str(b.name.c_str())] = b.loss;
  return nb::typed<nb::dict, nb::str, float>(out);
}

void bind_step_report(nb::module_& m) {
  nb::enum_<TerminationReason> reason(
      m, "TerminationReason",
      "Why a step or a training run stopped (lmtrain/solve/termination.h); str() is the name "
      "lmtrain fit prints.");
  for (int r = static_cast<int>(TerminationReason::kNone);
       r <= static_cast<int>(TerminationReason::kInterrupted); ++r) {
    const auto value = static_cast<TerminationReason>(r);
    const std::string name(to_string(value));
    reason.value(name.c_str(), value);
  }
  reason.def("__str__", [](TerminationReason r) { return std::string(to_string(r)); })
      .def("__bool__", [](TerminationReason r) { return r != TerminationReason::kNone; })
      .def("__eq__",
           [](TerminationReason r, const std::string& name) { return to_string(r) == name; })
      .def("__eq__", [](TerminationReason a, TerminationReason b) { return a == b; })
      .def("__hash__", [](TerminationReason r) { return static_cast<int>(r); });

  using St = StepperState;
  nb::class_<St>(m, "StepperState",
                 "The LM step's schedule between steps (lmtrain::StepperState): λ, Nielsen's ν, "
                 "the floor learned from invalid attempts, the geodesic backoff and the "
                 "penalties' ρ.  What lmtrain.torch's state_dict holds.")
      .def(nb::init<>())
      .def_static("initial", &St::initial, nb::arg("options"),
                  "Where a step's schedule starts for these options (λ = lambda_initial, ν = 2, "
                  "no floor, no backoff; weight_decays empty: the penalty's own).")
      .def("validate", &St::validate, "Raises ValueError naming the first field out of range.")
      .def_prop_rw(
          "lambda_", [](const St& s) { return s.damping.lambda; },
          [](St& s, double v) { s.damping.lambda = v; })
      .def_prop_rw(
          "nu", [](const St& s) { return s.damping.nu; }, [](St& s, double v) { s.damping.nu = v; })
      .def_prop_rw(
          "floor", [](const St& s) { return s.damping.floor; },
          [](St& s, double v) { s.damping.floor = v; })
      .def_prop_rw(
          "geodesic_skip", [](const St& s) { return s.geodesic.skip; },
          [](St& s, int v) { s.geodesic.skip = v; })
      .def_prop_rw(
          "geodesic_backoff", [](const St& s) { return s.geodesic.backoff; },
          [](St& s, int v) { s.geodesic.backoff = v; })
      .def_rw("weight_decays", &St::weight_decays,
              "ρ per penalty group; empty: the penalty keeps its own.");

  using R = FrontEndStepReport;
  nb::class_<R>(m, "StepReport", "What one LM step did (the library's StepReport).")
      .def_ro("accepted", &R::accepted)
      .def_ro("attempts", &R::attempts, "Solves performed.")
      .def_ro("rejected", &R::rejected, "Valid trials that did not lower the objective.")
      .def_ro("invalid", &R::invalid, "Failed factorizations or non-finite steps.")
      .def_ro("objective", &R::objective_before, "The objective F before the step.")
      .def_ro("objective_after", &R::objective_after)
      .def_ro("penalty_before", &R::penalty_before, "The regularization's part of objective.")
      .def_ro("penalty_after", &R::penalty_after, "The regularization's part of objective_after.")
      .def_ro("lambda_", &R::lambda, "λ of the last solve.")
      .def_ro("gain_ratio", &R::gain_ratio, "ρ of the accepted step.")
      .def_ro("gradient_max_norm", &R::gradient_max_norm, "‖Jᵀr‖∞ (with the penalty's term).")
      .def_ro("step_norm", &R::step_norm)
      .def_ro("linear_iterations", &R::linear_iterations, "CG iterations.")
      .def_ro("geodesic_applied", &R::geodesic_applied)
      .def_ro("geodesic_refused", &R::geodesic_refused)
      .def_ro("geodesic_skipped", &R::geodesic_skipped)
      .def_ro("weight_decay", &R::weight_decay, "ρ of l2 or bayesian.")
      .def_ro("effective_parameters", &R::effective_parameters, "γ of bayesian or ard.")
      .def_ro("host_reads", &R::host_reads,
              "Device→host reads the step waited for (each a stream synchronization on a GPU).")
      .def_ro("termination", &R::termination,
              "Why training should stop after this step (falsy when it need not).")
      .def_prop_ro(
          "message", [](const R& r) { return in_python_terms(r.message); },
          "Why, when termination is set (options named as keyword arguments).")
      .def_prop_ro(
          "block_losses", [](const R& r) { return block_loss_dict(r.block_losses); },
          "Each residual block's loss at the step's linearization point (before its update), "
          "in the residual function's order and convention ({} without blocks; "
          "lmtrain.torch.pinn.Problem: each condition's mean |F|²).")
      .def_ro("loss", &R::loss, "The reported loss (PyTorch's mean reduction) before the step.")
      .def_ro("loss_after", &R::loss_after)
      .def_ro("path", &R::path, "How the Jacobian was computed.")
      .def_ro("slice_size", &R::slice_size, "Units (samples or residual rows) per slice.")
      .def_ro("phase_seconds", &R::phase_seconds)
      .def("__repr__", [](const R& r) {
        // {:.6g}: the losses and λ of a converged fit are 1e-12 and below, not 0.000000.
        return fmt::format(
            "StepReport(accepted={}, attempts={}, loss={:.6g}, loss_after={:.6g}, lambda_={:.6g}, "
            "termination='{}')",
            r.accepted ? "True" : "False", r.attempts, r.loss, r.loss_after, r.lambda,
            to_string(r.termination));
      });
}

}  // namespace lmtrain::python
