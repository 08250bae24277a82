// How many threads the CPU backend runs on.  By default lmtrain chooses per phase of the LM step
// (forward, Jacobian, SYRK, factorization, …) from the phase's own measured times, so that a
// machine shared with other processes never makes the defaults much slower than one thread
// (docs/design.md, "CPU performance notes").  A user's OMP_NUM_THREADS or OPENBLAS_NUM_THREADS,
// or set_cpu_threads, fixes the count instead.  OpenMP settings under which OpenBLAS would wait
// forever for threads the runtime never starts (OMP_DYNAMIC=true, OMP_THREAD_LIMIT,
// OMP_MAX_ACTIVE_LEVELS=0, more threads than cores) are neutralized where lmtrain calls BLAS; the
// Summary's "Threads" lines say what was used and why.
#pragma once

namespace lmtrain {

// 0 (the default): lmtrain chooses, as above.  n ≥ 1: every phase runs on n threads (at most the
// processors this process may run on); BLAS calls below 2^28 multiply-adds still run on one.
// Takes effect for backends made afterwards.
void set_cpu_threads(int threads);

// For an executable's start-up: sets OMP_WAIT_POLICY=passive when neither OMP_WAIT_POLICY nor
// GOMP_SPINCOUNT is set, so that idle OpenMP threads sleep instead of spinning for ~300 000
// iterations (libgomp's default) on cores another process needs.  libgomp reads its environment
// once, when it is loaded, so this works only from a function in the executable's
// .preinit_array, which runs before any shared library's initializer (src/cli/openmp_startup.cpp).
// Returns whether it set the variable.  glibc restores the original environment before main, so
// child processes do not inherit it.
bool prefer_passive_openmp_wait();

// Records that lmtrain set OMP_WAIT_POLICY=passive before the OpenMP runtime started (the Python
// package sets it itself before loading its extension), for the Summary.
void note_passive_openmp_wait_set_by_lmtrain();

}  // namespace lmtrain
