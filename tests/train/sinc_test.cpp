// W1 (shared/WORKLOADS.md): sinc(10x) on 20 000 points, 1-20-1 tanh, batch 1 000, multiplicative
// damping.  Targets from the core-engine issue; the independent numpy implementation of the same
// algorithm (shared/reference/lm_sinc_numpy.py) reaches median 8e-7, worst 3.4e-6 in float32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "lmtrain/lmtrain.h"

namespace lmtrain {
namespace {

template <typename T>
double w1_final_mse(std::uint64_t seed, int epochs, LinearSolverType solver,
                    SystemPrecision system = SystemPrecision::kModel) {
  constexpr std::size_t kSamples = 20000;
  Dataset<T> data(kSamples, 1, 1);
  for (std::size_t i = 0; i < kSamples; ++i) {
    const double x = -1.0 + 2.0 * static_cast<double>(i) / (kSamples - 1);
    const double t = std::numbers::pi * 10.0 * x;
    data.x[i] = static_cast<T>(x);
    data.y[i] = static_cast<T>(t == 0 ? 1.0 : std::sin(t) / t);
  }
  const auto spec = ModelSpec::mlp(1, {20}, 1, Activation::kTanh);
  SolverOptions solver_options;
  solver_options.linear_solver = solver;
  solver_options.system_precision = system;
  TrainerOptions trainer;
  trainer.max_epochs = epochs;
  trainer.batch_size = 1000;
  trainer.seed = seed;
  auto backend = make_cpu_backend<T>();
  Trainer<T> train(spec, LossOptions{}, solver_options, trainer, *backend);
  std::vector<T> params = Sequential<T>(spec, *backend).initial_parameters(Init::kTorch, seed);
  const Summary s = train.fit(params, data);
  EXPECT_EQ(s.termination, TerminationReason::kMaxEpochs) << s.full_report();
  // The reported final loss is the MSE on all 20 000 points; recompute it independently in
  // double from the returned parameters.
  double mse = 0;
  // Network: z1 = W1 x + b1 (W1: params[0..20), b1: [20..40)), a = tanh z1,
  //          out = W2 a + b2 (W2: [40..60), b2: [60]).
  for (std::size_t i = 0; i < kSamples; ++i) {
    const double x = static_cast<double>(data.x[i]);
    double out = static_cast<double>(params[60]);
    for (std::size_t h = 0; h < 20; ++h)
      out += static_cast<double>(params[40 + h]) *
             std::tanh(static_cast<double>(params[h]) * x + static_cast<double>(params[20 + h]));
    const double e = out - static_cast<double>(data.y[i]);
    mse += e * e;
  }
  mse /= kSamples;
  EXPECT_NEAR(mse, s.final_loss, 1e-3 * mse + 1e-12);
  return mse;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(W1Sinc, Float32FiftyEpochsOverFiveSeeds) {
  std::vector<double> mse;
  for (std::uint64_t seed = 0; seed < 5; ++seed)
    mse.push_back(w1_final_mse<float>(seed, 50, LinearSolverType::kAuto));
  for (std::size_t i = 0; i < mse.size(); ++i) RecordProperty("mse_seed_" + std::to_string(i), std::to_string(mse[i]));
  EXPECT_LE(median(mse), 2e-6);
  EXPECT_LE(*std::max_element(mse.begin(), mse.end()), 1e-5);
}

// Mixed precision: float32 model, float64 A and solve.  Float32 normal equations refuse
// A + λI at λ ≈ 1e-4 on W1 (the attempt is invalid and λ rises); float64 ones do not, so the
// same 50 epochs go further.  Measured (seeds 0–4): 9.8e-7, 3.3e-7, 7.1e-8, 7.3e-7, 5.6e-6.
TEST(W1Sinc, MixedPrecisionFiftyEpochsOverFiveSeeds) {
  std::vector<double> mse;
  for (std::uint64_t seed = 0; seed < 5; ++seed)
    mse.push_back(w1_final_mse<float>(seed, 50, LinearSolverType::kAuto, SystemPrecision::kFloat64));
  for (std::size_t i = 0; i < mse.size(); ++i) RecordProperty("mse_seed_" + std::to_string(i), std::to_string(mse[i]));
  EXPECT_LE(median(mse), 1.5e-6);
  EXPECT_LE(*std::max_element(mse.begin(), mse.end()), 1e-5);
}

TEST(W1Sinc, Float64TwoHundredEpochs) {
  std::vector<double> mse;
  for (std::uint64_t seed = 0; seed < 3; ++seed)
    mse.push_back(w1_final_mse<double>(seed, 200, LinearSolverType::kAuto));
  EXPECT_LE(*std::max_element(mse.begin(), mse.end()), 1e-8);
}

TEST(W1Sinc, EigenSolverConvergesLikeCholesky) {
  EXPECT_LE(w1_final_mse<float>(1, 50, LinearSolverType::kEigen), 1e-5);
}

}  // namespace
}  // namespace lmtrain
