// W1 (shared/WORKLOADS.md): sinc(10x) on 20 000 points, 1-20-1 tanh, batch 1 000, the default
// solver (Nielsen damping).  The independent numpy implementation of the peers' algorithm
// (shared/reference/lm_sinc_numpy.py, multiplicative damping) reaches median 8e-7, worst 3.4e-6
// in float32; torch-levenberg-marquardt's README reports 3.3e-7 after 50 epochs.
//
// These runs carry the label "convergence"; scripts/test.sh runs them once per SIMD path of the
// activation loops (LMTRAIN_SIMD = baseline, avx2, and avx512 where the CPU has it), since each
// path rounds tanh its own way and a training run amplifies such differences.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "lmtrain/lmtrain.h"
#include "support/sinc_data.h"
#include "support/spread.h"

namespace lmtrain {
namespace {

struct W1Run {
  double mse = 0;  // recomputed in double from the returned parameters
  Summary summary;
};

template <typename T>
W1Run w1(std::uint64_t seed, int epochs, SolverOptions solver_options = {}, bool moved = false) {
  constexpr std::size_t kSamples = 20000;
  Dataset<T> data = testing::sinc_on_grid<T>(kSamples);
  if (moved) data = testing::one_ulp(std::move(data));  // scripts/measure-spread.sh
  const auto spec = ModelSpec::mlp(1, {20}, 1, Activation::kTanh);
  TrainerOptions trainer;
  trainer.max_epochs = epochs;
  trainer.batch_size = 1000;
  trainer.seed = seed;
  auto backend = make_cpu_backend<T>();
  Trainer<T> train(spec, LossOptions{}, solver_options, trainer, *backend);
  std::vector<T> params = Sequential<T>(spec, *backend).initial_parameters(Init::kTorch, seed);
  W1Run run;
  run.summary = train.fit(params, data);
  EXPECT_EQ(run.summary.termination, TerminationReason::kMaxEpochs) << run.summary.full_report();
  // The reported final loss is the MSE on all 20 000 points; recompute it independently in
  // double from the returned parameters.
  // Network: z1 = W1 x + b1 (W1: params[0..20), b1: [20..40)), a = tanh z1,
  //          out = W2 a + b2 (W2: [40..60), b2: [60]).
  for (std::size_t i = 0; i < kSamples; ++i) {
    const double x = static_cast<double>(data.x[i]);
    double out = static_cast<double>(params[60]);
    for (std::size_t h = 0; h < 20; ++h)
      out += static_cast<double>(params[40 + h]) *
             std::tanh(static_cast<double>(params[h]) * x + static_cast<double>(params[20 + h]));
    const double e = out - static_cast<double>(data.y[i]);
    run.mse += e * e;
  }
  run.mse /= kSamples;
  // The reported loss comes from the model's own forward pass in T: each output carries a few
  // ε_T of rounding δ, and mean((e + δ)²) − mean(e²) ≤ 2·√mse·|δ| + δ².
  const double eps = std::numeric_limits<T>::epsilon();
  EXPECT_NEAR(run.mse, run.summary.final_loss,
              1e-3 * run.mse + 8 * eps * std::sqrt(run.mse) + 16 * eps * eps);
  return run;
}

struct SeedStats {
  double median = 0, worst = 0;
  double attempts_per_accepted = 0;
};

// Runs `seeds` seeds, records each one's MSE (full precision) and the attempt counts.
template <typename T>
SeedStats over_seeds(int seeds, int epochs, SolverOptions options = {}) {
  std::vector<double> mse;
  long accepted = 0, attempts = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    const W1Run run = w1<T>(static_cast<std::uint64_t>(seed), epochs, options);
    mse.push_back(run.mse);
    accepted += run.summary.accepted_steps;
    attempts += run.summary.accepted_steps + run.summary.rejected_steps + run.summary.invalid_steps;
    ::testing::Test::RecordProperty(fmt::format("mse_seed_{}", seed),
                                    fmt::format("{:.6e}", run.mse));
  }
  std::vector<double> sorted = mse;
  std::sort(sorted.begin(), sorted.end());
  SeedStats s;
  s.median = sorted[sorted.size() / 2];
  s.worst = sorted.back();
  s.attempts_per_accepted = static_cast<double>(attempts) / static_cast<double>(accepted);
  ::testing::Test::RecordProperty("median", fmt::format("{:.6e}", s.median));
  ::testing::Test::RecordProperty("worst", fmt::format("{:.6e}", s.worst));
  ::testing::Test::RecordProperty("attempts_per_accepted",
                                  fmt::format("{:.4f}", s.attempts_per_accepted));
  std::printf("%d seeds: median %.3e, worst %.3e, %.3f attempts per accepted step\n", seeds,
              s.median, s.worst, s.attempts_per_accepted);
  return s;
}

// The targets for every SIMD path: median ≤ 1e-6, worst ≤ 5e-6 over 20 seeds.  Measured
// (AMD EPYC): baseline 2.7e-7 / 9.6e-7, avx2 2.2e-7 / 1.0e-6, 1.13–1.14 attempts per accepted
// step.  With the peers' multiplicative damping the worst seed ends at 1.8e-4.
TEST(W1Sinc, Float32FiftyEpochsOverTwentySeeds) {
  const SeedStats s = over_seeds<float>(20, 50);
  EXPECT_LE(s.median, 1e-6);
  EXPECT_LE(s.worst, 5e-6);
  EXPECT_LE(s.attempts_per_accepted, 1.3);
}

// Mixed precision: float32 model, float64 A and solve: the factorization no longer fails at
// small λ, and W1 goes an order of magnitude further.  Measured (AMD EPYC, both SIMD paths):
// median 1.6e-8, worst 8.8e-8 / 1.0e-7, 1.24 attempts per accepted step.
TEST(W1Sinc, MixedPrecisionFiftyEpochsOverTenSeeds) {
  SolverOptions options;
  options.system_precision = SystemPrecision::kFloat64;
  const SeedStats s = over_seeds<float>(10, 50, options);
  EXPECT_LE(s.median, 1e-7);
  EXPECT_LE(s.worst, 5e-7);
  EXPECT_LE(s.attempts_per_accepted, 1.3);
}

// tf-levenberg-marquardt's README reports W1 at 1.03e-8 after 100 float64 epochs.  Measured:
// median 1.5e-12, worst 2.6e-11, 1.28 attempts per accepted step.
TEST(W1Sinc, Float64HundredEpochsOverFiveSeeds) {
  const SeedStats s = over_seeds<double>(5, 100);
  EXPECT_LE(s.worst, 1e-8);
}

// The eigen solver takes the same steps as Cholesky — (A + λI)⁻¹g by another factorization —
// so in float64, where neither fails, two epochs of both make the same accept/reject decisions
// and reach the same parameters to rounding.  In float32 it then trains W1 as far.  The 40 steps
// amplify the factorizations' rounding: the MSEs differ by ≤ 2.4e-9 relative over the kernel
// paths of scripts/measure-spread.sh, with and without the eigen run's data one ulp off; the
// bound is ≥ 1 000 times that.
TEST(W1Sinc, EigenSolverTakesCholeskysSteps) {
  SolverOptions cholesky, eigen;
  cholesky.linear_solver = LinearSolverType::kCholesky;
  eigen.linear_solver = LinearSolverType::kEigen;
  const W1Run a = w1<double>(1, 2, cholesky), b = w1<double>(1, 2, eigen, true);
  EXPECT_EQ(a.summary.accepted_steps, b.summary.accepted_steps);
  EXPECT_EQ(a.summary.rejected_steps, b.summary.rejected_steps);
  testing::expect_within("mse after 40 steps", testing::relative_error(b.mse, a.mse), 5e-6);
  EXPECT_LE(w1<float>(1, 50, eigen).mse, 5e-6);
}

}  // namespace
}  // namespace lmtrain
