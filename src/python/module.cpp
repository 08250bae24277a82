// lmtrain._core: the library's training, prediction, model files and options for Python.  The
// package python/lmtrain wraps it (lmtrain.fit, lmtrain.load, the scikit-learn estimators).
#include "module.h"

#include <nanobind/nanobind.h>

#include "errors.h"

NB_MODULE(_core, m) {
  m.doc() = "lmtrain's C++ library: Levenberg–Marquardt training, prediction and model files.";
  lmtrain::python::register_error_translation(m);
  lmtrain::python::bind_options(m);
  lmtrain::python::bind_model(m);
  lmtrain::python::bind_training(m);
  lmtrain::python::bind_step_report(m);
  lmtrain::python::bind_summary(m);
  lmtrain::python::bind_foreign_step(m);
  lmtrain::python::bind_device_group_step(m);
  lmtrain::python::bind_mpi_ranks(m);
  lmtrain::python::bind_foreign_fit(m);
  lmtrain::python::bind_torch_native_step(m);
}
