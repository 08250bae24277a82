// The memory planner's arithmetic: the slice is the largest that fits the budget after the fixed
// buffers, capped by the batch, by the device's preferred working set (never below its minimum)
// and by max_slice_samples, and a problem whose fixed buffers leave
// no room for one sample fails before training with the sizes and the ways out.  Whether the
// components' byte counts match what they allocate is tests/solve/step_memory_test.cpp.
#include "lmtrain/solve/memory_plan.h"

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

// W2's shape on a CPU: 5 KiB per sample, 2 MiB preferred, at least 512 rows.
TEST(MemoryPlan, PreferredWorkingSetCapsTheSliceButNeverWidensIt) {
  MemoryPlanInput in = input(1000, 5120, std::size_t{1} << 30);
  in.batch = 10000;
  in.preferred_slice_bytes = std::size_t{2} << 20;
  MemoryPlan plan = plan_memory(in);
  EXPECT_EQ(plan.slice_samples, 409u);  // ⌊2 MiB / 5 KiB⌋
  EXPECT_EQ(plan.slices_per_batch, 25u);
  EXPECT_EQ(plan.slice_limit, MemoryPlan::Limit::kCache);
  EXPECT_NE(plan.describe().find("409 samples (sized for the CPU's cache; 25 per batch)"),
            std::string::npos)
      << plan.describe();
  in.min_slice_samples = 512;  // the minimum rows per SYRK call win over the working set
  EXPECT_EQ(plan_memory(in).slice_samples, 512u);
  in.batch = 300;  // a batch below the preference is one slice
  plan = plan_memory(in);
  EXPECT_EQ(plan.slice_samples, 300u);
  EXPECT_EQ(plan.slice_limit, MemoryPlan::Limit::kBatch);
  in.batch = 10000;
  in.budget_bytes = 1000 + 100 * 5120;  // the budget still bounds it, minimum or not
  plan = plan_memory(in);
  EXPECT_EQ(plan.slice_samples, 100u);
  EXPECT_EQ(plan.slice_limit, MemoryPlan::Limit::kBudget);
  in.budget_bytes = std::size_t{1} << 30;
  in.max_slice_samples = 64;  // and an explicit cap below it
  plan = plan_memory(in);
  EXPECT_EQ(plan.slice_samples, 64u);
  EXPECT_EQ(plan.slice_limit, MemoryPlan::Limit::kCap);
  EXPECT_NE(plan.describe().find("(max_slice_samples; 157 per batch)"), std::string::npos)
      << plan.describe();
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
