// Options a run was given that its plan does not use: each set away from its default while what
// it tunes is off (weight_decay without a regularization, the Marquardt bounds with D = I, the
// geodesic correction's settings with the correction off, …).  A user who sets one expects it to
// act; a silent no-op is a wrong result found late.  The Summary lists them
// (Summary::options_ignored, in the report and summary.json); the CLI prints each as a warning and
// lmtrain.fit raises each as a UserWarning.  Named as the C++ API spells them; the front ends
// translate (train/summary_text.h).
#pragma once

#include <string>
#include <vector>

#include "lmtrain/solve/solver_options.h"
#include "lmtrain/solve/step_planner.h"

namespace lmtrain {

// `given`: the options as the caller set them; `plan`: what the planner resolved (solver,
// geodesic correction).  One line per ignored option, "SolverOptions::x = v: ignored, why (what
// would use it)"; empty when every option given acts.
std::vector<std::string> ignored_options(const SolverOptions& given, const StepPlan& plan);

}  // namespace lmtrain
