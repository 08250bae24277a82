// Options validation: every violated constraint is reported with the field, its value and the
// constraint, and valid defaults pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>

#include "lmtrain/core/rng.h"
#include "lmtrain/lmtrain.h"
#include "lmtrain/solve/geodesic_acceleration.h"

namespace lmtrain {
namespace {

struct BadSolverField {
  std::string field;
  std::function<void(SolverOptions&)> spoil;
  std::string value_text;
};

class SolverOptionsValidation : public ::testing::TestWithParam<BadSolverField> {};

TEST_P(SolverOptionsValidation, MessageNamesFieldValueAndConstraint) {
  SolverOptions o;
  GetParam().spoil(o);
  std::string error;
  EXPECT_FALSE(o.is_valid(&error));
  EXPECT_NE(error.find("SolverOptions::" + GetParam().field + " = " + GetParam().value_text),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("violates"), std::string::npos) << error;
  EXPECT_THROW(o.validate(), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    EachField, SolverOptionsValidation,
    ::testing::Values(
        BadSolverField{"lambda_min", [](SolverOptions& o) { o.lambda_min = -1; }, "-1"},
        BadSolverField{"lambda_max", [](SolverOptions& o) { o.lambda_max = 1e-12; }, "1e-12"},
        BadSolverField{"lambda_initial", [](SolverOptions& o) { o.lambda_initial = 1e11; },
                       "100000000000"},
        BadSolverField{"lambda_increase", [](SolverOptions& o) { o.lambda_increase = 0.5; }, "0.5"},
        BadSolverField{"lambda_decrease", [](SolverOptions& o) { o.lambda_decrease = 2; }, "2"},
        BadSolverField{"marquardt_min", [](SolverOptions& o) { o.marquardt_min = 0; }, "0"},
        BadSolverField{"learning_rate", [](SolverOptions& o) { o.learning_rate = 1.5; }, "1.5"},
        BadSolverField{"max_attempts", [](SolverOptions& o) { o.max_attempts = 0; }, "0"},
        BadSolverField{"gradient_tolerance", [](SolverOptions& o) { o.gradient_tolerance = -1; },
                       "-1"},
        BadSolverField{"function_tolerance", [](SolverOptions& o) { o.function_tolerance = 1; },
                       "1"},
        BadSolverField{"memory_fraction", [](SolverOptions& o) { o.memory_fraction = 0; }, "0"},
        BadSolverField{"geodesic_backoff_max",
                       [](SolverOptions& o) { o.geodesic_backoff_max = -2; }, "-2"}),
    [](const auto& test_param) { return test_param.param.field; });

TEST(SolverOptions, DefaultsAreValidAndThePeersDefaults) {
  SolverOptions o;
  EXPECT_TRUE(o.is_valid(nullptr));
  EXPECT_EQ(o.lambda_initial, 1e-3);
  EXPECT_EQ(o.lambda_increase, 10.0);
  EXPECT_EQ(o.lambda_decrease, 0.1);
  EXPECT_EQ(o.lambda_min, 1e-10);
  EXPECT_EQ(o.lambda_max, 1e10);
}

TEST(SolverOptions, NamesRoundTrip) {
  for (auto t : {LinearSolverType::kAuto, LinearSolverType::kCholesky, LinearSolverType::kDual,
                 LinearSolverType::kEigen})
    EXPECT_EQ(parse_linear_solver(to_string(t)), t);
  for (auto t : {DampingType::kMultiplicative, DampingType::kNielsen})
    EXPECT_EQ(parse_damping(to_string(t)), t);
  for (auto t : {DampingMatrix::kIdentity, DampingMatrix::kMarquardt})
    EXPECT_EQ(parse_damping_matrix(to_string(t)), t);
  EXPECT_FALSE(parse_linear_solver("choleski").has_value());
}

TEST(TrainerOptions, MessageNamesFieldAndValue) {
  TrainerOptions t;
  t.max_epochs = 0;
  std::string error;
  EXPECT_FALSE(t.is_valid(&error));
  EXPECT_NE(error.find("TrainerOptions::max_epochs = 0"), std::string::npos) << error;
  t = TrainerOptions{};
  t.max_time_seconds = -3;
  EXPECT_THROW(t.validate(), InvalidArgument);
}

TEST(Damping, NielsenFollowsTheGainRatioFormula) {
  SolverOptions o;
  o.damping = DampingType::kNielsen;
  o.lambda_initial = 1.0;
  auto d = DampingStrategy::create(o);
  d->accept(0.6);  // λ·max(0.7, 1 − 0.2³) = 0.992
  EXPECT_NEAR(d->lambda(), 1.0 - 0.008, 1e-15);
  d->accept(0.9);  // max(0.7, 1 − 0.8³ = 0.488) = 0.7: the decrease is bounded
  EXPECT_NEAR(d->lambda(), 0.992 * 0.7, 1e-15);
  const double l = d->lambda();
  EXPECT_TRUE(d->reject());  // ×ν = 2
  EXPECT_NEAR(d->lambda(), 2 * l, 1e-15);
  EXPECT_TRUE(d->reject());  // ×ν = 4
  EXPECT_NEAR(d->lambda(), 8 * l, 1e-15);
  d->accept(0.5);  // ×max(0.7, 1) = 1, ν reset
  EXPECT_NEAR(d->lambda(), 8 * l, 1e-15);
  EXPECT_TRUE(d->reject());
  EXPECT_NEAR(d->lambda(), 16 * l, 1e-15);
}

TEST(Damping, MultiplicativeClampsAndReportsTheCeiling) {
  SolverOptions o;
  o.damping = DampingType::kMultiplicative;
  o.lambda_initial = 1e-9;
  o.lambda_max = 1e-7;
  auto d = DampingStrategy::create(o);
  d->accept(1.0);
  EXPECT_DOUBLE_EQ(d->lambda(), 1e-10);  // clamped at lambda_min
  d->accept(1.0);
  EXPECT_DOUBLE_EQ(d->lambda(), 1e-10);
  EXPECT_TRUE(d->reject());   // 1e-9
  EXPECT_TRUE(d->reject());   // 1e-8
  EXPECT_FALSE(d->reject());  // the raise reaches lambda_max: the peers stop without trying it
  EXPECT_DOUBLE_EQ(d->lambda(), 1e-7);
  EXPECT_FALSE(d->reject());  // and it stays there
  EXPECT_DOUBLE_EQ(d->lambda(), 1e-7);
}

// cuPyLMA's rule (SolverOptions::restart_lambda_at_max): once a step ends at lambda_max, the next
// starts from lambda_initial again, ν and the floor forgotten.  Nielsen ends a step when λ is
// already at lambda_max; multiplicative when a raise reaches it.
TEST(Damping, RestartAtLambdaMaxStartsTheScheduleAgain) {
  for (const DampingType type : {DampingType::kMultiplicative, DampingType::kNielsen}) {
    SolverOptions o;
    o.damping = type;
    o.lambda_initial = 1e-3;
    o.lambda_max = 1.0;
    o.restart_lambda_at_max = true;
    auto d = DampingStrategy::create(o);
    d->begin_step(10.0);
    EXPECT_TRUE(d->invalid());  // a floor of 2e-4 relative to A's scale
    int raises = 0;
    while (d->reject()) ++raises;
    // multiplicative 2e-2, 2e-1 (then 2 → 1: stop); nielsen ×2, ×4, ×8, ×16: 4e-3 … 1 (then stop)
    EXPECT_EQ(raises, type == DampingType::kMultiplicative ? 2 : 4);
    EXPECT_DOUBLE_EQ(d->lambda(), 1e-3);
    const DampingStrategy::State s = d->state();
    EXPECT_EQ(s.nu, 2.0);
    EXPECT_EQ(s.floor, 0.0);
    o.restart_lambda_at_max = false;  // without it λ stays at the ceiling
    auto kept = DampingStrategy::create(o);
    while (kept->reject()) {
    }
    EXPECT_DOUBLE_EQ(kept->lambda(), 1.0);
  }
}

// An invalid attempt raises λ by ν = 2 (4, 8, … while the same step keeps failing) and makes the
// λ that is tried next a floor relative to the scale of A: later steps do not go below it, in
// whatever scale A has by then, while it decays by 0.95 per accepted step.
TEST(Damping, InvalidAttemptsLearnAFloorRelativeToTheScaleOfA) {
  for (const DampingType type : {DampingType::kMultiplicative, DampingType::kNielsen}) {
    SolverOptions o;
    o.damping = type;
    o.lambda_initial = 1e-3;
    auto d = DampingStrategy::create(o);
    d->begin_step(1000.0);
    EXPECT_TRUE(d->invalid());
    EXPECT_DOUBLE_EQ(d->lambda(), 2e-3);
    EXPECT_TRUE(d->invalid());
    EXPECT_DOUBLE_EQ(d->lambda(), 8e-3);  // floor: 8e-3 / 1000 = 8e-6 of max A_ii
    d->accept(1.0);
    EXPECT_DOUBLE_EQ(d->lambda(), 7.6e-3);  // the decrease stops at the (decayed) floor
    d->begin_step(4000.0);                  // A's scale grew fourfold: so does the floor
    EXPECT_DOUBLE_EQ(d->lambda(), 3.04e-2);
    d->begin_step(10.0);
    d->accept(1.0);
    const double decrease = type == DampingType::kNielsen ? 0.7 : 0.1;
    EXPECT_DOUBLE_EQ(d->lambda(), std::max(3.04e-2 * decrease, 7.22e-5));
    const DampingStrategy::State state = d->state();
    EXPECT_DOUBLE_EQ(state.floor, 7.22e-6);
    auto restored = DampingStrategy::create(o);
    restored->set_state(state);
    restored->begin_step(10.0);
    restored->accept(1.0);
    d->accept(1.0);
    EXPECT_EQ(restored->lambda(), d->lambda());
  }
}

// GeodesicBackoff against a reference written from its definition: after the k-th refusal of a
// run (k = 1, 2, …) the next min(2^(k−1), max) attempts skip the correction; a kept one ends the
// run.  Random outcomes, several caps; a copy restored from state() mid-way follows the same path.
TEST(GeodesicBackoff, SkipsDoublingRunsOfAttemptsAfterRefusalsUpToItsCap) {
  for (const int cap : {0, 1, 2, 4, 16}) {
    SCOPED_TRACE(cap);
    GeodesicBackoff backoff(cap);
    std::optional<GeodesicBackoff> restored;
    Rng rng(static_cast<std::uint64_t>(cap) + 5);
    int run = 0, skip = 0, computed = 0;
    for (int attempt = 0; attempt < 400; ++attempt) {
      if (attempt == 150) {
        restored.emplace(cap);
        restored->set_state(backoff.state());
      }
      const bool expected_due = skip == 0;
      ASSERT_EQ(backoff.due(), expected_due) << "attempt " << attempt;
      if (restored) {
        ASSERT_EQ(restored->due(), expected_due) << "attempt " << attempt;
      }
      if (!expected_due) {
        --skip;
        continue;
      }
      ++computed;
      const bool kept = rng.uniform(0, 1) < 0.3;  // mostly refusals: long runs reach the cap
      backoff.record(kept);
      if (restored) restored->record(kept);
      run = kept ? 0 : run + 1;
      skip = kept ? 0 : std::min(cap, 1 << std::min(run - 1, 20));
    }
    if (cap == 0) {
      EXPECT_EQ(computed, 400);  // no backoff: every attempt computes it
    } else {
      EXPECT_LT(computed, 400);
    }
  }
}

TEST(GeodesicBackoff, AutoIsTwoForFloat32ModelsAndOffForFloat64) {
  SolverOptions o;
  EXPECT_EQ(o.geodesic_backoff_max, -1);
  EXPECT_EQ(geodesic_backoff_max(o, true), 2);
  EXPECT_EQ(geodesic_backoff_max(o, false), 0);
  o.geodesic_backoff_max = 5;  // given: for both
  EXPECT_EQ(geodesic_backoff_max(o, true), 5);
  EXPECT_EQ(geodesic_backoff_max(o, false), 5);
}

// Auto (unset) is off for the three softmax classification losses only; a given value is kept
// for every loss.
TEST(GeodesicAcceleration, AutoIsOffForSoftmaxClassificationAndAGivenValueIsKept) {
  SolverOptions o;
  EXPECT_FALSE(o.geodesic_acceleration.has_value());
  for (const auto& [kind, name] : kLossNames) {
    const bool softmax = kind == LossKind::kCrossEntropy || kind == LossKind::kCrossEntropySqrt ||
                         kind == LossKind::kCrossEntropySampled;
    o.geodesic_acceleration.reset();
    EXPECT_EQ(geodesic_acceleration_for(o, kind), !softmax) << name;
    o.geodesic_acceleration = true;
    EXPECT_TRUE(geodesic_acceleration_for(o, kind)) << name;
    o.geodesic_acceleration = false;
    EXPECT_FALSE(geodesic_acceleration_for(o, kind)) << name;
  }
}

// The Trainer resolves auto for its loss, and its Summary says what the step used: a 3-class
// softmax fit without the correction unless asked for, an MSE fit with it.
TEST(GeodesicAcceleration, TrainerResolvesAutoForItsLoss) {
  Dataset<double> data(60, 2, 3);
  Rng rng(4);
  for (std::size_t i = 0; i < data.samples; ++i) {
    data.x[2 * i] = rng.uniform(-1, 1);
    data.x[2 * i + 1] = rng.uniform(-1, 1);
    const std::size_t label = i % 3;
    for (std::size_t c = 0; c < 3; ++c) data.y[3 * i + c] = c == label ? 1.0 : 0.0;
  }
  const ModelSpec spec = ModelSpec::mlp(2, {5}, 3, Activation::kTanh);
  auto backend = make_cpu_backend<double>();
  TrainerOptions t;
  t.max_epochs = 1;
  auto used = [&](LossKind kind, std::optional<bool> given) {
    LossOptions loss;
    loss.kind = kind;
    SolverOptions s;
    s.geodesic_acceleration = given;
    Trainer<double> trainer(spec, loss, s, t, *backend);
    std::vector<double> params =
        Sequential<double>(spec, *backend).initial_parameters(Init::kTorch, 1);
    return trainer.fit(params, data);
  };
  // The report's "Geodesic acceleration" line contains `text`.
  auto says = [](const Summary& s, const std::string& text) {
    const std::string report = s.full_report();
    const std::size_t at = report.find("Geodesic acceleration");
    if (at == std::string::npos) return false;
    const std::string line = report.substr(at, report.find('\n', at) - at);
    return line.find(text) != std::string::npos;
  };
  const Summary ce = used(LossKind::kCrossEntropy, std::nullopt);
  EXPECT_FALSE(ce.geodesic_acceleration);
  EXPECT_TRUE(says(ce, "off: the default for the cross_entropy loss")) << ce.full_report();
  EXPECT_FALSE(used(LossKind::kCrossEntropySqrt, std::nullopt).geodesic_acceleration);
  const Summary asked = used(LossKind::kCrossEntropySqrt, true);
  EXPECT_TRUE(asked.geodesic_acceleration);
  EXPECT_TRUE(says(asked, "attempts corrected")) << asked.full_report();
  EXPECT_TRUE(used(LossKind::kMse, std::nullopt).geodesic_acceleration);
  const Summary refused = used(LossKind::kMse, false);
  EXPECT_FALSE(refused.geodesic_acceleration);
  EXPECT_TRUE(says(refused, "off: SolverOptions::geodesic_acceleration = false"))
      << refused.full_report();
}

}  // namespace
}  // namespace lmtrain
