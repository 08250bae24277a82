// The memory planner's arithmetic: the slice is the largest that fits the budget after the fixed
// buffers, capped by the batch and by max_slice_samples, and a problem whose fixed buffers leave
// no room for one sample fails before training with the sizes and the ways out.  Whether the
// components' byte counts match what they allocate is tests/solve/step_memory_test.cpp.
#include "lmtrain/nn/memory_plan.h"

#include <gtest/gtest.h>

#include "lmtrain/core/error.h"

namespace lmtrain {
namespace {

MemoryPlanInput input(std::size_t fixed, std::size_t per_sample, std::size_t budget) {
  MemoryPlanInput in;
  in.batch = 1000;
  in.fixed_bytes = fixed;
  in.bytes_per_slice_sample = per_sample;
  in.budget_bytes = budget;
  in.num_params = 61;
  in.normal_matrix_bytes = 61 * 61 * 4;
  return in;
}

TEST(MemoryPlan, SliceIsTheLargestThatFitsTheBudget) {
  const std::size_t fixed = 812'345, per = 404;
  const MemoryPlan plan = plan_memory(input(fixed, per, fixed + 37 * per + per / 2));
  EXPECT_EQ(plan.slice_samples, 37u);
  EXPECT_EQ(plan.slices_per_batch, 28u);  // ⌈1000 / 37⌉
  EXPECT_EQ(plan.peak_bytes, fixed + 37 * per);
  EXPECT_EQ(plan.fixed_bytes, fixed);
  // One byte less than 37 samples need: 36.
  EXPECT_EQ(plan_memory(input(fixed, per, fixed + 37 * per - 1)).slice_samples, 36u);
}

TEST(MemoryPlan, LargeBudgetTakesTheWholeBatchAndHonoursTheCap) {
  MemoryPlanInput in = input(1000, 100, std::size_t{1} << 30);
  EXPECT_EQ(plan_memory(in).slice_samples, 1000u);
  EXPECT_EQ(plan_memory(in).slices_per_batch, 1u);
  in.max_slice_samples = 64;
  EXPECT_EQ(plan_memory(in).slice_samples, 64u);
  EXPECT_EQ(plan_memory(in).slices_per_batch, 16u);
}

TEST(MemoryPlan, ProblemThatCannotFitFailsWithSizesAndWayOut) {
  MemoryPlanInput in = input(std::size_t{10} << 30, 1000, std::size_t{1} << 30);
  in.num_params = 50000;
  in.normal_matrix_bytes = std::size_t{50000} * 50000 * 4;  // 9.31 GiB
  in.way_out = ", or the way out of this solver";
  try {
    plan_memory(in);
    FAIL() << "plan accepted 10 GiB of fixed buffers in 1 GiB";
  } catch (const MemoryPlanError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("50000 parameters"), std::string::npos) << msg;
    EXPECT_NE(msg.find("9.31 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1.00 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Ways out"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the way out of this solver"), std::string::npos) << msg;
  }
  // Exactly one sample fits: no failure.
  in.budget_bytes = in.fixed_bytes + in.bytes_per_slice_sample;
  EXPECT_EQ(plan_memory(in).slice_samples, 1u);
}

}  // namespace
}  // namespace lmtrain
