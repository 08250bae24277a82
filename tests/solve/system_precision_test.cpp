// SystemPrecision::kAuto (the default): a float model's system in float32 or float64, chosen per
// problem and device by choose_system_precision and applied by the Trainer.  Each automatic
// choice is checked against the run that asks for the chosen precision explicitly (the same
// parameters bit for bit), and the Summary against what was chosen and why.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lmtrain/lmtrain.h"
#include "lmtrain/solve/step_planner.h"
#include "lmtrain/train/engine_source.h"

namespace lmtrain {
namespace {

TEST(SystemPrecision, AutoWeighsTheRowsOfAAndTheDevicesFloat64Rate) {
  SolverOptions o;  // system_precision = auto, no regularization
  SystemPrecisionProblem p;
  p.rows = kMixedPrecisionRows - 1;
  SystemPrecisionChoice c = choose_system_precision(o, p);
  EXPECT_EQ(c.precision, SystemPrecision::kModel);
  EXPECT_TRUE(c.automatic);
  // The reason names the rows and the rounding bound m·2⁻²⁴ = 16383/16777216 = 9.8e-4.
  EXPECT_NE(c.reason.find("16383 residual rows"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("9.8e-04"), std::string::npos) << c.reason;

  p.rows = kMixedPrecisionRows;  // bound 2⁻¹⁰ = 9.8e-4: float64 on a CPU (rate ½)
  c = choose_system_precision(o, p);
  EXPECT_EQ(c.precision, SystemPrecision::kFloat64);
  EXPECT_NE(c.reason.find("1/2 of its float32 rate"), std::string::npos) << c.reason;

  p.float64_rate = 1.0 / 64;  // a consumer GPU: float32, and the reason says why
  c = choose_system_precision(o, p);
  EXPECT_EQ(c.precision, SystemPrecision::kModel);
  EXPECT_NE(c.reason.find("1/64"), std::string::npos) << c.reason;

  // bayesian and ard read A's small eigenvalues: float64 whatever the rows and the device.
  o.regularization = Regularization::kArd;
  p.rows = 10;
  c = choose_system_precision(o, p);
  EXPECT_EQ(c.precision, SystemPrecision::kFloat64);
  EXPECT_NE(c.reason.find("ard"), std::string::npos) << c.reason;

  // Asked for: kept as given, never "automatic"; a float64 model has nothing to choose.
  for (const SystemPrecision asked : {SystemPrecision::kModel, SystemPrecision::kFloat64}) {
    o.system_precision = asked;
    c = choose_system_precision(o, p);
    EXPECT_EQ(c.precision, asked);
    EXPECT_FALSE(c.automatic);
    EXPECT_TRUE(c.reason.empty());
  }
  o.system_precision = SystemPrecision::kAuto;
  p.float_model = false;
  EXPECT_EQ(choose_system_precision(o, p).precision, SystemPrecision::kModel);
}

// sin(3x) + x²/2 on `samples` points of [−1, 1], full batch: A sums `samples` rows.
Dataset<float> curve(std::size_t samples) {
  Dataset<float> d(samples, 1, 1);
  for (std::size_t i = 0; i < samples; ++i) {
    const double x = -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(samples - 1);
    d.x[i] = static_cast<float>(x);
    d.y[i] = static_cast<float>(std::sin(3 * x) + 0.5 * x * x);
  }
  return d;
}

struct Fit {
  Summary summary;
  std::vector<float> params;
};

Fit fit(const ModelSpec& spec, const Dataset<float>& data, const SolverOptions& o, int epochs) {
  TrainerOptions t;
  t.max_epochs = epochs;
  auto backend = make_cpu_backend<float>();
  Trainer<float> trainer(spec, LossOptions{}, o, t, *backend);
  Fit f;
  f.params = Sequential<float>(spec, *backend).initial_parameters(Init::kTorch, 5);
  f.summary = trainer.fit(f.params, data);
  return f;
}

TEST(SystemPrecision, TheTrainerRunsWhatAutoChoseAsIfItHadBeenAskedFor) {
  const ModelSpec spec = ModelSpec::mlp(1, {8}, 1, Activation::kTanh);
  struct Case {
    std::size_t rows;
    SystemPrecision expected;
    const char* precision;
  };
  for (const Case& c : {Case{kMixedPrecisionRows - 1, SystemPrecision::kModel, "float32"},
                        Case{kMixedPrecisionRows, SystemPrecision::kFloat64, "mixed ("}}) {
    SCOPED_TRACE(c.rows);
    const Dataset<float> data = curve(c.rows);
    const Fit automatic = fit(spec, data, SolverOptions{}, 4);
    SolverOptions asked;
    asked.system_precision = c.expected;
    const Fit reference = fit(spec, data, asked, 4);
    EXPECT_EQ(automatic.params, reference.params);
    EXPECT_EQ(automatic.summary.final_loss, reference.summary.final_loss);
    EXPECT_EQ(automatic.summary.precision.rfind(c.precision, 0), 0u) << automatic.summary.precision;
    EXPECT_EQ(automatic.summary.precision, reference.summary.precision);
    // Given and used side by side: the automatic run says why, the one that asked does not.
    const std::string report = automatic.summary.full_report();
    EXPECT_NE(report.find("  because                         auto: A sums " +
                          std::to_string(c.rows) + " residual rows per step"),
              std::string::npos)
        << report;
    EXPECT_TRUE(reference.summary.precision_reason.empty());
    EXPECT_EQ(automatic.summary.float32_system, c.expected == SystemPrecision::kModel);
  }
}

TEST(SystemPrecision, AutoFallsBackToFloat32WhenOnlyAFloat32AFitsTheBudget) {
  // 1-24-24-1 (673 parameters) on 2¹⁴ rows: auto wants float64, but the budget lies between the
  // float32 and the float64 plan (A alone: 1.8 MB against 3.6 MB), and matrix-free cg would store
  // a 2¹⁴ × 673 float64 J (88 MB), so auto takes float32 — the run an explicit float32 makes.
  const ModelSpec spec = ModelSpec::mlp(1, {24, 24}, 1, Activation::kTanh);
  const Dataset<float> data = curve(kMixedPrecisionRows);
  auto backend = make_cpu_backend<float>();
  Sequential<float> model(spec, *backend);
  Loss<float> loss(LossOptions{}, model.outputs(), *backend);
  JacobianEngine<float> engine(model, loss);
  EngineSource<float> source(engine);
  StepProblem problem;
  problem.batch = problem.local_batch = data.samples;
  problem.budget_bytes = std::size_t{1} << 40;
  // What the Trainer counts for itself (trainer.cpp, describe_problem).
  problem.caller = {2, 2 + model.activation_floats_per_sample()};
  SolverOptions wide, narrow;
  wide.system_precision = SystemPrecision::kFloat64;
  narrow.system_precision = SystemPrecision::kModel;
  const MemoryPlan p64 = plan_step_memory(wide, LinearSolverType::kCholesky, source, problem);
  const MemoryPlan p32 = plan_step_memory(narrow, LinearSolverType::kCholesky, source, problem);
  const std::size_t need32 = p32.fixed_bytes + p32.bytes_per_slice_sample;
  ASSERT_LT(need32, p64.fixed_bytes);
  SolverOptions automatic;
  automatic.memory_budget_bytes = (need32 + p64.fixed_bytes) / 2;
  narrow.memory_budget_bytes = automatic.memory_budget_bytes;
  const Fit a = fit(spec, data, automatic, 2);
  const Fit n = fit(spec, data, narrow, 2);
  EXPECT_EQ(a.summary.precision, "float32");
  EXPECT_EQ(a.summary.linear_solver_used, LinearSolverType::kCholesky);
  EXPECT_NE(a.summary.precision_reason.find("a float64 A does not fit the memory budget"),
            std::string::npos)
      << a.summary.precision_reason;
  EXPECT_EQ(a.params, n.params);
  // And the float64 system, asked for with that budget, cannot run at all.
  wide.memory_budget_bytes = automatic.memory_budget_bytes;
  EXPECT_THROW(fit(spec, data, wide, 1), MemoryPlanError);
}

TEST(SystemPrecision, Float32AskedForIsFloat32EvenUnderArd) {
  // auto solves ard in float64 (its γ reads A's small eigenvalues); an explicit float32 system
  // is kept — and the Summary warns what it costs.
  const ModelSpec spec = ModelSpec::mlp(1, {8}, 1, Activation::kTanh);
  const Dataset<float> data = curve(200);
  SolverOptions o;
  o.regularization = Regularization::kArd;
  const Fit automatic = fit(spec, data, o, 3);
  o.system_precision = SystemPrecision::kModel;
  const Fit asked = fit(spec, data, o, 3);
  EXPECT_EQ(automatic.summary.precision.rfind("mixed (", 0), 0u) << automatic.summary.precision;
  EXPECT_NE(automatic.summary.precision_reason.find("ard regularization reads A's small"),
            std::string::npos);
  EXPECT_EQ(asked.summary.precision, "float32");
  EXPECT_TRUE(asked.summary.float32_system);
  EXPECT_NE(asked.summary.full_report().find("ard regularization with a float32 system"),
            std::string::npos)
      << asked.summary.full_report();
  EXPECT_NE(automatic.params, asked.params);
}

}  // namespace
}  // namespace lmtrain
