// A Summary as a Python dict of its fields and reports (the package's lmtrain.Summary is built
// from it, so it pickles and outlives the extension's objects).
#pragma once

#include <nanobind/nanobind.h>

#include "lmtrain/train/summary.h"

namespace lmtrain::python {

nanobind::dict summary_fields(const Summary& summary);

}  // namespace lmtrain::python
