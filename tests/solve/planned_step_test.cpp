// PlannedStep: the one place that plans a step again for a larger batch (keeping the schedule)
// and holds the schedule's start and checks (StepperState).  References: a step planned for the
// larger batch from the start, and StepperState's definition.  The out-of-memory retry is
// checked through the fit run (tests/train/memory_recovery_test.cpp), which steps through it.
#include "lmtrain/solve/planned_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/reference.h"

namespace lmtrain::testing {
namespace {

constexpr std::size_t kIn = 2, kHidden = 6, kSamples = 64;

struct Data {
  std::vector<double> x, y;
};

Data make_data() {
  Rng rng(7);
  Data d{random_vector(kSamples * kIn, rng), std::vector<double>(kSamples)};
  for (std::size_t b = 0; b < kSamples; ++b) d.y[b] = std::tanh(d.x[b * kIn] * d.x[b * kIn + 1]);
  return d;
}

StepProblem problem_for(std::size_t units) {
  StepProblem p;
  p.batch = p.local_batch = units;
  return p;
}

// Steps on batches of 16, 16, then 64 samples: the PlannedStep planned for 16 plans again for
// 64 before the third step, keeping the schedule.  Reference: a step planned for 64 from the
// start, given the schedule and the parameters the first two steps left — the same plan, the
// same sums, so the same parameters and λ bit for bit.
TEST(PlannedStep, PlansAgainForALargerBatchKeepingTheSchedule) {
  const Data d = make_data();
  const ModelSpec spec = ModelSpec::mlp(kIn, {kHidden}, 1, Activation::kTanh);
  SolverOptions o;
  o.max_slice_samples = 16;
  Problem<double> p(spec, LossOptions{}, d.x, d.y, kSamples);
  Rng init(3);
  p.set_params(random_vector(p.model->num_params(), init, 0.7));
  PlannedStep<double> step(o, *p.source, problem_for(16));
  EXPECT_EQ(step.planned_units(), 16u);
  PhaseTimes times;
  for (int k = 0; k < 2; ++k)
    EXPECT_TRUE(step.step(p.params.data(), p.x.data(), p.y.data(), 16, times).accepted);
  const StepperState before = step.state();
  const std::vector<double> theta = p.download(p.params.data(), p.model->num_params());
  EXPECT_NE(before.damping.lambda, o.lambda_initial) << "a schedule that moved, to be kept";
  const StepReport replanned = step.step(p.params.data(), p.x.data(), p.y.data(), kSamples, times);
  EXPECT_EQ(step.planned_units(), kSamples);
  EXPECT_EQ(step.plan().memory.slice_samples, 16u);

  Problem<double> q(spec, LossOptions{}, d.x, d.y, kSamples);
  q.set_params(theta);
  PlannedStep<double> reference(o, *q.source, problem_for(kSamples));
  reference.set_state(before);
  const StepReport expected =
      reference.step(q.params.data(), q.x.data(), q.y.data(), kSamples, times);
  EXPECT_EQ(replanned.lambda, expected.lambda);
  EXPECT_EQ(replanned.attempts, expected.attempts);
  EXPECT_EQ(p.download(p.params.data(), theta.size()), q.download(q.params.data(), theta.size()));
  EXPECT_EQ(step.lambda(), reference.lambda());
}

TEST(PlannedStep, UndoesTheLastStepsSchedule) {
  const Data d = make_data();
  Problem<double> p(ModelSpec::mlp(kIn, {kHidden}, 1, Activation::kTanh), LossOptions{}, d.x, d.y,
                    kSamples);
  Rng init(4);
  p.set_params(random_vector(p.model->num_params(), init, 0.7));
  PlannedStep<double> step(SolverOptions{}, *p.source, problem_for(kSamples));
  PhaseTimes times;
  (void)step.step(p.params.data(), p.x.data(), p.y.data(), kSamples, times);
  const StepperState after_one = step.state();
  (void)step.step(p.params.data(), p.x.data(), p.y.data(), kSamples, times);
  ASSERT_NE(step.state().damping.lambda, after_one.damping.lambda);
  step.undo_last_step();
  EXPECT_EQ(step.state().damping.lambda, after_one.damping.lambda);
  EXPECT_EQ(step.state().damping.nu, after_one.damping.nu);
}

TEST(StepperState, StartsWhereTheOptionsSayAndChecksWhatItIsGiven) {
  SolverOptions o;
  o.lambda_initial = 0.25;
  const StepperState start = StepperState::initial(o);
  EXPECT_EQ(start.damping.lambda, 0.25);
  EXPECT_EQ(start.damping.nu, 2.0);
  EXPECT_EQ(start.damping.floor, 0.0);
  EXPECT_EQ(start.geodesic.skip, 0);
  EXPECT_EQ(start.geodesic.backoff, 0);
  EXPECT_TRUE(start.weight_decays.empty()) << "the penalty keeps its own ρ";
  EXPECT_NO_THROW(start.validate());
  const auto refused = [](auto change, const char* field) {
    StepperState bad = StepperState::initial(SolverOptions{});
    change(bad);
    try {
      bad.validate();
      ADD_FAILURE() << field << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused([](StepperState& s) { s.damping.lambda = 0; }, "lambda");
  refused([](StepperState& s) { s.damping.lambda = std::numeric_limits<double>::infinity(); },
          "lambda");
  refused([](StepperState& s) { s.damping.nu = 0.5; }, "nu");
  refused([](StepperState& s) { s.damping.floor = -1e-9; }, "floor");
  refused([](StepperState& s) { s.geodesic.skip = -1; }, "geodesic_skip");
  refused([](StepperState& s) { s.geodesic.backoff = -2; }, "geodesic_backoff");
  refused([](StepperState& s) { s.weight_decays = {1.0, std::nan("")}; }, "weight_decays");
}

}  // namespace
}  // namespace lmtrain::testing
