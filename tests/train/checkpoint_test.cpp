// Resuming from a TrainingState reproduces the uninterrupted run bit for bit: from an epoch
// boundary and from the middle of an epoch, with and without validation.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <numbers>
#include <optional>

#include "support/reference.h"

namespace lmtrain::testing {
namespace {

Dataset<double> noisy_sinc(std::size_t samples, std::uint64_t seed) {
  Dataset<double> d(samples, 1, 1);
  Rng rng(seed);
  for (std::size_t i = 0; i < samples; ++i) {
    const double x = rng.uniform(-1, 1), t = std::numbers::pi * 4 * x;
    d.x[i] = x;
    d.y[i] = (t == 0 ? 1.0 : std::sin(t) / t) + 0.05 * rng.normal();
  }
  return d;
}

const ModelSpec kNet = ModelSpec::mlp(1, {10}, 1, Activation::kTanh);

struct Outcome {
  std::vector<double> params;
  Summary summary;
  std::optional<TrainingState<double>> state;  // the last checkpoint handed out
};

// Trains from scratch (or from `resume`); raises the stop flag after `stop_after_step` steps.
Outcome run(const Dataset<double>& train, const Dataset<double>* validation,
            const TrainingState<double>* resume, int stop_after_step, int checkpoint_every,
            Regularization regularization = Regularization::kNone,
            const std::function<void(SolverOptions&)>& tweak = {}, const ModelSpec& net = kNet,
            const LossOptions& loss = {}) {
  auto backend = make_cpu_backend<double>();
  SolverOptions solver;
  solver.damping = DampingType::kNielsen;
  solver.regularization = regularization;
  if (tweak) tweak(solver);
  TrainerOptions trainer;
  trainer.max_epochs = 7;
  trainer.batch_size = 30;
  trainer.seed = 42;
  trainer.max_validation_failures = 100;
  Trainer<double> t(net, loss, solver, trainer, *backend);
  std::atomic<bool> stop{false};
  Outcome out;
  t.set_stop_flag(&stop);
  t.set_checkpoint_handler([&out](const TrainingState<double>& s) { out.state = s; },
                           checkpoint_every);
  t.add_callback([&](const IterationSummary& it) {
    if (it.step == stop_after_step) stop = true;
    return CallbackResult::kContinue;
  });
  out.params = Sequential<double>(net, *backend).initial_parameters(Init::kTorch, 3);
  out.summary = t.fit(out.params, train, validation, resume);
  return out;
}

class Resume : public ::testing::TestWithParam<int> {};

TEST_P(Resume, ContinuesBitIdenticallyToTheUninterruptedRun) {
  const int stop_step = GetParam();  // 4 batches per epoch: 8 is an epoch end, 10 mid-epoch
  const Dataset<double> train = noisy_sinc(120, 1), validation = noisy_sinc(40, 2);
  for (const Dataset<double>* valid : {static_cast<const Dataset<double>*>(nullptr), &validation}) {
    const Outcome straight = run(train, valid, nullptr, -1, 0);
    const Outcome interrupted = run(train, valid, nullptr, stop_step, 0);
    ASSERT_EQ(interrupted.summary.termination, TerminationReason::kInterrupted);
    ASSERT_TRUE(interrupted.state.has_value());
    EXPECT_EQ(interrupted.summary.steps, stop_step);
    const Outcome resumed = run(train, valid, &*interrupted.state, -1, 0);
    EXPECT_EQ(resumed.summary.termination, TerminationReason::kMaxEpochs);
    EXPECT_EQ(resumed.params, straight.params);  // bit for bit
    EXPECT_EQ(resumed.summary.steps, straight.summary.steps);
    EXPECT_EQ(resumed.summary.accepted_steps, straight.summary.accepted_steps);
    EXPECT_EQ(resumed.summary.rejected_steps, straight.summary.rejected_steps);
    ASSERT_EQ(resumed.summary.history.size(), straight.summary.history.size());
    for (std::size_t e = 0; e < straight.summary.history.size(); ++e) {
      EXPECT_EQ(resumed.summary.history[e].training_loss,
                straight.summary.history[e].training_loss);
      EXPECT_EQ(resumed.summary.history[e].accepted, straight.summary.history[e].accepted);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(StopPoints, Resume, ::testing::Values(3, 8, 10));

TEST(Checkpoints, EvidenceRegularizationResumesBitIdentically) {
  // ρ (bayesian) or every group's ρ (ard) is re-estimated every step: the checkpoint carries them.
  const Dataset<double> train = noisy_sinc(120, 1);
  for (const Regularization r : {Regularization::kBayesian, Regularization::kArd}) {
    SCOPED_TRACE(std::string(to_string(r)));
    const Outcome straight = run(train, nullptr, nullptr, -1, 0, r);
    const Outcome interrupted = run(train, nullptr, nullptr, 9, 0, r);
    ASSERT_TRUE(interrupted.state.has_value());
    const std::vector<double>& rho = interrupted.state->stepper.weight_decays;
    // 1-H-1: one input group, the hidden bias, the output weights and bias for ard, each with
    // its ρ and its own estimate, and the common level between them.
    ASSERT_EQ(rho.size(), r == Regularization::kArd ? 9u : 1u);
    for (const double v : rho) EXPECT_GT(v, 0);
    const Outcome resumed = run(train, nullptr, &*interrupted.state, -1, 0, r);
    EXPECT_EQ(resumed.params, straight.params);
    EXPECT_EQ(resumed.summary.final_weight_decay, straight.summary.final_weight_decay);
    ASSERT_EQ(resumed.summary.penalty_groups.size(), straight.summary.penalty_groups.size());
    for (std::size_t g = 0; g < straight.summary.penalty_groups.size(); ++g)
      EXPECT_EQ(resumed.summary.penalty_groups[g].weight_decay,
                straight.summary.penalty_groups[g].weight_decay);
  }
}

TEST(Checkpoints, PeriodicCheckpointsAreEpochBoundaries) {
  const Dataset<double> train = noisy_sinc(120, 1);
  const Outcome straight = run(train, nullptr, nullptr, -1, 3);
  ASSERT_TRUE(straight.state.has_value());
  EXPECT_EQ(straight.state->epochs_done, 6);  // epochs 3 and 6 of 7
  EXPECT_EQ(straight.state->batches_done, 0u);
  const Outcome resumed = run(train, nullptr, &*straight.state, -1, 0);
  EXPECT_EQ(resumed.params, straight.params);
  EXPECT_EQ(resumed.summary.epochs, 7);
}

TEST(Checkpoints, GeodesicBackoffResumesBitIdentically) {
  // A ratio so small that every correction is refused: the backoff skips 1, 2, 4, 4 … attempts,
  // so whether the attempt after the checkpoint computes one depends on the state it carries.
  // Cholesky: with 30 rows per batch and 31 parameters, auto would pick the dual form, which
  // has no geodesic acceleration; the backoff's cap given, as auto is 0 for a float64 model.
  const Dataset<double> train = noisy_sinc(120, 1);
  const auto run_with = [&](const TrainingState<double>* resume, int stop_after_step) {
    return run(train, nullptr, resume, stop_after_step, 0, Regularization::kNone,
               [](SolverOptions& o) {
                 o.geodesic_ratio = 1e-9;
                 o.geodesic_backoff_max = 4;
                 o.linear_solver = LinearSolverType::kCholesky;
               });
  };
  const Outcome straight = run_with(nullptr, -1);
  EXPECT_EQ(straight.summary.geodesic_applied, 0);
  EXPECT_GT(straight.summary.geodesic_skipped, straight.summary.geodesic_refused);
  EXPECT_EQ(straight.summary.geodesic_refused + straight.summary.geodesic_skipped,
            straight.summary.accepted_steps + straight.summary.rejected_steps +
                straight.summary.invalid_steps);
  const Outcome interrupted = run_with(nullptr, 9);
  ASSERT_TRUE(interrupted.state.has_value());
  const GeodesicBackoff::State g = interrupted.state->stepper.geodesic;
  ASSERT_GT(g.backoff, 0);
  const Outcome resumed = run_with(&*interrupted.state, -1);
  EXPECT_EQ(resumed.params, straight.params);
  EXPECT_EQ(resumed.summary.geodesic_refused, straight.summary.geodesic_refused);
  EXPECT_EQ(resumed.summary.geodesic_skipped, straight.summary.geodesic_skipped);
  // The state matters: resumed from the same point with the backoff forgotten, the attempts
  // that compute a correction shift and so do the counts.
  TrainingState<double> forgotten = *interrupted.state;
  forgotten.stepper.geodesic = {g.skip > 0 ? 0 : 1, 0};
  const Outcome other = run_with(&forgotten, -1);
  EXPECT_NE(other.summary.geodesic_refused, straight.summary.geodesic_refused);
}

TEST(Checkpoints, SampledCrossEntropyDrawsResumeBitIdentically) {
  // cross_entropy_sampled draws each step's rows from the rank and the step count: a resumed run
  // draws what the uninterrupted one did.  Three classes by the sign pattern of two inputs.
  Dataset<double> train(120, 2, 3);
  Rng rng(5);
  for (std::size_t i = 0; i < train.samples; ++i) {
    const double a = rng.uniform(-1, 1), b = rng.uniform(-1, 1);
    train.x[2 * i] = a;
    train.x[2 * i + 1] = b;
    const std::size_t label = a > 0 ? (b > 0 ? 0 : 1) : 2;
    for (std::size_t k = 0; k < 3; ++k) train.y[3 * i + k] = k == label ? 1.0 : 0.0;
  }
  const ModelSpec net = ModelSpec::mlp(2, {6}, 3, Activation::kTanh);
  LossOptions loss;
  loss.kind = LossKind::kCrossEntropySampled;
  const auto run_with = [&](const TrainingState<double>* resume, int stop_after_step) {
    return run(train, nullptr, resume, stop_after_step, 0, Regularization::kNone, {}, net, loss);
  };
  const Outcome straight = run_with(nullptr, -1);
  const Outcome interrupted = run_with(nullptr, 10);
  ASSERT_TRUE(interrupted.state.has_value());
  const Outcome resumed = run_with(&*interrupted.state, -1);
  EXPECT_EQ(resumed.params, straight.params);
  EXPECT_EQ(resumed.summary.rejected_steps, straight.summary.rejected_steps);
  EXPECT_LT(straight.summary.history.back().training_loss,
            0.5 * straight.summary.history.front().training_loss);
}

}  // namespace
}  // namespace lmtrain::testing
