// The memory plan against the allocations it stands for: for every solver, precision,
// regularization and with or without geodesic acceleration, the step's components (engine,
// builder, solver, damping, penalty, geodesic, the step's vectors) are built on a CPU backend that
// counts bytes, one step runs, and the peak they held must equal the plan's peak to within the
// allocator's rounding — never above it (the plan is what decides whether a device can take the
// problem), and not far below (a plan that overcounts wastes device memory on smaller slices).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "lmtrain/solve/lm_step.h"
#include "lmtrain/solve/step_planner.h"
#include "support/reference.h"

namespace lmtrain::testing {
namespace {

struct Case {
  LinearSolverType solver;
  SystemPrecision precision;
  Regularization regularization;
  bool geodesic;
  DampingMatrix damping_matrix;
  std::size_t hidden = 12;  // 4: n = 46, whose float slices the CPU pads to 48 columns
};

std::string name(const Case& c) {
  return std::string(to_string(c.solver)) + "_" +
         (c.precision == SystemPrecision::kFloat64 ? "mixed" : "single") + "_" +
         std::string(to_string(c.regularization)) + (c.geodesic ? "_geodesic" : "") +
         (c.damping_matrix == DampingMatrix::kMarquardt ? "_marquardt" : "") +
         (c.hidden != 12 ? "_hidden" + std::to_string(c.hidden) : "");
}

template <typename T>
void expect_plan_matches_allocations(const Case& c) {
  // 1-12-12-2 tanh (206 parameters), 40 samples of 3 inputs in slices of 7: several slices per
  // batch, so the slice buffers and the whole-batch buffers are both exercised (and, with 4
  // hidden units, the padded rows of a small float model).
  const auto spec = ModelSpec::mlp(3, {c.hidden, c.hidden}, 2, Activation::kTanh);
  constexpr std::size_t kBatch = 40, kSlice = 7;
  SolverOptions options;
  options.linear_solver = c.solver;
  options.system_precision = c.precision;
  options.regularization = c.regularization;
  options.weight_decay = c.regularization == Regularization::kL2 ? 1e-3 : 0.0;
  options.geodesic_acceleration = c.geodesic;
  options.damping_matrix = c.damping_matrix;
  options.max_slice_samples = kSlice;

  auto backend = make_cpu_backend<T>();
  Sequential<T> model(spec, *backend);
  Loss<T> loss(LossOptions{}, model.outputs(), *backend);
  JacobianEngine<T> engine(model, loss);
  EngineSource<T> source(engine);
  StepProblem problem;
  problem.batch = problem.local_batch = kBatch;
  problem.budget_bytes = std::size_t{1} << 30;
  const MemoryPlan plan = plan_step_memory(options, c.solver, source, problem);
  ASSERT_EQ(plan.slice_samples, kSlice);

  // Data and parameters are the caller's (problem.caller counts nothing here): allocate them first
  // and count only what the step's components take.
  Rng rng(11);
  const std::size_t n = model.num_params();
  auto x = backend->allocate(kBatch * 3), y = backend->allocate(kBatch * 2),
       theta = backend->allocate(n);
  const auto xs = cast<T>(random_vector(kBatch * 3, rng)),
             ys = cast<T>(random_vector(kBatch * 2, rng));
  const auto ps = model.initial_parameters(Init::kTorch, 5);
  backend->copy_from_host(xs.data(), x.data(), xs.size());
  backend->copy_from_host(ys.data(), y.data(), ys.size());
  backend->copy_from_host(ps.data(), theta.data(), n);
  backend->memory().reset_peak();
  const std::size_t before = backend->memory().bytes_in_use();
  std::size_t measured = 0;
  {
    auto step = make_lm_step<T>(options, c.solver, source, plan.slice_samples, kBatch);
    PhaseTimes times;
    for (int k = 0; k < 3; ++k) (void)step->step(theta.data(), x.data(), y.data(), kBatch, times);
    measured = backend->memory().peak_bytes_in_use() - before + step->system_peak_bytes();
  }
  EXPECT_LE(measured, plan.peak_bytes)
      << "measured " << measured << " B, planned " << plan.peak_bytes;
  EXPECT_GE(static_cast<double>(measured), 0.95 * static_cast<double>(plan.peak_bytes))
      << "measured " << measured << " B, planned " << plan.peak_bytes;
}

class StepMemory : public ::testing::TestWithParam<Case> {};

TEST_P(StepMemory, PlanEqualsWhatTheComponentsAllocate) {
  if (GetParam().precision == SystemPrecision::kFloat64)
    expect_plan_matches_allocations<float>(GetParam());  // a float model, a float64 system
  else {
    expect_plan_matches_allocations<float>(GetParam());
    expect_plan_matches_allocations<double>(GetParam());
  }
}

using L = LinearSolverType;
using P = SystemPrecision;
using R = Regularization;
constexpr DampingMatrix kI = DampingMatrix::kIdentity, kM = DampingMatrix::kMarquardt;
INSTANTIATE_TEST_SUITE_P(EveryComponent, StepMemory,
                         ::testing::Values(Case{L::kCholesky, P::kModel, R::kNone, true, kI},
                                           Case{L::kCholesky, P::kModel, R::kNone, false, kI},
                                           Case{L::kCholesky, P::kFloat64, R::kNone, true, kI},
                                           Case{L::kEigen, P::kModel, R::kL2, true, kM},
                                           Case{L::kEigen, P::kFloat64, R::kBayesian, true, kI},
                                           Case{L::kCholesky, P::kModel, R::kArd, true, kI},
                                           Case{L::kCholesky, P::kFloat64, R::kArd, false, kM},
                                           Case{L::kDual, P::kModel, R::kNone, false, kI},
                                           Case{L::kDual, P::kFloat64, R::kNone, false, kI},
                                           Case{L::kCg, P::kModel, R::kL2, false, kM},
                                           Case{L::kCg, P::kFloat64, R::kNone, false, kI},
                                           Case{L::kCholesky, P::kModel, R::kNone, true, kI, 4},
                                           Case{L::kCholesky, P::kFloat64, R::kNone, true, kI, 4}),
                         [](const auto& param_info) { return name(param_info.param); });

}  // namespace
}  // namespace lmtrain::testing
