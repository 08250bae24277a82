// The memory planner: slices sized from the budget by its documented byte counts, and a clear
// failure before training when A itself does not fit.
#include <gtest/gtest.h>

#include "lmtrain/core/error.h"
#include "lmtrain/nn/memory_plan.h"

namespace lmtrain {
namespace {

MemoryPlanInput w1_like() {
  MemoryPlanInput in;
  in.num_params = 61;
  in.batch = 1000;
  in.residuals_per_sample = 1;
  in.inputs = 1;
  in.outputs = 1;
  in.activation_floats_per_sample = 62;
  in.max_width = 20;
  in.element_size = 4;
  in.budget_bytes = std::size_t{1} << 30;
  return in;
}

TEST(MemoryPlan, SliceIsTheLargestThatFitsTheBudget) {
  MemoryPlanInput in = w1_like();
  // fixed = 6n·s + (n² + n)·s + n²·s + batch·(1 + 1 + 3·62 + 1 + 1)·s; per sample = (n + 2·20)·s.
  const std::size_t s = 4, n = 61;
  const std::size_t fixed = 6 * n * s + (n * n + n) * s + n * n * s + 1000 * 190 * s;
  const std::size_t per = (n + 40) * s;
  in.budget_bytes = fixed + 37 * per + per / 2;
  const MemoryPlan plan = plan_memory(in);
  EXPECT_EQ(plan.fixed_bytes, fixed);
  EXPECT_EQ(plan.bytes_per_slice_sample, per);
  EXPECT_EQ(plan.slice_samples, 37u);
  EXPECT_EQ(plan.slices_per_batch, 28u);  // ⌈1000 / 37⌉
  EXPECT_LE(plan.peak_bytes, in.budget_bytes);
}

TEST(MemoryPlan, MixedPrecisionCountsTheSystemInFloat64AndTheWidenedSlice) {
  MemoryPlanInput in = w1_like();
  in.system_element_size = 8;
  // A, its factor and the n-vectors in 8 bytes (6n at the larger size, plus δ rounded to the
  // model's 4), the batch's residuals widened once; a slice sample's rows twice (4 + 8 bytes).
  const std::size_t n = 61;
  const std::size_t fixed = 6 * n * 8 + n * 4 + (n * n + n) * 8 + n * n * 8 + 1000 * 190 * 4 + 1000 * 8;
  const std::size_t per = n * (4 + 8) + 2 * 20 * 4;
  in.budget_bytes = fixed + 10 * per;
  const MemoryPlan plan = plan_memory(in);
  EXPECT_EQ(plan.fixed_bytes, fixed);
  EXPECT_EQ(plan.bytes_per_slice_sample, per);
  EXPECT_EQ(plan.normal_matrix_bytes, n * n * 8);
  EXPECT_EQ(plan.slice_samples, 10u);
}

TEST(MemoryPlan, LargeBudgetTakesTheWholeBatchAndHonoursTheCap) {
  MemoryPlanInput in = w1_like();
  EXPECT_EQ(plan_memory(in).slice_samples, 1000u);
  in.max_slice_samples = 64;
  EXPECT_EQ(plan_memory(in).slice_samples, 64u);
  EXPECT_EQ(plan_memory(in).slices_per_batch, 16u);
}

TEST(MemoryPlan, NormalMatrixThatCannotFitFailsWithSizesAndWayOut) {
  MemoryPlanInput in = w1_like();
  in.num_params = 50000;                  // A alone: 50000² · 4 B = 9.3 GiB
  in.budget_bytes = std::size_t{1} << 30;  // 1 GiB
  try {
    plan_memory(in);
    FAIL() << "plan accepted a 9 GiB normal matrix in 1 GiB";
  } catch (const MemoryPlanError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("50000 parameters"), std::string::npos) << msg;
    EXPECT_NE(msg.find("9.31 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1.00 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Ways out"), std::string::npos) << msg;
  }
}

TEST(MemoryPlan, DualFormCountsTheGramMatrixAndStoredJacobian) {
  MemoryPlanInput in = w1_like();
  in.solver = SolverWorkspace::kDual;
  in.num_params = 5000;
  in.batch = 200;
  const MemoryPlan plan = plan_memory(in);
  EXPECT_EQ(plan.normal_matrix_bytes, 200u * 200u * 4u);
  EXPECT_GE(plan.fixed_bytes, (200u * 200u * 2 + 200u * 5000u) * 4u);
}

}  // namespace
}  // namespace lmtrain
