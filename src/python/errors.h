// lmtrain's C++ exceptions as Python exceptions: InvalidArgument → ValueError, every other error
// → RuntimeError, with the C++ option names of the message (SolverOptions::lambda_min) turned into
// the keyword arguments a Python caller writes (lambda_min).
#pragma once

#include <nanobind/nanobind.h>

#include <string>

namespace lmtrain::python {

// `message` with SolverOptions::x, TrainerOptions::x and LossOptions::x written as Python
// keyword arguments (LossOptions::kind is `loss`).
std::string in_python_terms(std::string message);

void register_error_translation(nanobind::module_& m);

}  // namespace lmtrain::python
