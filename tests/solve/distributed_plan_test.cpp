// The planner with distributed_cholesky (solve/step_planner.h): auto goes cholesky →
// distributed_cholesky → cg as the budget shrinks, each rank's share is counted, and explicit
// choices that cannot work here fall back with a reason.  No MPI needed: plans are arithmetic.
#include <gtest/gtest.h>

#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/solve/step_planner.h"
#include "support/reference.h"

namespace lmtrain {
namespace {

struct Model {
  std::unique_ptr<Backend<double>> backend = make_cpu_backend<double>();
  Sequential<double> model{ModelSpec::mlp(1, {700}, 1, Activation::kTanh), *backend};
  Loss<double> loss{LossOptions{}, 1, *backend};
  JacobianEngine<double> engine{model, loss};
  EngineSource<double> source{engine};
};

StepProblem problem(int ranks, std::size_t budget) {
  StepProblem p;
  p.batch = 2400;
  p.local_batch = 2400 / static_cast<std::size_t>(ranks);
  p.ranks = ranks;
  p.collectives = ranks > 1;
  p.budget_bytes = budget;
  p.distributed_unavailable.reset();
  return p;
}

// The smallest budget a solver's plan accepts (its fixed bytes and one slice sample).
std::size_t need(const EngineSource<double>& source, LinearSolverType solver, int ranks) {
  const MemoryPlan plan =
      plan_step_memory(SolverOptions{}, solver, source, problem(ranks, std::size_t{1} << 40));
  return plan.fixed_bytes + plan.bytes_per_slice_sample;
}

TEST(DistributedPlan, AutoGoesReplicatedThenDistributedThenCg) {
  Model m;
  const std::size_t n = m.source.num_params();
  ASSERT_EQ(n, 2101u);
  const std::size_t replicated = need(m.source, LinearSolverType::kCholesky, 4);
  const std::size_t distributed = need(m.source, LinearSolverType::kDistributedCholesky, 4);
  const std::size_t cg = need(m.source, LinearSolverType::kCg, 4);
  // Four ranks hold about 2n²/4 of A and its factor each, against 2.5n² replicated (A, its factor
  // and the packed triangle the ranks sum); cg stores the shard's J (600 × 2 101) instead.
  EXPECT_LT(distributed, replicated / 2);
  EXPECT_LT(cg, distributed);
  SolverOptions options;
  options.damping_matrix = DampingMatrix::kMarquardt;  // no dual form

  StepPlan plan = plan_step(options, m.source, problem(4, replicated + (1 << 20)));
  EXPECT_EQ(plan.solver(), LinearSolverType::kCholesky) << plan.solver_reason;

  plan = plan_step(options, m.source, problem(4, (replicated + distributed) / 2));
  EXPECT_EQ(plan.solver(), LinearSolverType::kDistributedCholesky) << plan.solver_reason;
  EXPECT_NE(plan.solver_reason.find("does not fit one rank"), std::string::npos);
  EXPECT_NE(plan.distribution.find("2×2 process grid of 4 ranks"), std::string::npos)
      << plan.distribution;
  // The share of A on the largest rank: ⌈…⌉ of 33 blocks of 64 rows, 17 of them on process row 0.
  const dist::BlockCyclicLayout layout{n, 64, dist::ProcessGrid::for_ranks(4, 0)};
  EXPECT_EQ(plan.memory.normal_matrix_bytes, layout.largest_share() * sizeof(double));
  // 2 101 = 32 blocks of 64 and one of 53: process row 0 holds 16 blocks and the partial one.
  EXPECT_EQ(layout.largest_share(), 1077u * 1077u);

  plan = plan_step(options, m.source, problem(4, (cg + distributed) / 2));
  EXPECT_EQ(plan.solver(), LinearSolverType::kCg) << plan.solver_reason;
  EXPECT_NE(plan.solver_reason.find("nor do its shares"), std::string::npos) << plan.solver_reason;

  // Where the ranks cannot shard A, auto says why and takes cg.
  StepProblem no_grid = problem(4, (replicated + distributed) / 2);
  ASSERT_GE((replicated + distributed) / 2, cg);
  no_grid.distributed_unavailable = "no MPI communicator here";
  plan = plan_step(options, m.source, no_grid);
  EXPECT_EQ(plan.solver(), LinearSolverType::kCg);
  EXPECT_NE(plan.solver_reason.find("no MPI communicator here"), std::string::npos);

  // bayesian needs A on one rank: neither distributed_cholesky nor cg, so the plan refuses.
  options.regularization = Regularization::kBayesian;
  EXPECT_THROW(plan_step(options, m.source, problem(4, (replicated + distributed) / 2)),
               MemoryPlanError);
}

TEST(DistributedPlan, SharesShrinkWithTheRanks) {
  Model m;
  std::size_t previous = std::size_t{1} << 40;
  for (int ranks : {1, 2, 4, 8}) {
    const std::size_t bytes = need(m.source, LinearSolverType::kDistributedCholesky, ranks);
    EXPECT_LT(bytes, previous) << ranks;
    previous = bytes;
  }
}

TEST(DistributedPlan, AnExplicitChoiceThatCannotShardFallsBackWithTheReason) {
  Model m;
  SolverOptions options;
  options.linear_solver = LinearSolverType::kDistributedCholesky;
  StepProblem p = problem(2, std::size_t{1} << 34);
  p.distributed_unavailable = "lmtrain was built without ScaLAPACK";
  const StepPlan plan = plan_step(options, m.source, p);
  EXPECT_EQ(plan.solver(), LinearSolverType::kCholesky);
  EXPECT_NE(plan.solver_reason.find("built without ScaLAPACK"), std::string::npos);
  p.distributed_unavailable.reset();
  const StepPlan sharded = plan_step(options, m.source, p);
  EXPECT_EQ(sharded.solver(), LinearSolverType::kDistributedCholesky);
  EXPECT_TRUE(sharded.geodesic());  // the correction reuses the distributed factor
}

TEST(DistributedPlan, CpuRanksNarrowThePanelsOnAWideGridGpuRanksKeepARowOfBlocks) {
  using M = dist::DistributedNormalMatrix<double>;
  // n = 100 000 on 64 ranks (8 × 8), 256-blocks: a row of 8 block columns would be
  // 2·256·8·n values, more than the share (12 544² here); one block column (the floor) a third.
  const dist::BlockCyclicLayout wide{100000, 256, dist::ProcessGrid::for_ranks(64, 0)};
  EXPECT_EQ(M::panel_block_columns(wide, DeviceKind::kCpu), 1u);
  EXPECT_EQ(M::panel_block_columns(wide, DeviceKind::kCuda), 8u);
  const std::size_t share = wide.largest_share();
  EXPECT_LT(2 * 256 * std::size_t{100000}, share / 2);
  EXPECT_GT(2 * 256 * 8 * std::size_t{100000}, share);
  // The plan counts the panels each kind allocates: 7 block columns fewer on the CPU.
  EXPECT_EQ(M::elements(wide, DeviceKind::kCuda) - M::elements(wide, DeviceKind::kCpu),
            2 * 7 * 256 * std::size_t{100000});
  // n = 21 141 on 4 ranks (2 × 2): both block columns of a process row fit, as on a GPU.
  const dist::BlockCyclicLayout square{21141, 256, dist::ProcessGrid::for_ranks(4, 0)};
  EXPECT_EQ(M::panel_block_columns(square, DeviceKind::kCpu), 2u);
  // One rank: one process column, one block column per panel.
  const dist::BlockCyclicLayout one{3001, 64, dist::ProcessGrid::for_ranks(1, 0)};
  EXPECT_EQ(M::panel_block_columns(one, DeviceKind::kCpu), 1u);
}

}  // namespace
}  // namespace lmtrain
