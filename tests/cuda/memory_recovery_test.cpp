// The trainer's answer to a failed device allocation, on a GPU.  A CUDA backend limited to 16 MiB
// (make_cuda_backend's limit; LMTRAIN_CUDA_MEMORY_LIMIT_BYTES sets the same for the command-line
// tool) is given a memory budget of twice that: the planned slice does not fit, an allocation
// fails, and the trainer halves the slice until it does, as tests/train/memory_recovery_test.cpp
// checks on the CPU.  Skips without a CUDA device.
#include "support/memory_recovery.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "lmtrain/backend/cuda_backend.h"

namespace lmtrain::testing {
namespace {

using memory_recovery::kLimit;
using memory_recovery::Result;
using memory_recovery::train;

TEST(CudaMemoryRecovery, AllocationFailureHalvesTheSliceAndTrainingGoesOn) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  SolverOptions solver;
  solver.memory_budget_bytes = 2 * kLimit;
  auto limited = make_cuda_backend<double>(0, kLimit);
  const Result halved = train(*limited, solver);
  ASSERT_GE(halved.summary.slice_halvings, 1) << halved.summary.full_report();
  EXPECT_NE(halved.summary.slice_halving_cause.find("exceeds the backend's limit"),
            std::string::npos)
      << halved.summary.slice_halving_cause;
  EXPECT_EQ(halved.summary.termination, TerminationReason::kMaxEpochs);
  EXPECT_LE(halved.summary.peak_device_bytes, kLimit);

  // The same training planned with the halved slice from the start: identical on the GPU (the
  // halving happens before the first step; cuBLAS and the kernels are deterministic), and on the
  // CPU equal up to the rounding differences of two BLAS implementations in float64 over 3 epochs
  // (measured between rank counts, which reorder the same sums: ≤ 1e-10; asserted 1e-7).
  SolverOptions fixed;
  fixed.max_slice_samples = halved.summary.slice_samples;
  auto unlimited = make_cuda_backend<double>(0, 0);
  const Result reference = train(*unlimited, fixed);
  EXPECT_EQ(reference.summary.slice_halvings, 0);
  EXPECT_EQ(reference.summary.slice_samples, halved.summary.slice_samples);
  EXPECT_LE(relative_error(halved.params, reference.params), 1e-12);
  EXPECT_EQ(halved.summary.accepted_steps, reference.summary.accepted_steps);

  auto cpu = make_cpu_backend<double>();
  const Result on_cpu = train(*cpu, fixed);
  EXPECT_LE(relative_error(halved.params, on_cpu.params), 1e-7);
  EXPECT_EQ(halved.summary.accepted_steps, on_cpu.summary.accepted_steps);
}

TEST(CudaMemoryRecovery, EnvironmentLimitsTheBackend) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  ::setenv("LMTRAIN_CUDA_MEMORY_LIMIT_BYTES", "1048576", 1);
  auto backend = make_cuda_backend<float>(0);
  ::unsetenv("LMTRAIN_CUDA_MEMORY_LIMIT_BYTES");
  EXPECT_NE(backend->name().find("memory limited to 1.0 MiB"), std::string::npos)
      << backend->name();
  EXPECT_LE(backend->available_memory_bytes(), std::size_t{1} << 20);
  EXPECT_THROW((void)backend->allocate(std::size_t{1} << 20), OutOfMemory);  // 4 MiB of floats
  DeviceBuffer<float> fits = backend->allocate(1000);
  EXPECT_EQ(fits.size(), 1000u);

  ::setenv("LMTRAIN_CUDA_MEMORY_LIMIT_BYTES", "lots", 1);
  EXPECT_THROW((void)make_cuda_backend<float>(0), InvalidArgument);
  ::unsetenv("LMTRAIN_CUDA_MEMORY_LIMIT_BYTES");
}

}  // namespace
}  // namespace lmtrain::testing
