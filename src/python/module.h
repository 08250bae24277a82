// The pieces of lmtrain._core, each binding one part of the library (module.cpp joins them).
#pragma once

#include <nanobind/nanobind.h>

namespace lmtrain::python {

void bind_options(nanobind::module_& m);   // options.cpp
void bind_model(nanobind::module_& m);     // model.cpp
void bind_training(nanobind::module_& m);  // training.cpp
// lmtrain.torch's native pieces
void bind_torch_normal_equations(nanobind::module_& m);  // torch_normal_equations.cpp
void bind_torch_native_step(nanobind::module_& m);       // torch_native_step.cpp

}  // namespace lmtrain::python
