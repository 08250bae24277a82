// Issue 36's checks of tests/train/step_reads_test.cpp and epoch_loss_test.cpp on a GPU, where
// each read is a stream synchronization: the LM step's one read per attempt on a W1-shaped run, and
// the epoch's training loss — on a full batch the accepted trial's, with an evaluation's bits; on
// mini-batches one read of an evaluation that runs in one chunk (the GPU's memory allows it),
// against the fp64 CPU backend's evaluation of the same parameters.  Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/lmtrain.h"
#include "support/sinc_data.h"

namespace lmtrain {
namespace {

struct Fit {
  std::vector<float> params;
  Summary summary;
  std::vector<StepReport> steps;
  std::vector<std::int64_t> reads_after;  // per epoch: reads after its last step, to its end
};

Fit train(Backend<float>& gpu, const ModelSpec& spec, std::size_t samples, std::size_t batch,
          int epochs) {
  TrainerOptions options;
  options.max_epochs = epochs;
  options.batch_size = batch;
  options.seed = 3;
  SolverOptions solver;
  solver.system_precision = SystemPrecision::kModel;  // float32 throughout, as W1
  Trainer<float> trainer(spec, LossOptions{}, solver, options, gpu);
  Fit fit;
  std::uint64_t reads_at_step = 0;
  trainer.add_callback([&](const IterationSummary& it) {
    reads_at_step = gpu.host_reads();
    fit.steps.push_back(it.report);
    return CallbackResult::kContinue;
  });
  trainer.set_epoch_callback([&](const EpochRecord&) {
    fit.reads_after.push_back(static_cast<std::int64_t>(gpu.host_reads() - reads_at_step));
  });
  fit.params = Sequential<float>(spec, gpu).initial_parameters(Init::kTorch, 3);
  fit.summary = trainer.fit(fit.params, testing::sinc_on_grid<float>(samples));
  return fit;
}

TEST(CudaTrainingReads, OnePerAttemptOnW1Shape) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto gpu = make_cuda_backend<float>(0);
  const Fit fit = train(*gpu, ModelSpec::mlp(1, {20}, 1, Activation::kTanh), 20000, 1000, 1);
  ASSERT_TRUE(fit.summary.geodesic_acceleration);
  int kept = 0;
  for (const StepReport& r : fit.steps) {
    EXPECT_EQ(r.host_reads, 1 + r.attempts);  // the linearization, then one per attempt
    kept += r.geodesic_applied;
  }
  EXPECT_GT(kept, 0);  // corrections decided on the device were kept
}

TEST(CudaTrainingReads, EpochLossWithoutRepeatedWork) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  auto gpu = make_cuda_backend<float>(0);
  auto cpu = make_cpu_backend<double>();
  const auto spec = ModelSpec::mlp(1, {64}, 1, Activation::kTanh);

  // Full batch: no evaluation after the steps; the loss has an evaluation's bits.
  const Fit full = train(*gpu, spec, 500, 0, 3);
  for (const std::int64_t reads : full.reads_after) EXPECT_EQ(reads, 0);
  EXPECT_EQ(full.summary.times[Phase::kValidation], 0.0);
  EXPECT_EQ(full.summary.final_loss,
            evaluate(spec, LossOptions{}, full.params, testing::sinc_on_grid<float>(500), *gpu));

  // Mini-batches: one read per evaluation, of one chunk of all 20 000 samples (their activations
  // were held at once), equal to the fp64 CPU's loss of the same parameters.
  constexpr std::size_t kSamples = 20000;
  const Fit mini = train(*gpu, spec, kSamples, 1000, 2);
  for (std::size_t e = 0; e < mini.reads_after.size(); ++e)
    EXPECT_EQ(mini.reads_after[e], mini.summary.history[e].accepted > 0 ? 1 : 0);
  EXPECT_GT(mini.summary.times[Phase::kValidation], 0.0);
  const std::size_t whole_set =
      kSamples * Sequential<float>(spec, *gpu).activation_floats_per_sample() * sizeof(float);
  EXPECT_GE(mini.summary.peak_device_bytes, whole_set);
  const Dataset<float> data = testing::sinc_on_grid<float>(kSamples);
  Dataset<double> wide(kSamples, 1, 1);
  for (std::size_t i = 0; i < kSamples; ++i) {
    wide.x[i] = data.x[i];
    wide.y[i] = data.y[i];
  }
  const double reference = evaluate(
      spec, LossOptions{}, std::vector<double>(mini.params.begin(), mini.params.end()), wide, *cpu);
  EXPECT_NEAR(mini.summary.final_loss, reference, 1e-4 * reference);
}

}  // namespace
}  // namespace lmtrain
