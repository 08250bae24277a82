// The structural Jacobian against central finite differences in double precision, for every
// activation and every loss, at random points; and the float path against the double path.
#include <gtest/gtest.h>

#include "support/reference.h"

namespace lmtrain::testing {
namespace {

constexpr std::size_t kBatch = 7;

ModelSpec two_hidden(std::size_t inputs, Activation f, std::size_t outputs) {
  return ModelSpec(inputs).dense(6).activation(f).dense(5).activation(f).dense(outputs);
}

struct Case {
  ModelSpec spec;
  LossOptions loss;
  std::vector<double> x, y, theta;
};

Case make_case(const ModelSpec& spec, LossOptions loss, std::uint64_t seed) {
  Rng rng(seed);
  Case c{spec, std::move(loss), {}, {}, {}};
  c.x = random_vector(kBatch * spec.inputs(), rng);
  const std::size_t outputs = spec.outputs();
  switch (c.loss.kind) {
    case LossKind::kBce:
      c.y.resize(kBatch * outputs);
      for (auto& v : c.y) v = rng.uniform();
      break;
    case LossKind::kCrossEntropy:
    case LossKind::kCrossEntropySqrt:
    case LossKind::kCrossEntropySampled: {
      // Soft targets (probability vectors) exercise every term of the residual.
      c.y.resize(kBatch * outputs);
      for (std::size_t b = 0; b < kBatch; ++b) {
        double sum = 0;
        for (std::size_t k = 0; k < outputs; ++k)
          sum += (c.y[b * outputs + k] = rng.uniform() + 0.1);
        for (std::size_t k = 0; k < outputs; ++k) c.y[b * outputs + k] /= sum;
      }
      break;
    }
    default:
      c.y = random_vector(kBatch * outputs, rng, 2.0);  // Huber: both zones
  }
  Sequential<double> probe(spec, *make_cpu_backend<double>());
  c.theta = random_vector(probe.num_params(), rng, 0.7);
  return c;
}

void expect_jacobian_matches_differences(const Case& c) {
  Problem<double> p(c.spec, c.loss, c.x, c.y, kBatch);
  const auto fd = central_differences([&](const auto& t) { return p.residuals(t); }, c.theta);
  const auto j = p.jacobian(c.theta);
  EXPECT_LE(relative_error(j, fd), 1e-6) << c.spec.describe() << " loss " << to_string(c.loss.kind);
}

class ActivationJacobian : public ::testing::TestWithParam<Activation> {};

TEST_P(ActivationJacobian, MatchesCentralDifferencesInDouble) {
  expect_jacobian_matches_differences(
      make_case(two_hidden(3, GetParam(), 2), LossOptions{}, 11 + static_cast<int>(GetParam())));
}

TEST_P(ActivationJacobian, FloatAgreesWithDoubleWithinFloatRounding) {
  const Case c = make_case(two_hidden(3, GetParam(), 2), LossOptions{}, 29);
  Problem<double> pd(c.spec, c.loss, c.x, c.y, kBatch);
  Problem<float> pf(c.spec, c.loss, c.x, c.y, kBatch);
  EXPECT_LE(relative_error(pf.jacobian(c.theta), pd.jacobian(c.theta)), 1e-5);
  EXPECT_LE(relative_error(pf.residuals(c.theta), pd.residuals(c.theta)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(AllActivations, ActivationJacobian,
                         ::testing::Values(Activation::kIdentity, Activation::kTanh,
                                           Activation::kSigmoid, Activation::kRelu,
                                           Activation::kElu, Activation::kGelu,
                                           Activation::kSoftplus, Activation::kSin),
                         [](const auto& test_param) {
                           return std::string(to_string(test_param.param));
                         });

class LossJacobian : public ::testing::TestWithParam<LossKind> {};

LossOptions options_for(LossKind kind) {
  LossOptions o;
  o.kind = kind;
  if (kind == LossKind::kMse) o.output_weights = {0.5, 2.0, 1.5};
  if (kind == LossKind::kHuber) o.huber_delta = 0.8;
  return o;
}

// Losses whose residuals are differentiable functions of θ: J = ∂r/∂θ exactly.
TEST_P(LossJacobian, MatchesCentralDifferencesInDouble) {
  expect_jacobian_matches_differences(
      make_case(two_hidden(4, Activation::kTanh, 3), options_for(GetParam()), 5));
}

TEST_P(LossJacobian, FloatAgreesWithDoubleWithinFloatRounding) {
  const Case c = make_case(two_hidden(4, Activation::kTanh, 3), options_for(GetParam()), 6);
  Problem<double> pd(c.spec, c.loss, c.x, c.y, kBatch);
  Problem<float> pf(c.spec, c.loss, c.x, c.y, kBatch);
  EXPECT_LE(relative_error(pf.jacobian(c.theta), pd.jacobian(c.theta)), 1e-5);
  EXPECT_LE(relative_error(pf.residuals(c.theta), pd.residuals(c.theta)), 1e-5);
}

// Jᵀr is the gradient of the objective F for every loss, including the exact cross-entropy
// whose residual rows are a GGN factor rather than a derivative.
TEST_P(LossJacobian, GradientJtrMatchesDifferencesOfObjective) {
  const Case c = make_case(two_hidden(4, Activation::kTanh, 3), options_for(GetParam()), 8);
  Problem<double> p(c.spec, c.loss, c.x, c.y, kBatch);
  const auto fd = central_differences(
      [&](const auto& t) { return std::vector<double>{p.objective(t)}; }, c.theta);
  const auto j = p.jacobian(c.theta);
  const auto r = p.residuals(c.theta);
  const std::size_t n = c.theta.size();
  std::vector<double> g(n, 0.0);
  for (std::size_t i = 0; i < r.size(); ++i)
    for (std::size_t k = 0; k < n; ++k) g[k] += j[i * n + k] * r[i];
  EXPECT_LE(relative_error(g, fd), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(DifferentiableResiduals, LossJacobian,
                         ::testing::Values(LossKind::kMse, LossKind::kCrossEntropySqrt,
                                           LossKind::kBce, LossKind::kHuber, LossKind::kL1),
                         [](const auto& test_param) {
                           return std::string(to_string(test_param.param));
                         });

class ExactCrossEntropy : public ::testing::Test {};

// The exact cross-entropy: JᵀJ equals the generalized Gauss–Newton matrix
// Σ_b J_zᵀ (diag(p) − ppᵀ) J_z with J_z = ∂z/∂θ by finite differences and p computed here.
TEST_F(ExactCrossEntropy, JtJIsTheGeneralizedGaussNewtonMatrix) {
  LossOptions ce;
  ce.kind = LossKind::kCrossEntropy;
  const Case c = make_case(two_hidden(4, Activation::kTanh, 3), ce, 9);
  Problem<double> p(c.spec, c.loss, c.x, c.y, kBatch);
  const std::size_t n = c.theta.size(), C = 3;
  const auto jz = central_differences([&](const auto& t) { return p.outputs(t); }, c.theta);
  const auto z = p.outputs(c.theta);
  std::vector<double> ggn(n * n, 0.0);
  for (std::size_t b = 0; b < kBatch; ++b) {
    double zmax = *std::max_element(z.begin() + b * C, z.begin() + (b + 1) * C), sum = 0;
    std::vector<double> prob(C);
    for (std::size_t k = 0; k < C; ++k) sum += prob[k] = std::exp(z[b * C + k] - zmax);
    for (auto& v : prob) v /= sum;
    for (std::size_t k = 0; k < C; ++k)
      for (std::size_t l = 0; l < C; ++l) {
        const double h = (k == l ? prob[k] : 0.0) - prob[k] * prob[l];
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t jj = 0; jj < n; ++jj)
            ggn[i * n + jj] += jz[(b * C + k) * n + i] * h * jz[(b * C + l) * n + jj];
      }
  }
  const auto j = p.jacobian(c.theta);
  std::vector<double> jtj(n * n, 0.0);
  for (std::size_t r = 0; r < kBatch * C; ++r)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t jj = 0; jj < n; ++jj) jtj[i * n + jj] += j[r * n + i] * j[r * n + jj];
  EXPECT_LE(relative_error(jtj, ggn), 1e-6);
}

TEST_F(ExactCrossEntropy, GradientMatchesDifferencesWithOneHotTargets) {
  LossOptions ce;
  ce.kind = LossKind::kCrossEntropy;
  Case c = make_case(two_hidden(4, Activation::kSigmoid, 4), ce, 10);
  for (std::size_t b = 0; b < kBatch; ++b)
    for (std::size_t k = 0; k < 4; ++k) c.y[b * 4 + k] = (k == (b * 3) % 4) ? 1.0 : 0.0;
  Problem<double> p(c.spec, c.loss, c.x, c.y, kBatch);
  const auto fd = central_differences(
      [&](const auto& t) { return std::vector<double>{p.objective(t)}; }, c.theta);
  const auto j = p.jacobian(c.theta);
  const auto r = p.residuals(c.theta);
  std::vector<double> g(c.theta.size(), 0.0);
  for (std::size_t i = 0; i < r.size(); ++i)
    for (std::size_t k = 0; k < g.size(); ++k) g[k] += j[i * g.size() + k] * r[i];
  EXPECT_LE(relative_error(g, fd), 1e-6);
}

// cross_entropy_sampled through the network: each sample's row of J and its residual must be
// w(e_k − p)ᵀ·∂z/∂θ and (p_k − y_k)/√(p_k q_k) for exactly one class k, with ∂z/∂θ by central
// differences and p, q = (p + y)/2, w = √(p_k/q_k) computed here.  residuals_at at the same θ
// must give the same residuals (the geodesic correction differentiates them along δ), and the
// next linearization must draw again.
TEST(SampledCrossEntropy, EngineRowsAreOneSampledClassThroughTheNetwork) {
  LossOptions o;
  o.kind = LossKind::kCrossEntropySampled;
  const std::size_t C = 4;
  const Case c = make_case(two_hidden(5, Activation::kTanh, C), o, 21);
  Problem<double> p(c.spec, c.loss, c.x, c.y, kBatch);
  const std::size_t n = c.theta.size();
  const auto jz = central_differences([&](const auto& t) { return p.outputs(t); }, c.theta);
  const auto z = p.outputs(c.theta);
  const auto j = p.jacobian(c.theta);
  const auto r = p.download(p.engine->residuals(), kBatch);
  for (std::size_t b = 0; b < kBatch; ++b) {
    double zmax = *std::max_element(z.begin() + b * C, z.begin() + (b + 1) * C), sum = 0;
    std::vector<double> prob(C);
    for (std::size_t k = 0; k < C; ++k) sum += prob[k] = std::exp(z[b * C + k] - zmax);
    for (auto& v : prob) v /= sum;
    std::size_t matches = 0;
    for (std::size_t k = 0; k < C; ++k) {
      const double yk = c.y[b * C + k], q = 0.5 * (prob[k] + yk), w = std::sqrt(prob[k] / q);
      std::vector<double> row(n, 0.0);
      for (std::size_t l = 0; l < C; ++l)
        for (std::size_t i = 0; i < n; ++i)
          row[i] += w * ((l == k ? 1.0 : 0.0) - prob[l]) * jz[(b * C + l) * n + i];
      const std::vector<double> got(j.begin() + b * n, j.begin() + (b + 1) * n);
      const double residual = (prob[k] - yk) / std::sqrt(prob[k] * q);
      matches += relative_error(got, row) < 1e-6 && std::fabs(r[b] - residual) < 1e-9;
    }
    EXPECT_EQ(matches, 1u) << "sample " << b;
  }
  DeviceBuffer<double> buffer = p.backend->allocate(kBatch);
  p.engine->residuals_at(p.params.data(), buffer.data());
  EXPECT_EQ(p.download(buffer.data(), kBatch), r);
  p.engine->linearize(p.params.data(), p.x.data(), p.y.data(), kBatch);
  EXPECT_NE(p.download(p.engine->residuals(), kBatch), r);
}

// What the LM step asks of the engine's source without reading: F of the linearization and of a
// trial left on the device with the bits the reading calls return, and the residuals at another
// point (the geodesic correction's) read nowhere — against the residuals of a linearization
// there.
TEST(EngineSourceReads, ObjectivesStayOnTheDeviceAndResidualsAtReadNothing) {
  const Case c = make_case(two_hidden(3, Activation::kTanh, 2), LossOptions{}, 17);
  Problem<double> p(c.spec, c.loss, c.x, c.y, kBatch);
  Rng rng(4);
  const std::vector<double> other = random_vector(c.theta.size(), rng);
  DeviceBuffer<double> f = p.backend->allocate(2), trial = p.upload(other);
  DeviceBuffer<double> r = p.backend->allocate(p.rows());
  p.set_params(c.theta);
  const std::uint64_t before = p.backend->host_reads();
  EXPECT_FALSE(p.source->linearize_into(p.params.data(), p.x.data(), p.y.data(), kBatch, f.data()));
  EXPECT_FALSE(p.source->objective_into(trial.data(), f.data() + 1));
  p.source->residuals_at(trial.data(), r.data());
  EXPECT_EQ(p.backend->host_reads(), before);
  const std::vector<double> got = p.download(f.data(), 2),
                            at_other = p.download(r.data(), p.rows());
  EXPECT_EQ(got[1], p.source->objective(trial.data()));
  EXPECT_EQ(at_other, p.residuals(other));
  EXPECT_EQ(got[0], p.objective(c.theta));
}

TEST(JacobianSlices, SlicedRowsEqualOneSlice) {
  const Case c = make_case(two_hidden(3, Activation::kGelu, 2), LossOptions{}, 12);
  Problem<double> p(c.spec, c.loss, c.x, c.y, kBatch);
  const auto whole = p.jacobian(c.theta);
  for (std::size_t slice : {1u, 2u, 3u, 5u})
    EXPECT_LE(relative_error(p.jacobian(c.theta, slice), whole), 1e-15) << "slice " << slice;
}

TEST(JacobianShapes, NoHiddenLayerIsTheLinearDesignMatrix) {
  // J of z = Wx + b with mse is [x ⊗ e_o, e_o]: checked entry by entry against the inputs.
  Rng rng(3);
  const auto x = random_vector(kBatch * 4, rng), y = random_vector(kBatch * 2, rng);
  Problem<double> p(ModelSpec(4).dense(2), LossOptions{}, x, y, kBatch);
  const auto theta = random_vector(10, rng);
  const auto j = p.jacobian(theta);
  for (std::size_t b = 0; b < kBatch; ++b)
    for (std::size_t o = 0; o < 2; ++o)
      for (std::size_t k = 0; k < 10; ++k) {
        double expected = 0;
        if (k < 8 && k / 4 == o) expected = x[b * 4 + k % 4];
        if (k >= 8 && k - 8 == o) expected = 1;
        EXPECT_EQ(j[(b * 2 + o) * 10 + k], expected);
      }
}

}  // namespace
}  // namespace lmtrain::testing
