// What one LM step of lmtrain.torch did, as a class of lmtrain._core (not a dict): the library's
// StepReport, the loss users read before and after it (PyTorch's mean reduction), the Jacobian's
// route ("native", "torch.func jacrev", …), the slice and the seconds per phase.  Both of
// lmtrain.torch's steps — the fast path's NativeStep and the torch path's ForeignStep — return it.
#pragma once

#include <nanobind/nanobind.h>

#include <map>
#include <string>
#include <vector>

#include "lmtrain/core/timer.h"
#include "lmtrain/solve/lm_step.h"

namespace lmtrain::python {

struct FrontEndStepReport : StepReport {
  double loss = 0;             // reported loss at the linearization point
  double loss_after = 0;       // … after the step (= loss when it was not accepted)
  std::string path;            // how J was computed
  std::size_t slice_size = 0;  // units (samples, or residual rows) per Jacobian slice
  std::map<std::string, double> phase_seconds;
};

// Block losses as a dict in the source's order (Python's dicts keep it): {name: loss}.
nanobind::typed<nanobind::dict, nanobind::str, float> block_loss_dict(
    const std::vector<BlockLoss>& blocks);

// "forward", "jacobian", "normal_equations", "factorization", "trial_evaluation", "geodesic",
// "validation", "communication", "other".
std::map<std::string, double> phase_seconds(const PhaseTimes& times);

}  // namespace lmtrain::python
