// lmtrain._core.ForeignStep{32,64} and ForeignStepSpec: the bindings of
// lmtrain::python::ForeignStep (foreign_step.h), lmtrain.torch's torch path.
#include "foreign_step.h"

#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "errors.h"
#include "module.h"
#include "python_gc.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

template <typename T>
void bind_foreign_step(nb::module_& m, const char* name) {
  using F = ForeignStep<T>;
  nb::class_<F>(m, name, nb::type_slots(python_gc_slots<F>()),
                "The library's LM step on residuals and Jacobian slices computed in Python "
                "(lmtrain.torch's torch path).")
      .def(nb::init<const ForeignStepSpec&, nb::object, nb::object>(), nb::arg("spec"),
           nb::arg("linearization"), nb::arg("communicator").none() = nb::none())
      .def("step", &F::step, nb::arg("params"), nb::arg("units"), nb::arg("reported_units") = 0,
           "One LM step from params (the flat parameters, updated in place when accepted) on "
           "`units` units of the batch the linearization object holds.  Raises what a callback "
           "raised (after the step has ended on every rank).")
      .def("normal_equations", &F::normal_equations, nb::arg("params"), nb::arg("units"),
           "(F, A, g) at params on the current batch, as the step builds them.")
      .def("undo_last_step", &F::undo_last_step,
           "Restores λ's schedule and the penalties' ρ from before the last step.")
      .def("state", &F::state, "The schedule's state (StepperState).")
      .def("set_state", &F::set_state, nb::arg("state"),
           "Checked (StepperState.validate, the penalty's groups) before the step takes it.")
      .def_prop_ro("effective_parameters", &F::effective_parameters,
                   "γ per relevance group from the last evidence update (bayesian, ard).")
      .def_prop_ro("linear_solver",
                   [](const F& f) { return std::string(to_string(f.plan().solver())); })
      .def_prop_ro("linear_solver_reason",
                   [](const F& f) { return in_python_terms(f.plan().solver_reason); })
      .def_prop_ro("geodesic_acceleration", [](const F& f) { return f.plan().geodesic(); })
      .def_prop_ro("memory_plan",
                   [](const F& f) { return in_python_terms(f.plan().memory.describe()); })
      .def_prop_ro("planned_peak_bytes", [](const F& f) { return f.plan().memory.peak_bytes; })
      .def_prop_ro("budget_bytes", [](const F& f) { return f.plan().memory.budget_bytes; })
      .def_prop_ro("fixed_bytes", [](const F& f) { return f.plan().memory.fixed_bytes; })
      .def_prop_ro("bytes_per_unit",
                   [](const F& f) { return f.plan().memory.bytes_per_slice_sample; })
      .def_prop_ro("slice_units", &F::slice_units)
      .def_prop_ro("device", &F::device)
      .def_prop_ro("communicator", &F::communicator);
}

}  // namespace

void bind_foreign_step(nb::module_& m) {
  using S = ForeignStepSpec;
  nb::class_<S>(m, "ForeignStepSpec", "The sizes, options and device of a torch-path step.")
      .def(nb::init<>())
      .def_rw("parameters", &S::parameters)
      .def_rw("residuals_per_unit", &S::residuals_per_unit)
      .def_rw("max_units", &S::max_units)
      .def_rw("total_units", &S::total_units)
      .def_rw("options", &S::options)
      .def_rw("loss", &S::loss)
      .def_rw("outputs", &S::outputs)
      .def_rw("device", &S::device)
      .def_rw("stream", &S::stream,
              "cuda: the stream to run on (torch.cuda.current_stream().cuda_stream); 0: the "
              "backend's own.")
      .def_rw("bytes_per_unit", &S::bytes_per_unit)
      .def_rw("footprint_measured", &S::footprint_measured)
      .def_rw("group_of", &S::group_of)
      .def_rw("group_names", &S::group_names)
      .def_rw("group_sizes", &S::group_sizes)
      .def_rw("input_groups", &S::input_groups);
  bind_foreign_step<float>(m, "ForeignStep32");
  bind_foreign_step<double>(m, "ForeignStep64");
}

}  // namespace lmtrain::python
