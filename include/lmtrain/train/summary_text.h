// A Summary in a front end's words.  The library names the options in its free text as the C++
// API spells them (SolverOptions::lambda_max); the command-line tool shows them as the config's
// keys (solver.lambda_max), the Python package as keyword arguments (lambda_max).
#pragma once

#include <functional>
#include <string>

#include "lmtrain/train/summary.h"

namespace lmtrain {

// Passes every free-text field of `summary` through `rewrite`: the termination message, the
// reasons of the precision and the linear solver, the memory plan, the slice halving's cause, the
// distribution, the thread and normal-matrix reports, the ignored options.  full_report() adds text
// of its own (the geodesic correction's reason): a front end rewrites the report too.
void rewrite_text(Summary& summary, const std::function<std::string(std::string)>& rewrite);

}  // namespace lmtrain
