// Every termination criterion, triggered on purpose, with the reported reason checked.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "support/reference.h"

namespace lmtrain::testing {
namespace {

Dataset<double> sinc_data(std::size_t samples, std::uint64_t seed, double sign = 1.0) {
  Dataset<double> d(samples, 1, 1);
  Rng rng(seed);
  for (std::size_t i = 0; i < samples; ++i) {
    const double x = rng.uniform(-1, 1), t = std::numbers::pi * 5 * x;
    d.x[i] = x;
    d.y[i] = sign * (t == 0 ? 1.0 : std::sin(t) / t);
  }
  return d;
}

// y = x exactly for x = ±1 and y = ±1 at x = 0: the least-squares line y = x has residuals
// (0, 0, −1, 1) and a gradient that is exactly zero.
Dataset<double> exact_minimum_data() {
  Dataset<double> d(4, 1, 1);
  d.x = {1, -1, 0, 0};
  d.y = {1, -1, 1, -1};
  return d;
}

struct TrainedRun {
  Summary summary;
  std::vector<double> params;
};

TrainedRun train(const ModelSpec& spec, const Dataset<double>& data, SolverOptions solver,
                 TrainerOptions trainer, const Dataset<double>* validation = nullptr,
                 std::vector<double> params = {}, IterationCallback callback = {}) {
  auto backend = make_cpu_backend<double>();
  Trainer<double> t(spec, LossOptions{}, solver, trainer, *backend);
  if (callback) t.add_callback(callback);
  if (params.empty())
    params = Sequential<double>(spec, *backend).initial_parameters(Init::kTorch, 1);
  TrainedRun run;
  run.summary = t.fit(params, data, validation);
  run.params = params;
  return run;
}

const ModelSpec kSmallNet = ModelSpec::mlp(1, {8}, 1, Activation::kTanh);

TEST(Termination, MaxEpochs) {
  TrainerOptions t;
  t.max_epochs = 3;
  t.batch_size = 50;
  const TrainedRun r = train(kSmallNet, sinc_data(200, 1), {}, t);
  EXPECT_EQ(r.summary.termination, TerminationReason::kMaxEpochs);
  EXPECT_EQ(r.summary.epochs, 3);
  EXPECT_EQ(r.summary.steps, 12);
  EXPECT_EQ(r.summary.history.size(), 3u);
  EXPECT_LT(r.summary.final_loss, r.summary.initial_loss);
}

TEST(Termination, LambdaAboveMaxWhenNoStepCanLowerTheLoss) {
  SolverOptions s;
  s.damping = DampingType::kMultiplicative;
  s.lambda_max = 1e-1;
  s.max_attempts = 50;
  const TrainedRun r =
      train(ModelSpec(1).dense(1), exact_minimum_data(), s, {}, nullptr, {1.0, 0.0});
  EXPECT_EQ(r.summary.termination, TerminationReason::kLambdaAboveMax);
  EXPECT_EQ(r.summary.accepted_steps, 0);
  // λ = 1e-3 and 1e-2 are tried; the raise to 1e-1 = lambda_max ends training (the peers' test).
  EXPECT_EQ(r.summary.rejected_steps, 2);
  EXPECT_EQ(r.params, (std::vector<double>{1.0, 0.0}));
}

TEST(Termination, GradientTolerance) {
  SolverOptions s;
  s.gradient_tolerance = 1e-12;
  const TrainedRun r =
      train(ModelSpec(1).dense(1), exact_minimum_data(), s, {}, nullptr, {1.0, 0.0});
  EXPECT_EQ(r.summary.termination, TerminationReason::kGradientTolerance);
  EXPECT_TRUE(r.summary.converged());
  EXPECT_EQ(r.summary.steps, 1);
}

TEST(Termination, FunctionToleranceOnALinearProblem) {
  // A linear least-squares problem is solved in one step up to the effect of λ = 1e-3; the next
  // step's relative decrease is tiny.
  SolverOptions s;
  s.function_tolerance = 1e-6;
  TrainerOptions t;
  t.max_epochs = 100;
  const TrainedRun r = train(ModelSpec(1).dense(1), sinc_data(100, 3), s, t);
  EXPECT_EQ(r.summary.termination, TerminationReason::kFunctionTolerance);
  EXPECT_LT(r.summary.epochs, 10);
}

TEST(Termination, ParameterTolerance) {
  SolverOptions s;
  s.parameter_tolerance = 1e-6;
  TrainerOptions t;
  t.max_epochs = 100;
  const TrainedRun r = train(ModelSpec(1).dense(1), sinc_data(100, 3), s, t);
  EXPECT_EQ(r.summary.termination, TerminationReason::kParameterTolerance);
  EXPECT_LT(r.summary.epochs, 20);
}

TEST(Termination, LossGoal) {
  TrainerOptions t;
  t.max_epochs = 200;
  t.loss_goal = 1e-3;
  const TrainedRun r = train(kSmallNet, sinc_data(200, 2), {}, t);
  EXPECT_EQ(r.summary.termination, TerminationReason::kLossGoal);
  EXPECT_LE(r.summary.final_loss, 1e-3);
  ASSERT_GE(r.summary.history.size(), 2u);
  EXPECT_GT(r.summary.history[r.summary.history.size() - 2].training_loss, 1e-3);
}

TEST(Termination, TimeBudget) {
  TrainerOptions t;
  t.max_epochs = 1000;
  t.batch_size = 20;
  t.max_time_seconds = 1e-9;
  const TrainedRun r = train(kSmallNet, sinc_data(200, 2), {}, t);
  EXPECT_EQ(r.summary.termination, TerminationReason::kTimeBudget);
  EXPECT_EQ(r.summary.steps, 1);
}

TEST(Termination, ValidationMaxFailRestoresTheBestModel) {
  // The validation targets are the negated training targets: fitting one unfits the other.
  const Dataset<double> training = sinc_data(200, 4), validation = sinc_data(100, 5, -1.0);
  TrainerOptions t;
  t.max_epochs = 100;
  t.max_validation_failures = 3;
  const TrainedRun r = train(kSmallNet, training, {}, t, &validation);
  EXPECT_EQ(r.summary.termination, TerminationReason::kValidationMaxFail);
  EXPECT_EQ(r.summary.epochs, r.summary.best_epoch + 3);
  EXPECT_TRUE(r.summary.restored_best);
  auto backend = make_cpu_backend<double>();
  Trainer<double> evaluator(kSmallNet, LossOptions{}, {}, {}, *backend);
  EXPECT_NEAR(evaluator.evaluate(r.params, validation), r.summary.best_validation_loss,
              1e-12 * r.summary.best_validation_loss);
  // The final figures are the restored network's: its validation loss, and its training loss
  // evaluated on it (not the last epoch's, whose network was discarded).
  EXPECT_EQ(r.summary.final_validation_loss, r.summary.best_validation_loss);
  EXPECT_NEAR(evaluator.evaluate(r.params, training), r.summary.final_loss,
              1e-12 * r.summary.final_loss);
  EXPECT_GT(r.summary.history.back().validation_loss, r.summary.final_validation_loss);
}

TEST(Termination, UserCallback) {
  TrainerOptions t;
  t.max_epochs = 10;
  t.batch_size = 20;
  int calls = 0;
  const TrainedRun r =
      train(kSmallNet, sinc_data(200, 2), {}, t, nullptr, {}, [&calls](const IterationSummary& it) {
        ++calls;
        return it.step == 3 ? CallbackResult::kStop : CallbackResult::kContinue;
      });
  EXPECT_EQ(r.summary.termination, TerminationReason::kUserCallback);
  EXPECT_EQ(r.summary.steps, 3);
  EXPECT_EQ(calls, 3);
}

TEST(Termination, NonFiniteLossStopsWithADiagnostic) {
  // Float overflow: 3e38 · w with |w| > 1.2 is +∞ in float32.
  Dataset<float> d(3, 1, 1);
  d.x = {3e38f, 1.0f, -2.0f};
  d.y = {0.0f, 1.0f, 0.5f};
  auto backend = make_cpu_backend<float>();
  Trainer<float> t(ModelSpec(1).dense(1), LossOptions{}, {}, {}, *backend);
  std::vector<float> params = {2.0f, 0.0f};
  const Summary s = t.fit(params, d);
  EXPECT_EQ(s.termination, TerminationReason::kNonFiniteObjective);
  EXPECT_NE(s.message.find("not finite"), std::string::npos) << s.message;
  EXPECT_EQ(params, (std::vector<float>{2.0f, 0.0f}));
}

TEST(Termination, OverflowingJacobianWithAFiniteLossStopsLikeANonFiniteLoss) {
  // F is accumulated in double and stays finite (≈1e39), but float32 A = Σ x² overflows.
  Dataset<float> d(3, 1, 1);
  d.x = {1e20f, -1e20f, 3e19f};
  d.y = {1.0f, 2.0f, 3.0f};
  auto backend = make_cpu_backend<float>();
  Trainer<float> t(ModelSpec(1).dense(1), LossOptions{}, {}, {}, *backend);
  std::vector<float> params = {0.5f, 0.0f};
  const Summary s = t.fit(params, d);
  EXPECT_TRUE(std::isfinite(s.initial_loss));
  EXPECT_EQ(s.termination, TerminationReason::kNonFiniteObjective);
  EXPECT_NE(s.message.find("Jacobian"), std::string::npos) << s.message;
  EXPECT_EQ(params, (std::vector<float>{0.5f, 0.0f}));
}

TEST(TrainerInput, NonFiniteDataIsRejectedNamingSampleAndColumn) {
  Dataset<double> d = sinc_data(10, 1);
  d.y[7] = std::nan("");
  auto backend = make_cpu_backend<double>();
  Trainer<double> t(kSmallNet, LossOptions{}, {}, {}, *backend);
  std::vector<double> params =
      Sequential<double>(kSmallNet, *backend).initial_parameters(Init::kTorch, 0);
  try {
    t.fit(params, d);
    FAIL() << "NaN target accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("target of sample 7 column 0"), std::string::npos)
        << e.what();
  }
}

TEST(TrainerInput, MemoryBudgetTooSmallFailsBeforeTraining) {
  SolverOptions s;
  s.memory_budget_bytes = 1000;
  auto backend = make_cpu_backend<double>();
  Trainer<double> t(kSmallNet, LossOptions{}, s, {}, *backend);
  std::vector<double> params =
      Sequential<double>(kSmallNet, *backend).initial_parameters(Init::kTorch, 0);
  const std::vector<double> before = params;
  EXPECT_THROW(t.fit(params, sinc_data(100, 1)), MemoryPlanError);
  EXPECT_EQ(params, before);
}

}  // namespace
}  // namespace lmtrain::testing
