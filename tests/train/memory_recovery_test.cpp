// The memory planner against the memory actually allocated, and the trainer's answer to an
// allocation that fails at run time.  A CPU backend with a byte limit plays a device of that
// size: every allocation beyond it throws OutOfMemory, as cudaMalloc would.
#include <gtest/gtest.h>

#include <cmath>

#include "support/reference.h"

namespace lmtrain::testing {
namespace {

constexpr std::size_t kLimit = std::size_t{16} << 20;  // the "device": 16 MiB
constexpr std::size_t kSamples = 600;

Dataset<double> data() {
  Dataset<double> d(kSamples, 4, 3);
  Rng rng(7);
  for (auto& v : d.x) v = rng.normal();
  for (std::size_t i = 0; i < kSamples; ++i)
    for (std::size_t c = 0; c < 3; ++c)
      d.y[i * 3 + c] = std::sin(d.x[i * 4 + c] + 0.5 * d.x[i * 4 + 3]);
  return d;
}

// 795 parameters: A and its factor take 10.1 MB of the 16 MiB, a sample's Jacobian rows 19 KB.
const ModelSpec kSpec = ModelSpec::mlp(4, {24, 24}, 3, Activation::kTanh);

struct Result {
  std::vector<double> params;
  Summary summary;
};

Result train(SolverOptions solver, std::size_t limit) {
  TrainerOptions options;
  options.max_epochs = 3;
  options.seed = 3;
  auto backend = make_cpu_backend<double>(limit);
  Trainer<double> trainer(kSpec, LossOptions{}, solver, options, *backend);
  Result r;
  r.params = Sequential<double>(kSpec, *backend).initial_parameters(Init::kTorch, 3);
  r.summary = trainer.fit(r.params, data());
  return r;
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
  const std::size_t n = Sequential<double>(kSpec, *make_cpu_backend<double>()).num_params();
  const std::size_t data_bytes = kSamples * (4 + 3) * sizeof(double);
  const std::size_t trainer_bytes = (2 * n + kSamples * (4 + 3)) * sizeof(double);
  EXPECT_GT(r.summary.peak_device_bytes, r.summary.planned_peak_bytes / 2);
  EXPECT_LE(r.summary.peak_device_bytes, r.summary.planned_peak_bytes + data_bytes + trainer_bytes)
      << r.summary.full_report();
}

TEST(MemoryPlan, AllocationFailureHalvesTheSliceAndTrainingGoesOn) {
  // A budget twice the device's memory: the plan's slice does not fit, the allocation fails,
  // and the trainer halves the slice until it does.  The run must equal one planned with that
  // slice from the start (the halving happens before the first step).
  SolverOptions solver;
  solver.memory_budget_bytes = 2 * kLimit;
  const Result halved = train(solver, kLimit);
  ASSERT_GE(halved.summary.slice_halvings, 1);
  EXPECT_NE(halved.summary.full_report().find("halved"), std::string::npos);
  EXPECT_NE(halved.summary.slice_halving_cause.find("exceeds the backend's limit"),
            std::string::npos);

  SolverOptions fixed;
  fixed.max_slice_samples = halved.summary.slice_samples;
  const Result reference = train(fixed, 0);
  EXPECT_EQ(reference.summary.slice_samples, halved.summary.slice_samples);
  EXPECT_LE(relative_error(halved.params, reference.params), 1e-12);
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
