// Each step's own phases (IterationSummary::step_times): what the run's phase table gained over
// the step, so that a caller can take per-phase medians where the Summary gives run totals
// (bench/lmtrain_workloads' per-step phases, issue 36).  Against the Summary: over the run the
// steps' phases add up to its totals of every phase a step runs, and hold none of the epoch's
// evaluation.
#include <gtest/gtest.h>

#include <vector>

#include "lmtrain/lmtrain.h"
#include "support/sinc_data.h"

namespace lmtrain {
namespace {

TEST(StepTimes, TheStepsPhasesAddUpToTheRunsTotals) {
  auto backend = make_cpu_backend<double>();
  const auto spec = ModelSpec::mlp(1, {8}, 1, Activation::kTanh);
  TrainerOptions options;
  options.max_epochs = 3;
  options.batch_size = 100;
  options.seed = 7;
  Trainer<double> trainer(spec, LossOptions{}, SolverOptions{}, options, *backend);
  std::vector<PhaseTimes> steps;
  trainer.add_callback([&](const IterationSummary& it) {
    steps.push_back(it.step_times);
    return CallbackResult::kContinue;
  });
  std::vector<double> params =
      Sequential<double>(spec, *backend).initial_parameters(Init::kTorch, 7);
  const Summary summary = trainer.fit(params, testing::sinc_on_grid<double>(500, 4.0));
  ASSERT_EQ(steps.size(), 15u);
  PhaseTimes sum;
  for (const PhaseTimes& t : steps) {
    for (double s : t.seconds) EXPECT_GE(s, 0.0);
    EXPECT_GT(t[Phase::kNormalEquations], 0.0);  // every step forms A
    EXPECT_GT(t[Phase::kFactorization], 0.0);
    EXPECT_EQ(t[Phase::kValidation], 0.0);  // the epoch's evaluation runs after its last step
    for (std::size_t p = 0; p < sum.seconds.size(); ++p) sum.seconds[p] += t.seconds[p];
  }
  for (const Phase p : {Phase::kForward, Phase::kJacobian, Phase::kNormalEquations,
                        Phase::kFactorization, Phase::kTrialEvaluation, Phase::kGeodesic}) {
    EXPECT_NEAR(sum[p], summary.times[p], 1e-12 * summary.times[p] + 1e-15) << phase_name(p);
  }
  EXPECT_GT(summary.times[Phase::kValidation], 0.0);
  EXPECT_LE(sum[Phase::kOther], summary.times[Phase::kOther]);  // not the batches' loading
}

}  // namespace
}  // namespace lmtrain
