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

// Full-batch training (one LM step per epoch) from PyTorch's initialization with `seed`; the
// trained parameters are left in *theta.
template <typename T>
Summary fit_full_batch(const ModelSpec& spec, const Dataset<T>& train, const SolverOptions& o,
                       int epochs, std::uint64_t seed, std::vector<T>* theta) {
  TrainerOptions t;
  t.max_epochs = epochs;
  auto backend = make_cpu_backend<T>();
  Trainer<T> trainer(spec, LossOptions{}, o, t, *backend);
  *theta = Sequential<T>(spec, *backend).initial_parameters(Init::kTorch, seed);
  return trainer.fit(*theta, train);
}

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
  LevenbergMarquardtStep<double> step(o, LinearSolverType::kCholesky, *p.source, kBatch, kBatch);
  p.set_params(theta0);
  PhaseTimes times;
  const StepReport report = step.step(p.params.data(), p.x.data(), p.y.data(), kBatch, times);
  ASSERT_TRUE(report.accepted);
  EXPECT_EQ(report.weight_decay, 7.5);
  const auto theta1 = p.download(p.params.data(), kN);
  EXPECT_LE(relative_error(theta1, data.ridge(7.5)), 1e-10);
  // The objective is ½‖r‖² + ½ρ‖θ‖² on both sides of the step, and the quadratic model is exact.
  EXPECT_NEAR(report.objective_after,
              0.5 * data.residual_norm2(theta1) +
                  0.5 * 7.5 * std::inner_product(theta1.begin(), theta1.end(), theta1.begin(), 0.0),
              1e-10 * report.objective_after);
  EXPECT_NEAR(report.gain_ratio, 1.0, 1e-8);
  EXPECT_NEAR(report.objective_after - report.penalty_after, 0.5 * data.residual_norm2(theta1),
              1e-10 * report.objective_after);
  // Reads: the linearization's, the penalty's ½ρ‖θ‖² and its g's and D's figures, then one per
  // attempt — the penalty at the trial read with the trial's scalars (issue 36).
  EXPECT_EQ(report.host_reads, 3 + report.attempts);
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
      LevenbergMarquardtStep<double> step(o, type, *p.source, 13, kBatch);
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
  std::vector<double> theta;
  const Summary s = fit_full_batch(spec, train, o, 80, 5, &theta);
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
  EXPECT_EQ(s.full_report().find("Warning"), std::string::npos) << s.full_report();
}

TEST(Regularization, SummaryWarnsWhenTheEvidenceNoLongerBoundsTheFit) {
  // 50 noisy samples (noise variance 0.25), 16 inputs of which 2 matter, 16-16-1 (289
  // parameters): single-ρ bayesian reaches the evidence's degenerate end γ → N and interpolates;
  // the Summary must say so.  ard on the same data keeps γ well below N and the training MSE
  // near the noise level, without the warning.
  constexpr std::size_t kInputs = 16, kSamples = 50;
  Rng rng(1);
  Dataset<double> train(kSamples, kInputs, 1);
  for (std::size_t s = 0; s < kSamples; ++s) {
    double y = 0;
    for (std::size_t i = 0; i < kInputs; ++i) {
      train.x[s * kInputs + i] = rng.normal();
      if (i < 2) y += std::sin(train.x[s * kInputs + i]);
    }
    train.y[s] = y + 0.5 * rng.normal();
  }
  const ModelSpec spec = ModelSpec::mlp(kInputs, {16}, 1, Activation::kTanh);
  auto fit = [&](Regularization r) {
    SolverOptions o;
    o.regularization = r;
    std::vector<double> theta;
    return fit_full_batch(spec, train, o, 100, 3, &theta);
  };
  const Summary bayesian = fit(Regularization::kBayesian);
  ASSERT_GT(bayesian.effective_parameters, 0.9 * kSamples) << bayesian.full_report();
  EXPECT_LT(bayesian.final_loss, 1e-4);  // interpolates
  EXPECT_NE(bayesian.full_report().find("Warning"), std::string::npos) << bayesian.full_report();
  const Summary ard = fit(Regularization::kArd);
  EXPECT_LT(ard.effective_parameters, 0.5 * kSamples) << ard.full_report();
  EXPECT_GT(ard.final_loss, 0.1);
  EXPECT_EQ(ard.full_report().find("Warning"), std::string::npos) << ard.full_report();
}

// y = Σ w_i x_i + 0.4 + noise with inputs 2 and 4 irrelevant (w = 0): automatic relevance
// determination on a linear model, where every parameter is its own group.
struct SparseLinear {
  static constexpr std::size_t kInputs = 6, kSamples = 80, kK = kInputs + 1;
  std::vector<double> x, y, z;  // z = [X 1]
  SparseLinear() {
    Rng rng(41);
    x = random_vector(kSamples * kInputs, rng);
    const double w[kInputs] = {0.9, -1.4, 0.0, 0.6, 0.0, 1.8};
    y.resize(kSamples);
    z.resize(kSamples * kK);
    for (std::size_t b = 0; b < kSamples; ++b) {
      y[b] = 0.4 + 0.3 * rng.normal();
      for (std::size_t i = 0; i < kInputs; ++i) {
        y[b] += w[i] * x[b * kInputs + i];
        z[b * kK + i] = x[b * kInputs + i];
      }
      z[b * kK + kInputs] = 1.0;
    }
  }
  // (ZᵀZ + R) in row-major, R = diag(rho).
  std::vector<double> penalized_gram(const std::vector<double>& rho) const {
    std::vector<double> a(kK * kK, 0.0);
    for (std::size_t b = 0; b < kSamples; ++b)
      for (std::size_t p = 0; p < kK; ++p)
        for (std::size_t q = 0; q < kK; ++q) a[p * kK + q] += z[b * kK + p] * z[b * kK + q];
    for (std::size_t p = 0; p < kK; ++p) a[p * kK + p] += rho[p];
    return a;
  }
};

TEST(Regularization, ArdReachesEachGroupsEvidenceFixedPointAndSwitchesOffIrrelevantInputs) {
  const SparseLinear data;
  constexpr std::size_t kK = SparseLinear::kK, kSamples = SparseLinear::kSamples;
  const ModelSpec spec = ModelSpec(SparseLinear::kInputs).dense(1);
  Dataset<double> train(kSamples, SparseLinear::kInputs, 1);
  train.x = data.x;
  train.y = data.y;
  SolverOptions o;
  o.regularization = Regularization::kArd;
  std::vector<double> theta;
  const Summary s = fit_full_batch(spec, train, o, 300, 5, &theta);
  ASSERT_EQ(s.penalty_groups.size(), kK) << s.full_report();  // 6 inputs and the bias
  std::vector<double> rho(kK);
  for (std::size_t g = 0; g < kK; ++g) rho[g] = s.penalty_groups[g].weight_decay;

  // θ is the generalized ridge solution (ZᵀZ + R)⁻¹Zᵀy for the final R (LAPACK).
  std::vector<double> h = data.penalized_gram(rho), rhs(kK, 0.0);
  for (std::size_t b = 0; b < kSamples; ++b)
    for (std::size_t p = 0; p < kK; ++p) rhs[p] += data.z[b * kK + p] * data.y[b];
  const auto lk = static_cast<lapack_int>(kK);
  ASSERT_EQ(LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', lk, 1, h.data(), lk, rhs.data(), 1), 0);
  EXPECT_LE(relative_error(theta, rhs), 1e-8);

  // MacKay's per-group re-estimate at the final point, computed independently with LAPACK's
  // inverse: γ_g = 1 − ρ_g [(ZᵀZ + R)⁻¹]_gg, ρ'_g = γ_g‖r‖² / ((N − γ) θ_g²), and the common
  // level ρ̄ = γ‖r‖² / ((N − γ)‖θ‖²).  At convergence ρ_g = max(ρ̄, ρ'_g) for every group not
  // held at the cap: its own fixed point, or the common level where that lies below.
  std::vector<double> inv = data.penalized_gram(rho);
  ASSERT_EQ(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', lk, inv.data(), lk), 0);
  ASSERT_EQ(LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'U', lk, inv.data(), lk), 0);
  double r2 = 0;
  for (std::size_t b = 0; b < kSamples; ++b) {
    double out = 0;
    for (std::size_t p = 0; p < kK; ++p) out += data.z[b * kK + p] * theta[p];
    r2 += (out - data.y[b]) * (out - data.y[b]);
  }
  std::vector<double> gamma(kK);
  double gamma_total = 0;
  for (std::size_t g = 0; g < kK; ++g) {
    gamma[g] = 1.0 - rho[g] * inv[g * kK + g];
    gamma_total += gamma[g];
    EXPECT_NEAR(s.penalty_groups[g].effective_parameters, gamma[g], 1e-6) << g;
  }
  EXPECT_NEAR(s.effective_parameters, gamma_total, 1e-6);
  const double noise = r2 / (static_cast<double>(kSamples) - gamma_total);
  const double common =
      gamma_total * noise / std::inner_product(theta.begin(), theta.end(), theta.begin(), 0.0);
  std::size_t own_fixed_points = 0;
  for (std::size_t g = 0; g < kK; ++g) {
    if (rho[g] >= 1e10) continue;  // switched off
    const double rho_next = gamma[g] * noise / (theta[g] * theta[g]);
    own_fixed_points += rho_next > common;
    EXPECT_NEAR(std::max(common, rho_next), rho[g], 1e-6 * rho[g]) << s.penalty_groups[g].name;
  }
  EXPECT_GT(own_fixed_points, 0u) << s.full_report();  // the floor is not all there is
  // Relevance: the two irrelevant inputs are penalized far more than any relevant one.
  const double relevant = std::max({rho[0], rho[1], rho[3], rho[5]});
  EXPECT_GT(std::min(rho[2], rho[4]), 100 * relevant) << s.full_report();
  EXPECT_NE(s.full_report().find("input 4"), std::string::npos);
}

TEST(Regularization, EvidenceRegularizationOfAFloatModelSolvesInFloat64) {
  // SystemPrecision::kAuto: float32 rounding of A swamps the small eigenvalues γ is made of, so a
  // float model's bayesian / ard step runs in mixed precision — bit for bit the run that asks
  // for kFloat64 explicitly, and ending where a float64 model ends (γ, θ).
  EXPECT_EQ(resolve_system_precision(SolverOptions{}, true), SystemPrecision::kModel);
  const SparseLinear data;
  const ModelSpec spec = ModelSpec::mlp(SparseLinear::kInputs, {3}, 1, Activation::kTanh);
  Dataset<float> train(SparseLinear::kSamples, SparseLinear::kInputs, 1);
  train.x = cast<float>(data.x);
  train.y = cast<float>(data.y);
  for (const Regularization r : {Regularization::kBayesian, Regularization::kArd}) {
    SCOPED_TRACE(std::string(to_string(r)));
    std::vector<std::vector<float>> params;
    std::vector<Summary> summaries;
    for (const SystemPrecision precision : {SystemPrecision::kAuto, SystemPrecision::kFloat64}) {
      SolverOptions o;
      o.regularization = r;
      o.system_precision = precision;
      o.geodesic_backoff_max = 0;  // auto differs by the model's precision; the same for both
      EXPECT_EQ(resolve_system_precision(o, true), SystemPrecision::kFloat64);
      EXPECT_EQ(resolve_system_precision(o, false), precision == SystemPrecision::kAuto
                                                        ? SystemPrecision::kModel
                                                        : SystemPrecision::kFloat64);
      std::vector<float> theta;
      summaries.push_back(fit_full_batch(spec, train, o, 15, 8, &theta));
      params.push_back(theta);
    }
    EXPECT_EQ(params[0], params[1]);
    // And the float run's γ is the one a float64 model reaches from the same start.
    Dataset<double> train64(train.samples, train.inputs, train.outputs);
    train64.x = data.x;
    train64.y = data.y;
    SolverOptions o;
    o.regularization = r;
    o.geodesic_backoff_max = 0;
    std::vector<double> theta64;
    const Summary reference = fit_full_batch(spec, train64, o, 15, 8, &theta64);
    EXPECT_NEAR(summaries[0].effective_parameters, reference.effective_parameters,
                1e-4 * reference.effective_parameters);
    EXPECT_LE(relative_error(std::vector<double>(params[0].begin(), params[0].end()), theta64),
              1e-4);
    EXPECT_NE(summaries[0].precision.find("mixed"), std::string::npos) << summaries[0].precision;
    EXPECT_NE(summaries[0].precision_reason.find(to_string(r)), std::string::npos)
        << summaries[0].precision_reason;
  }
}

TEST(Regularization, SolverCombinationsThatCannotWorkAreRefused) {
  SolverOptions o;
  o.regularization = Regularization::kBayesian;
  o.linear_solver = LinearSolverType::kCg;
  std::string error;
  EXPECT_FALSE(o.is_valid(&error));
  EXPECT_NE(error.find("SolverOptions::linear_solver = cg"), std::string::npos) << error;
  o.regularization = Regularization::kL2;
  EXPECT_TRUE(o.is_valid(&error)) << error;
  o.linear_solver = LinearSolverType::kDual;
  EXPECT_FALSE(o.is_valid(&error));
  EXPECT_NE(error.find("dual"), std::string::npos) << error;
  o.regularization = Regularization::kArd;
  o.linear_solver = LinearSolverType::kCg;
  EXPECT_FALSE(o.is_valid(&error));
  EXPECT_NE(error.find("ard"), std::string::npos) << error;
  o.regularization = Regularization::kL2;
  o.linear_solver = LinearSolverType::kAuto;
  o.weight_decay = -1;
  EXPECT_FALSE(o.is_valid(&error));
  EXPECT_NE(error.find("weight_decay"), std::string::npos) << error;
}

}  // namespace
}  // namespace lmtrain::testing
