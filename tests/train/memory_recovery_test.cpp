// The memory planner against the memory actually allocated, and the trainer's answer to an
// allocation that fails at run time.  A CPU backend with a byte limit plays a device of that
// size: every allocation beyond it throws OutOfMemory, as cudaMalloc would.
#include "support/memory_recovery.h"

#include <gtest/gtest.h>

#include "support/spread.h"

namespace lmtrain::testing {
namespace {

using memory_recovery::kLimit;
using memory_recovery::kSamples;
using memory_recovery::Result;

// The shared problem on a CPU backend limited to `limit` bytes (0: no limit).
Result train(const SolverOptions& solver, std::size_t limit) {
  auto backend = make_cpu_backend<double>(limit);
  return memory_recovery::train(*backend, solver);
}

TEST(MemoryPlan, FitsTheDeviceItMeasured) {
  // Plan from what the limited device reports free, as on a GPU (cudaMemGetInfo): everything
  // the step, the engine and the data allocate must then fit without a single halving.
  SolverOptions solver;
  solver.memory_fraction = 0.9;
  const Result r = train(solver, kLimit);
  EXPECT_EQ(r.summary.slice_halvings, 0) << r.summary.full_report();
  EXPECT_LT(r.summary.slice_samples, kSamples) << "the budget should limit the slice";
  EXPECT_EQ(r.summary.termination, TerminationReason::kMaxEpochs);
  // Measured against planned: the step's plan plus the training set (x and y, held whole on
  // the device) and the trainer's parameter, best-model and batch buffers.
  const std::size_t n =
      Sequential<double>(memory_recovery::spec(), *make_cpu_backend<double>()).num_params();
  const std::size_t data_bytes = kSamples * (4 + 3) * sizeof(double);
  const std::size_t trainer_bytes = (2 * n + kSamples * (4 + 3)) * sizeof(double);
  EXPECT_GT(r.summary.peak_device_bytes, r.summary.planned_peak_bytes / 2);
  EXPECT_LE(r.summary.peak_device_bytes, r.summary.planned_peak_bytes + data_bytes + trainer_bytes)
      << r.summary.full_report();
}

TEST(MemoryPlan, AllocationFailureHalvesTheSliceAndTrainingGoesOn) {
  // A budget twice the device's memory: the plan's slice does not fit, the allocation fails,
  // and the trainer halves the slice until it does.  The run must equal one planned with that
  // slice from the start (the halving happens before the first step).  The device's size lies
  // between what the planned slice and half of it take (both measured without a limit): the
  // slice the CPU backend prefers grows with its threads (one thread plans a cache-sized slice
  // that fits kLimit), and the test must not depend on OMP_NUM_THREADS.
  SolverOptions solver;
  solver.memory_budget_bytes = 2 * kLimit;
  const Result planned = train(solver, 0);
  ASSERT_GE(planned.summary.slice_samples, 2u);
  SolverOptions half = solver;
  half.max_slice_samples = planned.summary.slice_samples / 2;
  const std::size_t half_peak = train(half, 0).summary.peak_device_bytes;
  ASSERT_LT(half_peak, planned.summary.peak_device_bytes);
  const Result halved = train(solver, (half_peak + planned.summary.peak_device_bytes) / 2);
  ASSERT_GE(halved.summary.slice_halvings, 1);
  EXPECT_NE(halved.summary.full_report().find("halved"), std::string::npos);
  EXPECT_NE(halved.summary.slice_halving_cause.find("exceeds the backend's limit"),
            std::string::npos);

  SolverOptions fixed;
  fixed.max_slice_samples = halved.summary.slice_samples;
  const Result reference = train(fixed, 0);
  EXPECT_EQ(reference.summary.slice_samples, halved.summary.slice_samples);
  // The same slices, the same arithmetic: bit for bit on every kernel path of
  // scripts/measure-spread.sh (a different slice would differ by rounding).
  expect_within("parameters", relative_error(halved.params, reference.params), 1e-12);
  EXPECT_EQ(halved.summary.accepted_steps, reference.summary.accepted_steps);
}

TEST(MemoryPlan, ProblemThatCannotFitFailsBeforeTrainingWithTheSizes) {
  // 4 MiB cannot hold A = JᵀJ (5 MB): a clear error before training, naming the way out.
  SolverOptions solver;
  solver.linear_solver = LinearSolverType::kCholesky;
  try {
    (void)train(solver, std::size_t{4} << 20);
    FAIL() << "expected MemoryPlanError";
  } catch (const MemoryPlanError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("795 parameters"), std::string::npos) << what;
    EXPECT_NE(what.find("cg"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace lmtrain::testing
