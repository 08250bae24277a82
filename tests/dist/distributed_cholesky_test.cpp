// distributed_cholesky under mpirun (1–4 ranks, tests/dist/CMakeLists.txt): A sharded over the
// ranks' process grid must give the δ of the replicated Cholesky (LAPACK on the all-reduced A,
// solved on rank 0), and a training run the losses of one rank.  Every rank runs every test.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string>
#include <thread>

#include "lmtrain/dist/communicator.h"
#include "lmtrain/dist/distributed_normal_matrix.h"
#include "lmtrain/solve/step_planner.h"
#include "lmtrain/train/fit_run.h"
#include "lmtrain/train/predict.h"
#include "mpi_test_main.h"
#include "support/reference.h"
#include "support/spread.h"

namespace lmtrain::testing {
namespace {

dist::Communicator* g_world = nullptr;

Dataset<double> wave(std::size_t samples, std::uint64_t seed, double noise = 0.02) {
  Dataset<double> d(samples, 1, 1);
  Rng rng(seed);
  for (std::size_t i = 0; i < samples; ++i) {
    const double x = rng.uniform(-1, 1), t = std::numbers::pi * 10 * x;
    d.x[i] = x;
    d.y[i] = (t == 0 ? 1.0 : std::sin(t) / t) + noise * rng.normal();
  }
  return d;
}

// θ after one step of `solver` on this rank's rows [first, first + count) of `data`, from the
// torch initialization of seed 5 (geodesic acceleration off: δ alone).
std::vector<double> one_step(LinearSolverType solver, const ModelSpec& spec,
                             const Dataset<double>& data, std::size_t first, std::size_t count,
                             std::size_t slice, StepReport& report) {
  auto backend = make_cpu_backend<double>();
  Sequential<double> model(spec, *backend);
  Loss<double> loss(LossOptions{}, model.outputs(), *backend);
  JacobianEngine<double> engine(model, loss);
  EngineSource<double> source(engine);
  SolverOptions o;
  o.geodesic_acceleration = false;
  o.max_attempts = 1;
  o.lambda_initial = 1.0;
  o.distributed_block_size = 64;
  const std::vector<double> theta = model.initial_parameters(Init::kTorch, 5);
  auto params = backend->allocate(theta.size());
  auto x = backend->allocate(std::max<std::size_t>(count, 1));
  auto y = backend->allocate(std::max<std::size_t>(count, 1));
  backend->copy_from_host(theta.data(), params.data(), theta.size());
  if (count > 0) {
    backend->copy_from_host(data.x.data() + first, x.data(), count);
    backend->copy_from_host(data.y.data() + first, y.data(), count);
  }
  auto step =
      make_lm_step<double>(o, solver, source, slice, std::max<std::size_t>(count, 1), g_world);
  PhaseTimes times;
  report = step->step(params.data(), x.data(), y.data(), count, times);
  std::vector<double> after(theta.size());
  backend->copy_to_host(params.data(), after.data(), after.size());
  for (std::size_t i = 0; i < after.size(); ++i) after[i] = theta[i] - after[i];  // δ (lr = 1)
  return after;
}

TEST(DistributedCholesky, StepEqualsTheReplicatedCholesky) {
  // 1-1000-1: n = 3 001 parameters in blocks of 64, which leave a last block of 57.  Rank r
  // linearizes a block of (r + 1) parts of the batch, in slices of 97 samples: the ranks make
  // different numbers of passes, and rank 0's last slice is partial.
  const auto spec = ModelSpec::mlp(1, {1000}, 1, Activation::kTanh);
  const std::size_t n = 3001, samples = 1500, slice = 97;
  const auto data = wave(samples, 3);
  const auto ranks = static_cast<std::size_t>(g_world->size()),
             rank = static_cast<std::size_t>(g_world->rank());
  const std::size_t parts = ranks * (ranks + 1) / 2;
  const std::size_t first = samples * (rank * (rank + 1) / 2) / parts;
  const std::size_t last = samples * ((rank + 1) * (rank + 2) / 2) / parts;
  StepReport replicated_report, distributed_report;
  const auto replicated = one_step(LinearSolverType::kCholesky, spec, data, first, last - first,
                                   slice, replicated_report);
  const auto distributed = one_step(LinearSolverType::kDistributedCholesky, spec, one_ulp(data),
                                    first, last - first, slice, distributed_report);
  ASSERT_EQ(replicated.size(), n);
  ASSERT_TRUE(replicated_report.accepted) << replicated_report.message;
  EXPECT_EQ(distributed_report.accepted, replicated_report.accepted);
  const double difference = relative_error(distributed, replicated);
  if (g_world->is_root())
    std::printf("distributed_cholesky, %zu ranks, n = %zu: δ relative difference %.3e\n", ranks, n,
                difference);
  // One step, the sums of A in another order: ≤ 8.1e-12 over 2–4 ranks, the kernel paths of
  // scripts/measure-spread.sh and the distributed run's data one ulp off; the objective after it
  // ≤ 1.8e-14.  Bounds ≥ 1 000 times that.
  expect_within("step", difference, 1e-8);
  expect_within(
      "objective after",
      relative_error(distributed_report.objective_after, replicated_report.objective_after), 1e-10);
  // Every rank holds the same δ, bit for bit (one owner per entry of the gathered vector).
  std::vector<double> all(ranks);
  g_world->allgather(&distributed[n / 2], sizeof(double), all.data());
  for (double v : all) EXPECT_EQ(v, distributed[n / 2]);
}

struct TrainedRun {
  std::vector<double> params;
  Summary summary;
};

TrainedRun train(SolverOptions solver, TrainerOptions trainer, const ModelSpec& spec,
                 const Dataset<double>& data, dist::Communicator* comm) {
  auto backend = make_cpu_backend<double>();
  Trainer<double> t(spec, LossOptions{}, solver, trainer, *backend);
  t.set_communicator(comm);
  TrainedRun run;
  run.params = Sequential<double>(spec, *backend).initial_parameters(Init::kTorch, 11);
  run.summary = t.fit(run.params, data);
  return run;
}

TEST(DistributedCholesky, W2SizedRunEndsAtTheLossOfOneRank) {
  // W2's network (1-256-1 tanh, 769 parameters) and batch (10 000), three steps on 30 000 of its
  // points, default damping and geodesic acceleration: the run on these ranks with A sharded
  // against one rank's replicated Cholesky.
  if (g_world->size() != 4) GTEST_SKIP() << "the W2-sized comparison runs on 4 ranks";
  const auto spec = ModelSpec::mlp(1, {256}, 1, Activation::kTanh);
  const auto data = wave(30000, 8, 0.0);
  TrainerOptions t;
  t.max_epochs = 1;
  t.batch_size = 10000;
  t.seed = 2;
  SolverOptions replicated;
  replicated.linear_solver = LinearSolverType::kCholesky;
  SolverOptions distributed;
  distributed.linear_solver = LinearSolverType::kDistributedCholesky;
  const TrainedRun one = train(replicated, t, spec, data, nullptr);
  const TrainedRun many = train(distributed, t, spec, one_ulp(data), g_world);
  EXPECT_EQ(many.summary.linear_solver_used, LinearSolverType::kDistributedCholesky)
      << many.summary.linear_solver_reason;
  EXPECT_EQ(many.summary.steps, one.summary.steps);
  if (g_world->is_root())
    std::printf("W2-sized, 4 ranks distributed vs 1 rank: final loss %.10e vs %.10e\n",
                many.summary.final_loss, one.summary.final_loss);
  EXPECT_LT(one.summary.final_loss, 0.5 * one.summary.initial_loss);
  // Measured (scripts/measure-spread.sh, 4 ranks, kernel paths and one ulp): ≤ 5.6e-14.
  expect_within("final loss", relative_error(many.summary.final_loss, one.summary.final_loss),
                1e-8);
}

TEST(DistributedCholesky, TrainsWhereTheReplicatedPlanRefuses) {
  // 1-700-1: n = 2 101, A alone 33.7 MiB in double; the replicated plan needs A, its factor and
  // the packed triangle the ranks sum (≈ 96 MiB in all).  The per-rank budget, 72 MiB, refuses
  // it; A's and its factor's shares (≈ 67/R MiB) fit on 2–4 ranks.
  if (g_world->size() < 2) GTEST_SKIP() << "needs several ranks to share A";
  const auto spec = ModelSpec::mlp(1, {700}, 1, Activation::kTanh);
  const auto data = wave(1200, 9);
  TrainerOptions t;
  t.max_epochs = 1;
  t.batch_size = 600;
  SolverOptions solver;
  solver.memory_budget_bytes = std::size_t{72} << 20;
  // 64-row blocks, not auto's 128 at this n: the reduce-scatter's panel (2·nb·Pc·n values) is then
  // 2 MiB, not 8, so the bound below tests the shares of A and its factor, not the panel.
  solver.distributed_block_size = 64;
  solver.linear_solver = LinearSolverType::kCholesky;
  try {
    train(solver, t, spec, data, g_world);
    FAIL() << "the replicated cholesky accepted an A larger than the budget";
  } catch (const MemoryPlanError& e) {
    EXPECT_NE(std::string(e.what()).find("distributed_cholesky"), std::string::npos) << e.what();
  }
  solver.linear_solver = LinearSolverType::kAuto;
  const TrainedRun run = train(solver, t, spec, data, g_world);
  EXPECT_EQ(run.summary.linear_solver_used, LinearSolverType::kDistributedCholesky)
      << run.summary.linear_solver_reason;
  EXPECT_NE(run.summary.linear_solver_reason.find("does not fit one rank"), std::string::npos);
  EXPECT_FALSE(run.summary.distribution.empty());
  EXPECT_LT(run.summary.final_loss, 0.5 * run.summary.initial_loss);
  // Each rank's measured peak against the plan (its share of A and the factor's, the slice,
  // the workspace): ≤ 1.2 × the plan, and below what one rank needs for A and its factor alone.
  ASSERT_EQ(run.summary.rank_peak_bytes.size(), static_cast<std::size_t>(g_world->size()));
  for (std::size_t peak : run.summary.rank_peak_bytes) {
    EXPECT_LE(static_cast<double>(peak), 1.2 * static_cast<double>(run.summary.planned_peak_bytes));
    EXPECT_LT(peak, 2 * std::size_t{2101} * 2101 * 8);
  }
  EXPECT_NE(run.summary.full_report().find("Measured peak of each rank"), std::string::npos);
}

TEST(DistributedCholesky, EvidenceRegularizationIsRefusedWithTheAlternative) {
  SolverOptions solver;
  solver.linear_solver = LinearSolverType::kDistributedCholesky;
  solver.regularization = Regularization::kArd;
  std::string error;
  EXPECT_FALSE(solver.is_valid(&error));
  EXPECT_NE(error.find("regularization = l2"), std::string::npos) << error;
  solver.regularization = Regularization::kBayesian;
  EXPECT_FALSE(solver.is_valid(&error));
  EXPECT_NE(error.find("eigenvalues"), std::string::npos) << error;
}

TEST(DistributedCholesky, L2RegularizationMatchesTheReplicatedCholesky) {
  // ρ enters the distributed factorization as a shift of A's diagonal; Marquardt damping reads
  // A's gathered diagonal.  Two epochs on every rank count against one rank.
  const auto spec = ModelSpec::mlp(1, {30}, 1, Activation::kTanh);
  const auto data = wave(400, 4);
  TrainerOptions t;
  t.max_epochs = 2;
  t.batch_size = 100;
  t.seed = 1;
  SolverOptions replicated;
  replicated.linear_solver = LinearSolverType::kCholesky;
  replicated.regularization = Regularization::kL2;
  replicated.weight_decay = 1e-3;
  replicated.damping_matrix = DampingMatrix::kMarquardt;
  SolverOptions distributed = replicated;
  distributed.linear_solver = LinearSolverType::kDistributedCholesky;
  distributed.distributed_block_size = 8;  // 91 parameters: 11 full blocks and one of 3
  const TrainedRun one = train(replicated, t, spec, data, nullptr);
  const TrainedRun many = train(distributed, t, spec, one_ulp(data), g_world);
  EXPECT_EQ(many.summary.linear_solver_used, LinearSolverType::kDistributedCholesky);
  // Measured (scripts/measure-spread.sh, 2–4 ranks, kernel paths and one ulp): ≤ 1.2e-11.
  expect_within("parameters", relative_error(many.params, one.params), 2e-8);
}

// The network's source with each linearization slowed by a sleep per sample: a rank of unequal
// speed whatever else the machine runs, since the shares follow wall time.
class SlowedSource final : public LinearizationSource<double> {
 public:
  SlowedSource(LinearizationSource<double>& inner, std::chrono::microseconds per_sample)
      : inner_(inner), per_sample_(per_sample) {}
  std::size_t num_params() const override { return inner_.num_params(); }
  std::size_t residuals_per_sample() const override { return inner_.residuals_per_sample(); }
  LinearAlgebra<double>& model_backend() const override { return inner_.model_backend(); }
  void reserve(std::size_t batch, std::size_t slice) override { inner_.reserve(batch, slice); }
  void release_slices() override { inner_.release_slices(); }
  SourceFootprint footprint(std::size_t batch, bool trial) const override {
    return inner_.footprint(batch, trial);
  }
  SlicePreference slice_preference() const override { return inner_.slice_preference(); }
  double linearize(const double* params, const double* x, const double* y,
                   std::size_t batch) override {
    std::this_thread::sleep_for(per_sample_ * static_cast<long>(batch));
    return inner_.linearize(params, x, y, batch);
  }
  std::size_t batch() const override { return inner_.batch(); }
  void clear_batch() override { inner_.clear_batch(); }
  const double* residuals() const override { return inner_.residuals(); }
  JacobianRows<double> jacobian_slice(const double* params, std::size_t first, std::size_t count,
                                      double* scratch, std::size_t scratch_ld) override {
    return inner_.jacobian_slice(params, first, count, scratch, scratch_ld);
  }
  double objective(const double* params) override { return inner_.objective(params); }
  void residuals_at(const double* params, double* r) override { inner_.residuals_at(params, r); }
  ParameterGroups relevance_groups() const override { return inner_.relevance_groups(); }

 private:
  LinearizationSource<double>& inner_;
  std::chrono::microseconds per_sample_;
};

// A data set on the CPU backend: batches gathered into buffers of `chunk` samples.
class RowsOf final : public TrainingSet<double> {
 public:
  RowsOf(const Sequential<double>& model, const Loss<double>& loss, Backend<double>& backend,
         const Dataset<double>& d, std::size_t chunk)
      : model_(model), loss_(loss), backend_(backend), samples_(d.samples), chunk_(chunk) {
    x_ = backend.allocate(d.x.size());
    y_ = backend.allocate(d.y.size());
    backend.copy_from_host(d.x.data(), x_.data(), d.x.size());
    backend.copy_from_host(d.y.data(), y_.data(), d.y.size());
    xb_ = backend.allocate(chunk * model.inputs());
    yb_ = backend.allocate(chunk * model.outputs());
  }
  std::size_t samples() const override { return samples_; }
  std::size_t validation_samples() const override { return 0; }
  std::size_t max_units(std::size_t samples) const override { return samples; }
  Batch load(std::span<const std::int64_t> rows) override {
    EXPECT_LE(rows.size(), chunk_);  // the fit run's largest share
    backend_.gather_rows(x_.data(), model_.inputs(), rows, xb_.data());
    backend_.gather_rows(y_.data(), model_.outputs(), rows, yb_.data());
    return {xb_.data(), yb_.data(), rows.size()};
  }
  double objective(const double* theta, bool, std::size_t first, std::size_t count) override {
    return total_objective(model_, loss_, theta, x_.data(), y_.data(), first, count, chunk_, state_,
                           objectives_);
  }
  double reported(double objective, std::size_t samples) const override {
    return loss_.reported(objective, samples);
  }

 private:
  const Sequential<double>& model_;
  const Loss<double>& loss_;
  Backend<double>& backend_;
  std::size_t samples_, chunk_;
  DeviceBuffer<double> x_, y_, xb_, yb_;
  ForwardState<double> state_;
  DeviceBuffer<double> objectives_;
};

// A fit run on these ranks whose last rank sleeps `per_sample` in every linearization.
TrainedRun slowed_fit(const TrainerOptions& t, const ModelSpec& spec, const Dataset<double>& data,
                      std::chrono::microseconds per_sample) {
  auto backend = make_cpu_backend<double>();
  Sequential<double> model(spec, *backend);
  Loss<double> loss(LossOptions{}, model.outputs(), *backend);
  JacobianEngine<double> engine(model, loss);
  EngineSource<double> network(engine);
  const bool slowed = g_world->rank() == g_world->size() - 1;
  SlowedSource source(network, slowed ? per_sample : std::chrono::microseconds(0));
  const std::size_t chunk = BatchShares(t.balance, g_world->size(), 0).max_shard(t.batch_size);
  RowsOf rows(model, loss, *backend, data, chunk);
  SolverOptions solver;
  solver.linear_solver = LinearSolverType::kCholesky;
  FitDescription description;
  description.model = spec.describe();
  FitHooks<double> hooks;
  hooks.comm = g_world;
  TrainedRun run;
  run.params = model.initial_parameters(Init::kTorch, 11);
  DeviceBuffer<double> theta = backend->allocate(run.params.size());
  run.summary = run_fit<double>(solver, t, source, rows, *backend, theta.data(), run.params,
                                description, hooks, CallerBuffers{0, 0});
  return run;
}

TEST(MeasuredBalance, ASlowerRankGetsLessOfTheBatchAndTheSameParameters) {
  // The last of 2 ranks sleeps 200 µs per sample it linearizes (about 100 times its compute on
  // 1-64-1): with trainer.balance = "measured" its share falls towards kMinShare/2, and after 10
  // steps θ is that of equal shares up to float64 summation order (every sample is linearized by
  // exactly one rank either way).  About 4 s.
  if (g_world->size() != 2) GTEST_SKIP() << "runs on 2 ranks";
  const auto spec = ModelSpec::mlp(1, {64}, 1, Activation::kTanh);
  const auto data = wave(20000, 12);
  TrainerOptions t;
  t.max_epochs = 1;
  t.batch_size = 2000;
  t.seed = 4;
  t.balance = BatchBalance::kMeasured;
  const TrainedRun measured = slowed_fit(t, spec, data, std::chrono::microseconds(200));
  t.balance = BatchBalance::kEqual;
  const TrainedRun equal = slowed_fit(t, spec, one_ulp(data), std::chrono::microseconds(200));
  ASSERT_EQ(measured.summary.steps, 10);
  ASSERT_EQ(measured.summary.batch_shares.size(), 2u);
  if (g_world->is_root())
    std::printf("measured shares after %d steps: %.3f / %.3f\n", measured.summary.steps,
                measured.summary.batch_shares[0], measured.summary.batch_shares[1]);
  EXPECT_LT(measured.summary.batch_shares[1], 0.2);
  EXPECT_GE(measured.summary.batch_shares[1], BatchShares::kMinShare / 2 - 1e-12);
  EXPECT_NEAR(measured.summary.batch_shares[0] + measured.summary.batch_shares[1], 1.0, 1e-12);
  EXPECT_EQ(equal.summary.batch_shares, (std::vector<double>{0.5, 0.5}));
  EXPECT_NE(measured.summary.full_report().find("Batch shares"), std::string::npos);
  const double difference = relative_error(measured.params, equal.params);
  if (g_world->is_root()) std::printf("θ measured vs equal shares: %.3e\n", difference);
  // Measured (scripts/measure-spread.sh, kernel paths and one ulp): ≤ 9.6e-13.
  expect_within("parameters", difference, 1e-9);
  EXPECT_LT(measured.summary.final_loss, 0.5 * measured.summary.initial_loss);  // it trained
}

}  // namespace
}  // namespace lmtrain::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // MPI even with one rank: ScaLAPACK's BLACS runs on an MPI communicator.
  auto world = lmtrain::dist::make_mpi_communicator();
  lmtrain::testing::g_world = world.get();
  return lmtrain::testing::run_tests_on_ranks(argc, argv, *world);
}
