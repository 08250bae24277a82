// The pieces of lmtrain._core, each binding one part of the library (module.cpp joins them).
#pragma once

#include <nanobind/nanobind.h>

namespace lmtrain::python {

void bind_options(nanobind::module_& m);   // options.cpp
void bind_model(nanobind::module_& m);     // model.cpp
void bind_training(nanobind::module_& m);  // training.cpp
void bind_summary(nanobind::module_& m);   // summary.cpp
// lmtrain.torch's native pieces
void bind_torch_native_step(nanobind::module_& m);  // torch_native_step.cpp
void bind_foreign_step(nanobind::module_& m);       // foreign_step.cpp
void bind_device_group_step(nanobind::module_& m);  // device_group_step.cpp
void bind_mpi_ranks(nanobind::module_& m);          // python_communicator.cpp
void bind_foreign_fit(nanobind::module_& m);        // foreign_fit.cpp
void bind_step_report(nanobind::module_& m);        // step_report.cpp

}  // namespace lmtrain::python
