// tp_traverse and tp_clear for a bound C++ class whose instances hold Python objects (a step's
// linearization object, a torch.distributed group): the class has
//   template <typename Visit> void visit_python(Visit&&) const;   and   void clear_python();
// so that a reference cycle through C++ (a residual_fn closing over its optimizer) is collected.
// After clear_python() the instance can no longer be used.
#pragma once

#include <nanobind/nanobind.h>

namespace lmtrain::python {

template <typename C>
int traverse_python(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(Py_TYPE(self));
  if (!nanobind::inst_ready(self)) return 0;
  int result = 0;
  nanobind::inst_ptr<C>(self)->visit_python([&](nanobind::handle h) {
    if (result == 0 && h.ptr() != nullptr) result = visit(h.ptr(), arg);
  });
  return result;
}

template <typename C>
int clear_python(PyObject* self) {
  if (nanobind::inst_ready(self)) nanobind::inst_ptr<C>(self)->clear_python();
  return 0;
}

// The type slots of such a class, for nanobind::type_slots.
template <typename C>
PyType_Slot* python_gc_slots() {
  static PyType_Slot slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(traverse_python<C>)},
                                {Py_tp_clear, reinterpret_cast<void*>(clear_python<C>)},
                                {0, nullptr}};
  return slots;
}

}  // namespace lmtrain::python
