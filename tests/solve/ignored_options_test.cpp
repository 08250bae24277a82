#include "lmtrain/solve/ignored_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lmtrain/nn/loss.h"
#include "lmtrain/train/trainer_options.h"

namespace lmtrain {
namespace {

// A plan as the planner leaves it: the solver resolved, the geodesic correction resolved.
StepPlan plan_of(LinearSolverType solver, bool geodesic) {
  StepPlan plan;
  plan.options.linear_solver = solver;
  plan.options.geodesic_acceleration = geodesic;
  return plan;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  return all;
}

// The defaults ignore nothing, whatever the plan; each rule names its option when the option is
// set and the plan does not use it, and says nothing when the plan uses it.
TEST(IgnoredOptions, EachOptionSetButUnusedIsNamedAndOnlyThen) {
  const SolverOptions defaults;
  for (LinearSolverType solver :
       {LinearSolverType::kCholesky, LinearSolverType::kCg, LinearSolverType::kDual})
    EXPECT_TRUE(ignored_options(defaults, plan_of(solver, false)).empty());

  const StepPlan cholesky = plan_of(LinearSolverType::kCholesky, true);
  struct Case {
    SolverOptions set;     // the option set (unused under `unused_plan`)
    SolverOptions used;    // the same option with what uses it
    StepPlan unused_plan;  // a plan that does not use it
    StepPlan used_plan;
    std::string named;
  };
  std::vector<Case> cases;
  {
    Case c{defaults, defaults, cholesky, cholesky, "SolverOptions::weight_decay = 0.01: ignored"};
    c.set.weight_decay = c.used.weight_decay = 0.01;
    c.used.regularization = Regularization::kL2;
    cases.push_back(c);
  }
  {
    Case c{defaults, defaults, cholesky, cholesky, "ard_initial_scale / ard_max_factor: ignored"};
    c.set.ard_max_factor = c.used.ard_max_factor = 3.0;
    c.set.regularization = Regularization::kBayesian;
    c.used.regularization = Regularization::kArd;
    cases.push_back(c);
  }
  {
    Case c{defaults, defaults, cholesky, cholesky, "lambda_increase / lambda_decrease: ignored"};
    c.set.lambda_increase = c.used.lambda_increase = 5.0;
    c.used.damping = DampingType::kMultiplicative;
    cases.push_back(c);
  }
  {
    Case c{defaults, defaults, cholesky, cholesky, "marquardt_min / marquardt_max: ignored"};
    c.set.marquardt_min = c.used.marquardt_min = 1e-3;
    c.used.damping_matrix = DampingMatrix::kMarquardt;
    cases.push_back(c);
  }
  {
    Case c{defaults, defaults, plan_of(LinearSolverType::kCg, false), cholesky,
           "geodesic_ratio / geodesic_step / geodesic_backoff_max: ignored"};
    c.set.geodesic_step = c.used.geodesic_step = 0.05;
    cases.push_back(c);
  }
  {
    Case c{defaults, defaults, cholesky, plan_of(LinearSolverType::kCg, false),
           "cg_forcing / cg_max_iterations: ignored, the linear solver is cholesky"};
    c.set.cg_forcing = c.used.cg_forcing = 1e-3;
    cases.push_back(c);
  }
  {
    Case c{defaults, defaults, cholesky, plan_of(LinearSolverType::kDistributedCholesky, true),
           "SolverOptions::distributed_block_size = 64: ignored, the linear solver is cholesky"};
    c.set.distributed_block_size = c.used.distributed_block_size = 64;
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    const std::vector<std::string> unused = ignored_options(c.set, c.unused_plan);
    ASSERT_EQ(unused.size(), 1u) << joined(unused);
    EXPECT_NE(unused[0].find(c.named), std::string::npos) << unused[0];
    EXPECT_TRUE(ignored_options(c.used, c.used_plan).empty())
        << c.named << ": " << joined(ignored_options(c.used, c.used_plan));
  }
}

// The trainer's: the early stop's options without validation data, a measured balance on one
// rank; with validation data and several ranks each acts.
TEST(IgnoredOptions, TrainerOptionsWithoutValidationDataOrOnOneRankAreNamed) {
  const TrainerOptions defaults;
  EXPECT_TRUE(ignored_options(defaults, false, 1).empty());
  TrainerOptions set;
  set.max_validation_failures = 10;
  set.restore_best = false;
  set.balance = BatchBalance::kMeasured;
  const std::vector<std::string> unused = ignored_options(set, false, 1);
  ASSERT_EQ(unused.size(), 3u) << joined(unused);
  EXPECT_EQ(unused[0],
            "TrainerOptions::max_validation_failures = 10: ignored, the run has no validation data "
            "(a validation set or fraction uses it)");
  EXPECT_NE(unused[1].find("TrainerOptions::restore_best is off: ignored"), std::string::npos);
  EXPECT_NE(unused[2].find("TrainerOptions::balance = measured: ignored, the run has one rank"),
            std::string::npos);
  EXPECT_TRUE(ignored_options(set, true, 2).empty()) << joined(ignored_options(set, true, 2));
  EXPECT_EQ(ignored_options(set, true, 1).size(), 1u);   // the balance
  EXPECT_EQ(ignored_options(set, false, 2).size(), 2u);  // the early stop's
}

// The loss's: huber_delta with another loss.
TEST(IgnoredOptions, HuberDeltaWithAnotherLossIsNamed) {
  LossOptions o;
  EXPECT_TRUE(o.ignored_options().empty());
  o.huber_delta = 2.5;
  const std::vector<std::string> unused = o.ignored_options();
  ASSERT_EQ(unused.size(), 1u) << joined(unused);
  EXPECT_EQ(unused[0], "LossOptions::huber_delta = 2.5: ignored, the loss is mse (huber uses it)");
  o.kind = LossKind::kHuber;
  EXPECT_TRUE(o.ignored_options().empty());
}

}  // namespace
}  // namespace lmtrain
