// Weight decay and Bayesian regularization against closed forms on a linear model, where the
// penalized least-squares problem is ridge regression: θ* = (ZᵀZ + ρI)⁻¹Zᵀy with Z = [X 1]
// (every parameter, biases included, is penalized), solved here by LAPACK.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <numeric>

#include "lmtrain/solve/lm_step.h"
#include "support/reference.h"

namespace lmtrain::testing {
namespace {

constexpr std::size_t kBatch = 60, kIn = 4, kOut = 1, kN = kOut * kIn + kOut;

struct Linear {
  std::vector<double> x, y, z;  // z: the design [X 1], kBatch × (kIn + 1)
  Linear() {
    Rng rng(31);
    x = random_vector(kBatch * kIn, rng);
    y.resize(kBatch);
    const double w[kIn] = {0.8, -1.5, 0.3, 2.0};
    for (std::size_t b = 0; b < kBatch; ++b) {
      y[b] = 0.4 + 0.5 * rng.normal();  // noisy, so that regularization has something to do
      for (std::size_t i = 0; i < kIn; ++i) y[b] += w[i] * x[b * kIn + i];
    }
    z.resize(kBatch * (kIn + 1));
    for (std::size_t b = 0; b < kBatch; ++b) {
      for (std::size_t i = 0; i < kIn; ++i) z[b * (kIn + 1) + i] = x[b * kIn + i];
      z[b * (kIn + 1) + kIn] = 1.0;
    }
  }
  // Ridge solution in lmtrain's parameter order (weights, then the bias).
  std::vector<double> ridge(double rho) const {
    const std::size_t k = kIn + 1;
    std::vector<double> a(k * k, 0.0), rhs(k, 0.0);
    for (std::size_t b = 0; b < kBatch; ++b)
      for (std::size_t p = 0; p < k; ++p) {
        rhs[p] += z[b * k + p] * y[b];
        for (std::size_t q = 0; q < k; ++q) a[p * k + q] += z[b * k + p] * z[b * k + q];
      }
    for (std::size_t p = 0; p < k; ++p) a[p * k + p] += rho;
    const auto lk = static_cast<lapack_int>(k);
    EXPECT_EQ(LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', lk, 1, a.data(), lk, rhs.data(), 1), 0);
    return rhs;
  }
  // Eigenvalues of ZᵀZ (LAPACK dsyev).
  std::vector<double> gram_eigenvalues() const {
    const std::size_t k = kIn + 1;
    std::vector<double> a(k * k, 0.0), w(k);
    for (std::size_t b = 0; b < kBatch; ++b)
      for (std::size_t p = 0; p < k; ++p)
        for (std::size_t q = 0; q < k; ++q) a[p * k + q] += z[b * k + p] * z[b * k + q];
    const auto lk = static_cast<lapack_int>(k);
    EXPECT_EQ(LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'N', 'U', lk, a.data(), lk, w.data()), 0);
    return w;
  }
  double residual_norm2(const std::vector<double>& theta) const {
    double s = 0;
    for (std::size_t b = 0; b < kBatch; ++b) {
      double out = theta[kIn];
      for (std::size_t i = 0; i < kIn; ++i) out += theta[i] * x[b * kIn + i];
      s += (out - y[b]) * (out - y[b]);
    }
    return s;
  }
};

TEST(Regularization, L2StepOnALinearModelIsRidgeRegression) {
  const Linear data;
  Problem<double> p(ModelSpec(kIn).dense(kOut), LossOptions{}, data.x, data.y, kBatch);
  Rng rng(32);
  const auto theta0 = random_vector(kN, rng);
  SolverOptions o;
  o.regularization = Regularization::kL2;
  o.weight_decay = 7.5;
  o.lambda_min = 1e-14;
  o.lambda_initial = 1e-14;
  LevenbergMarquardtStep<double> step(o, LinearSolverType::kCholesky, *p.engine, kBatch, kBatch);
  p.set_params(theta0);
  PhaseTimes times;
  const StepReport report = step.step(p.params.data(), p.x.data(), p.y.data(), kBatch, times);
  ASSERT_TRUE(report.accepted);
  EXPECT_EQ(report.weight_decay, 7.5);
  const auto theta1 = p.download(p.params.data(), kN);
  EXPECT_LE(relative_error(theta1, data.ridge(7.5)), 1e-10);
  // The objective is ½‖r‖² + ½ρ‖θ‖² on both sides of the step, and the quadratic model is exact.
  EXPECT_NEAR(report.objective_after,
              0.5 * data.residual_norm2(theta1) + 0.5 * 7.5 * std::inner_product(theta1.begin(), theta1.end(), theta1.begin(), 0.0),
              1e-10 * report.objective_after);
  EXPECT_NEAR(report.gain_ratio, 1.0, 1e-8);
  EXPECT_NEAR(report.objective_after - report.penalty_after, 0.5 * data.residual_norm2(theta1),
              1e-10 * report.objective_after);
}

TEST(Regularization, L2StepWithMatrixFreeCgIsRidgeRegressionToo) {
  // CG never forms A: the penalty enters as a shift of its operator and of the preconditioner,
  // with Marquardt damping as well (its diagonal then includes ρ, as A's would).
  const Linear data;
  Rng rng(33);
  const auto theta0 = random_vector(kN, rng);
  std::vector<std::vector<double>> after;
  for (const LinearSolverType type : {LinearSolverType::kCholesky, LinearSolverType::kCg}) {
    for (const DampingMatrix damping : {DampingMatrix::kIdentity, DampingMatrix::kMarquardt}) {
      Problem<double> p(ModelSpec(kIn).dense(kOut), LossOptions{}, data.x, data.y, kBatch);
      SolverOptions o;
      o.regularization = Regularization::kL2;
      o.weight_decay = 7.5;
      o.damping_matrix = damping;
      o.lambda_min = 1e-14;
      o.lambda_initial = 1e-14;
      o.cg_forcing = 1e-14;
      o.cg_max_iterations = 1000;
      LevenbergMarquardtStep<double> step(o, type, *p.engine, 13, kBatch);
      p.set_params(theta0);
      PhaseTimes times;
      ASSERT_TRUE(step.step(p.params.data(), p.x.data(), p.y.data(), kBatch, times).accepted);
      after.push_back(p.download(p.params.data(), kN));
    }
  }
  const auto ridge = data.ridge(7.5);
  for (const auto& theta : after) EXPECT_LE(relative_error(theta, ridge), 1e-9);
}

TEST(Regularization, BayesianReachesTheEvidenceFixedPointAndItsRidgeSolution) {
  const Linear data;
  const ModelSpec spec = ModelSpec(kIn).dense(kOut);
  Dataset<double> train(kBatch, kIn, kOut);
  train.x = data.x;
  train.y = data.y;
  SolverOptions o;
  o.regularization = Regularization::kBayesian;
  TrainerOptions t;
  t.max_epochs = 80;  // full batch: one step per epoch
  auto backend = make_cpu_backend<double>();
  Trainer<double> trainer(spec, LossOptions{}, o, t, *backend);
  std::vector<double> theta = Sequential<double>(spec, *backend).initial_parameters(Init::kTorch, 5);
  const Summary s = trainer.fit(theta, train);
  const double rho = s.final_weight_decay;
  ASSERT_GT(rho, 0) << s.full_report();

  // MacKay's re-estimate at the final point, computed independently: γ = Σ aᵢ/(aᵢ + ρ) from the
  // eigenvalues of ZᵀZ, ρ' = γ‖r‖² / ((N − γ)‖θ‖²).  At convergence ρ' = ρ.
  double gamma = 0;
  for (double a : data.gram_eigenvalues()) gamma += a / (a + rho);
  const double theta_norm2 = std::inner_product(theta.begin(), theta.end(), theta.begin(), 0.0);
  const double rho_next = gamma * data.residual_norm2(theta) / ((kBatch - gamma) * theta_norm2);
  EXPECT_NEAR(rho_next, rho, 1e-6 * rho);
  EXPECT_NEAR(s.effective_parameters, gamma, 1e-6 * gamma);
  EXPECT_GT(gamma, 1.0);
  EXPECT_LT(gamma, static_cast<double>(kN));
  // And θ is the ridge solution for that ρ.
  EXPECT_LE(relative_error(theta, data.ridge(rho)), 1e-8);
  EXPECT_NE(s.full_report().find("effective parameters"), std::string::npos);
}

TEST(Regularization, SolverCombinationsThatCannotWorkAreRefused) {
  SolverOptions o;
  o.regularization = Regularization::kBayesian;
  o.linear_solver = LinearSolverType::kCg;
  std::string error;
  EXPECT_FALSE(o.is_valid(&error));
  EXPECT_NE(error.find("solver.linear_solver = \"cg\""), std::string::npos) << error;
  o.regularization = Regularization::kL2;
  EXPECT_TRUE(o.is_valid(&error)) << error;
  o.linear_solver = LinearSolverType::kDual;
  EXPECT_FALSE(o.is_valid(&error));
  EXPECT_NE(error.find("dual"), std::string::npos) << error;
  o.linear_solver = LinearSolverType::kAuto;
  o.weight_decay = -1;
  EXPECT_FALSE(o.is_valid(&error));
  EXPECT_NE(error.find("weight_decay"), std::string::npos) << error;
}

}  // namespace
}  // namespace lmtrain::testing
