// The pieces of lmtrain._core, each binding one part of the library (module.cpp joins them).
#pragma once

#include <nanobind/nanobind.h>

namespace lmtrain::python {

void bind_options(nanobind::module_& m);   // options.cpp
void bind_model(nanobind::module_& m);     // model.cpp
void bind_training(nanobind::module_& m);  // training.cpp

}  // namespace lmtrain::python
