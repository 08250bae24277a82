// The LM step's device→host reads (issue 36), counted by the CPU backend as the CUDA backend
// counts them (DeviceQueue::host_reads: the reading calls count themselves), on problems shaped
// like W1 (1-20-1 tanh, batch 1 000) and W2 (1-256-1 tanh, batch 10 000) with the default solver
// (cholesky, Nielsen damping, geodesic acceleration with its backoff, float32).  A GPU waits for
// the device at each read, so the step reads once for its linearization (F, finiteness, max |g|,
// D's scale), once per attempt (the factorization's status, δ's finiteness and the predicted
// reduction), once per computed geodesic correction (its ratio test) and once per trial (F there
// and the step's norm): at most 4 for an attempt, 3 for each further one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "lmtrain/lmtrain.h"
#include "support/sinc_data.h"

namespace lmtrain {
namespace {

struct Shape {
  std::size_t hidden, samples, batch;
  int epochs;
};

void expect_reads_per_attempt(const Shape& shape) {
  const auto spec = ModelSpec::mlp(1, {shape.hidden}, 1, Activation::kTanh);
  TrainerOptions trainer;
  trainer.max_epochs = shape.epochs;
  trainer.batch_size = shape.batch;
  trainer.seed = 3;
  auto backend = make_cpu_backend<float>();
  Trainer<float> train(spec, LossOptions{}, SolverOptions{}, trainer, *backend);
  std::vector<StepReport> steps;
  train.add_callback([&](const IterationSummary& it) {
    steps.push_back(it.report);
    return CallbackResult::kContinue;
  });
  std::vector<float> params = Sequential<float>(spec, *backend).initial_parameters(Init::kTorch, 3);
  const Summary summary = train.fit(params, testing::sinc_on_grid<float>(shape.samples));
  ASSERT_EQ(summary.linear_solver_used, LinearSolverType::kCholesky);
  ASSERT_TRUE(summary.geodesic_acceleration);
  ASSERT_EQ(summary.precision, "float32");

  std::int64_t total = 0;
  int one_attempt_with_correction = 0;
  for (const StepReport& r : steps) {
    const int corrections = r.geodesic_applied + r.geodesic_refused;
    const int trials = r.attempts - r.invalid;
    EXPECT_EQ(r.host_reads, 1 + r.attempts + corrections + trials)
        << r.attempts << " attempts, " << r.invalid << " invalid, " << corrections
        << " corrections";
    EXPECT_LE(r.host_reads, 4 * r.attempts);
    if (r.attempts == 1 && corrections == 1) {
      EXPECT_EQ(r.host_reads, 4);
      ++one_attempt_with_correction;
    }
    total += r.host_reads;
  }
  // The case the budget is about was met.
  EXPECT_GT(one_attempt_with_correction, 0);
  EXPECT_EQ(summary.host_reads, total);
  EXPECT_EQ(summary.steps, static_cast<int>(steps.size()));
}

TEST(HostReads, AtMostFourPerAttemptOnW1Shape) {
  expect_reads_per_attempt({20, 20000, 1000, 1});
}

TEST(HostReads, AtMostFourPerAttemptOnW2Shape) {
  expect_reads_per_attempt({256, 20000, 10000, 2});
}

}  // namespace
}  // namespace lmtrain
