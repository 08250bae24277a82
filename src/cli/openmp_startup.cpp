// Before the OpenMP runtime starts: idle OpenMP threads of `lmtrain` sleep instead of spinning,
// unless the user chose a wait policy (include/lmtrain/backend/cpu_threads.h).  libgomp reads
// OMP_WAIT_POLICY in its own initializer, which runs before main; an executable's .preinit_array
// runs before every shared library's initializer (System V gABI, "Initialization and Termination
// Functions"), so this is the one place in the process where setting it still counts.
#include "lmtrain/backend/cpu_threads.h"

namespace {

void prefer_passive_openmp_wait_at_start(int, char**, char**) {
  lmtrain::prefer_passive_openmp_wait();
}

[[gnu::section(".preinit_array"),
  gnu::used]] void (*const passive_openmp_wait)(int, char**,
                                                char**) = prefer_passive_openmp_wait_at_start;

}  // namespace
