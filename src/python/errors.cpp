#include "errors.h"

#include <string_view>
#include <utility>

#include "lmtrain/core/error.h"

namespace lmtrain::python {

namespace nb = nanobind;

std::string in_python_terms(std::string message) {
  // Longest names first: "LossOptions::kind" before the "LossOptions::" prefix.
  constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"LossOptions::kind", "loss"}, {"TrainerOptions::seed", "seed"},
      {"SolverOptions::", ""},       {"TrainerOptions::", ""},
      {"LossOptions::", ""},
  };
  for (const auto& [cpp, py] : kNames)
    for (std::size_t at = message.find(cpp); at != std::string::npos;
         at = message.find(cpp, at + py.size()))
      message.replace(at, cpp.size(), py);
  return message;
}

void register_error_translation(nb::module_& m) {
  (void)m;
  nb::register_exception_translator([](const std::exception_ptr& error, void*) {
    try {
      std::rethrow_exception(error);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, in_python_terms(e.what()).c_str());
    } catch (const MemoryPlanError& e) {
      // A plan that does not fit, or a device allocation that failed and could not be halved.
      PyErr_SetString(PyExc_MemoryError, in_python_terms(e.what()).c_str());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, in_python_terms(e.what()).c_str());
    }
  });
}

}  // namespace lmtrain::python
