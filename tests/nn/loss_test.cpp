// Reported losses against PyTorch's definitions written out independently here, guarded square
// roots at zero residuals, and the seeded initializers against their distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "support/reference.h"

namespace lmtrain::testing {
namespace {

double softplus(double z) {
  return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z));
}

// PyTorch reduction="mean" formulas.
double torch_loss(LossKind kind, const std::vector<double>& z, const std::vector<double>& y,
                  std::size_t batch, std::size_t c, double delta) {
  double sum = 0;
  if (is_softmax_loss(kind)) {
    for (std::size_t b = 0; b < batch; ++b) {
      double lse = 0;
      for (std::size_t k = 0; k < c; ++k) lse += std::exp(z[b * c + k]);
      lse = std::log(lse);
      for (std::size_t k = 0; k < c; ++k) sum -= y[b * c + k] * (z[b * c + k] - lse);
    }
    return sum / static_cast<double>(batch);
  }
  for (std::size_t i = 0; i < z.size(); ++i) {
    const double e = z[i] - y[i];
    switch (kind) {
      case LossKind::kMse:
        sum += e * e;
        break;
      case LossKind::kBce:
        sum += softplus(z[i]) - y[i] * z[i];
        break;
      case LossKind::kHuber:
        sum += std::fabs(e) <= delta ? 0.5 * e * e : delta * (std::fabs(e) - 0.5 * delta);
        break;
      case LossKind::kL1:
        sum += std::fabs(e);
        break;
      default:
        break;
    }
  }
  return sum / static_cast<double>(z.size());
}

class ReportedLoss : public ::testing::TestWithParam<LossKind> {};

TEST_P(ReportedLoss, MatchesPyTorchDefinition) {
  const LossKind kind = GetParam();
  const std::size_t batch = 9, c = 4;
  Rng rng(17);
  std::vector<double> z = random_vector(batch * c, rng, 2.0), y(batch * c);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t k = 0; k < c; ++k) {
      if (is_softmax_loss(kind))
        y[b * c + k] = k == b % c ? 1.0 : 0.0;
      else if (kind == LossKind::kBce)
        y[b * c + k] = rng.uniform();
      else
        y[b * c + k] = 2.0 * rng.normal();
    }
  LossOptions o;
  o.kind = kind;
  o.huber_delta = 1.3;
  auto backend = make_cpu_backend<double>();
  Loss<double> loss(o, c, *backend);
  const double f = loss.objective(batch, z.data(), y.data());
  EXPECT_NEAR(loss.reported(f, batch), torch_loss(kind, z, y, batch, c, 1.3), 1e-12);
  // The objective is ½‖r‖² for losses whose residuals are their square roots.
  if (kind != LossKind::kCrossEntropy && kind != LossKind::kCrossEntropySampled) {
    const std::size_t rows = batch * loss.residuals_per_sample();
    std::vector<double> r(rows), seeds(rows * c);
    loss.linearize(batch, z.data(), y.data(), r.data(), seeds.data());
    EXPECT_NEAR(0.5 * std::inner_product(r.begin(), r.end(), r.begin(), 0.0), f, 1e-12 * f);
  }
}

INSTANTIATE_TEST_SUITE_P(AllLosses, ReportedLoss,
                         ::testing::Values(LossKind::kMse, LossKind::kCrossEntropy,
                                           LossKind::kCrossEntropySqrt, LossKind::kBce,
                                           LossKind::kHuber, LossKind::kL1,
                                           LossKind::kCrossEntropySampled),
                         [](const auto& test_param) {
                           return std::string(to_string(test_param.param));
                         });

TEST(ReportedLoss, MseOutputWeightsWeightEachColumn) {
  const std::size_t batch = 5, c = 2;
  Rng rng(4);
  const auto z = random_vector(batch * c, rng), y = random_vector(batch * c, rng);
  LossOptions o;
  o.output_weights = {3.0, 0.25};
  auto backend = make_cpu_backend<double>();
  Loss<double> loss(o, c, *backend);
  double expected = 0;
  for (std::size_t i = 0; i < z.size(); ++i)
    expected += o.output_weights[i % c] * (z[i] - y[i]) * (z[i] - y[i]);
  expected /= static_cast<double>(z.size());
  EXPECT_NEAR(loss.reported(loss.objective(batch, z.data(), y.data()), batch), expected, 1e-13);
}

// Sample weights against repeated samples (core/loss_kind.h): a batch whose samples have integer
// weights 0–3, each target row followed by its weight, gives the objective, the reported loss,
// the Gauss–Newton matrix of the outputs Σ_rows sᵀs and the gradient Σ_rows sᵀr of the unweighted
// batch in which each sample appears w times (weight 0: not at all).
class SampleWeights : public ::testing::TestWithParam<LossKind> {};

TEST_P(SampleWeights, IntegerWeightsAreRepeatedSamples) {
  const LossKind kind = GetParam();
  const std::size_t batch = 11, c = 3;
  const std::vector<std::size_t> counts = {2, 0, 1, 3, 1, 2, 0, 3, 1, 1, 2};
  Rng rng(23);
  const std::vector<double> z = random_vector(batch * c, rng, 2.0);
  std::vector<double> y(batch * c);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t k = 0; k < c; ++k)
      y[b * c + k] = is_softmax_loss(kind)    ? (k == b % c ? 1.0 : 0.0)
                     : kind == LossKind::kBce ? rng.uniform()
                                              : 2.0 * rng.normal();
  std::vector<double> weighted_rows, zr, yr;  // the weighted batch's targets; the repeated batch
  for (std::size_t b = 0; b < batch; ++b) {
    weighted_rows.insert(weighted_rows.end(), y.begin() + static_cast<std::ptrdiff_t>(b * c),
                         y.begin() + static_cast<std::ptrdiff_t>((b + 1) * c));
    weighted_rows.push_back(static_cast<double>(counts[b]));
    for (std::size_t copy = 0; copy < counts[b]; ++copy)
      for (std::size_t k = 0; k < c; ++k) {
        zr.push_back(z[b * c + k]);
        yr.push_back(y[b * c + k]);
      }
  }
  const std::size_t repeated = zr.size() / c;
  LossOptions o;
  o.kind = kind;
  o.huber_delta = 1.3;
  auto backend = make_cpu_backend<double>();
  const Loss<double> weighted(o, c, *backend, true), plain(o, c, *backend);
  ASSERT_EQ(weighted.target_columns(), c + 1);
  const std::size_t R = plain.residuals_per_sample();
  // The output-space Gauss–Newton matrix and gradient of a linearization, and its F.
  struct Sums {
    double f = 0;
    std::vector<double> gram, gradient;
  };
  auto sums = [&](const Loss<double>& loss, std::size_t n, const std::vector<double>& zs,
                  const std::vector<double>& ys) {
    std::vector<double> r(n * R), s(n * R * c);
    Sums out;
    out.f = loss.linearize(n, zs.data(), ys.data(), r.data(), s.data());
    out.gram.assign(c * c, 0.0);
    out.gradient.assign(c, 0.0);
    for (std::size_t row = 0; row < n * R; ++row)
      for (std::size_t j = 0; j < c; ++j) {
        out.gradient[j] += s[row * c + j] * r[row];
        for (std::size_t k = 0; k < c; ++k) out.gram[j * c + k] += s[row * c + j] * s[row * c + k];
      }
    return out;
  };
  const Sums w = sums(weighted, batch, z, weighted_rows), p = sums(plain, repeated, zr, yr);
  EXPECT_NEAR(w.f, p.f, 1e-13 * p.f);
  EXPECT_NEAR(weighted.objective(batch, z.data(), weighted_rows.data()), p.f, 1e-13 * p.f);
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  EXPECT_NEAR(weighted.reported_of_weight(w.f, total), plain.reported(p.f, repeated),
              1e-13 * plain.reported(p.f, repeated));
  for (std::size_t i = 0; i < c * c; ++i) EXPECT_NEAR(w.gram[i], p.gram[i], 1e-12) << i;
  for (std::size_t j = 0; j < c; ++j) EXPECT_NEAR(w.gradient[j], p.gradient[j], 1e-12) << j;
  // A weight that is not an integer scales F exactly as it scales the sample's contribution.
  std::vector<double> halved = weighted_rows;
  for (std::size_t b = 0; b < batch; ++b) halved[b * (c + 1) + c] *= 0.5;
  EXPECT_NEAR(weighted.objective(batch, z.data(), halved.data()), 0.5 * p.f, 1e-13 * p.f);
}

// The sampled cross-entropy draws by the sample's index, which repetition changes: its rows are
// checked for unbiasedness in SampledCrossEntropy below; here, its F and reported loss.
INSTANTIATE_TEST_SUITE_P(DeterministicLosses, SampleWeights,
                         ::testing::Values(LossKind::kMse, LossKind::kCrossEntropy,
                                           LossKind::kCrossEntropySqrt, LossKind::kBce,
                                           LossKind::kHuber, LossKind::kL1),
                         [](const auto& test_param) {
                           return std::string(to_string(test_param.param));
                         });

TEST(SampleWeights, SampledCrossEntropyWeighsItsObjective) {
  const std::size_t batch = 6, c = 4;
  Rng rng(5);
  const std::vector<double> z = random_vector(batch * c, rng, 2.0);
  std::vector<double> y(batch * c, 0.0), rows(batch * (c + 1), 0.0);
  const std::vector<double> weights = {0.5, 2.0, 0.0, 1.0, 3.25, 1.0};
  for (std::size_t b = 0; b < batch; ++b) {
    y[b * c + b % c] = 1.0;
    rows[b * (c + 1) + b % c] = 1.0;
    rows[b * (c + 1) + c] = weights[b];
  }
  LossOptions o;
  o.kind = LossKind::kCrossEntropySampled;
  auto backend = make_cpu_backend<double>();
  const Loss<double> weighted(o, c, *backend, true), plain(o, c, *backend);
  double expected = 0;
  for (std::size_t b = 0; b < batch; ++b)
    expected += weights[b] * plain.objective(1, z.data() + b * c, y.data() + b * c);
  std::vector<double> r(batch), s(batch * c), r0(batch), s0(batch * c);
  EXPECT_NEAR(weighted.linearize(batch, z.data(), rows.data(), r.data(), s.data(), 9), expected,
              1e-14 * expected);
  plain.linearize(batch, z.data(), y.data(), r0.data(), s0.data(), 9);
  for (std::size_t b = 0; b < batch; ++b) {  // the same draws, √w times the rows
    EXPECT_NEAR(r[b], std::sqrt(weights[b]) * r0[b], 1e-14 * std::fabs(r0[b])) << b;
    for (std::size_t j = 0; j < c; ++j)
      EXPECT_NEAR(s[b * c + j], std::sqrt(weights[b]) * s0[b * c + j], 1e-15) << b;
  }
}

// Residuals at (or next to) zero, where the square roots are guarded, against values derived by
// hand from core/loss_kind.h for 3 outputs: F, r and the seed rows ∂r/∂z.  kSqrtGuard = 1e-30
// and kProbabilityGuard = 1e-30 make 1/√guard = 1e15.
struct GuardedCase {
  const char* name;
  LossKind kind;
  std::vector<double> z, y;
  double objective;
  std::vector<double> r, seeds;  // R, R × 3
  double tolerance;              // relative to the largest expected value of each vector
};

std::vector<GuardedCase> guarded_cases() {
  const double u = std::exp(-40.0), v = std::exp(-20.0);
  const double bce = std::log1p(u), bce_r = std::sqrt(2 * bce), bce_dr = u / (1 + u) / bce_r;
  const double ce = std::log1p(2 * v), ce_r = std::sqrt(ce);
  const double p1 = v / (1 + 2 * v);  // p₁ = p₂; p₀ − 1 = −2p₁
  return {
      // ℓ = |e| = 0: r = 0, and ℓ'(0) = sign(0) = 0 makes the row 0 despite 1/√guard.
      {"l1_zero",
       LossKind::kL1,
       {0.5, -0.25, 2.0},
       {0.5, -0.25, 2.0},
       0,
       {0, 0, 0},
       {0, 0, 0, 0, 0, 0, 0, 0, 0},
       0},
      // e = ±1e-32: r = ±√(2e-32), ∂r/∂z = 1/√max(2|e|, 1e-30) = 1e15; e = 0.25: r = √0.5,
      // ∂r/∂z = 1/√0.5.
      {"l1_tiny",
       LossKind::kL1,
       {1e-32, -1e-32, 0.25},
       {0, 0, 0},
       0.25 + 2e-32,
       {std::sqrt(2e-32), -std::sqrt(2e-32), std::sqrt(0.5)},
       {1e15, 0, 0, 0, 1e15, 0, 0, 0, std::sqrt(2.0)},
       1e-14},
      // Quadratic zone (δ = 1): r = e exactly, so ∂r/∂z = 1 even at e = 0.
      {"huber_zero",
       LossKind::kHuber,
       {0.5, -0.25, 2.0},
       {0.5, -0.25, 2.0},
       0,
       {0, 0, 0},
       {1, 0, 0, 0, 1, 0, 0, 0, 1},
       0},
      // e = (0, 0.5, −3): ℓ = (0, 0.125, 2.5), r = (0, 0.5, −√5), ∂r/∂z = (1, 1, δ/√(2ℓ) = 1/√5).
      {"huber_mixed",
       LossKind::kHuber,
       {0, 0.5, -3},
       {0, 0, 0},
       2.625,
       {0, 0.5, -std::sqrt(5.0)},
       {1, 0, 0, 0, 1, 0, 0, 0, 1 / std::sqrt(5.0)},
       1e-15},
      // Confident and right at z = ±40: ℓ = log1p(e⁻⁴⁰) ≈ 4.2e-18 each, r = √(2ℓ), and
      // ℓ' = σ(z) − y = ∓e⁻⁴⁰/(1 + e⁻⁴⁰), so ∂r/∂z = ℓ'/r.
      {"bce_confident",
       LossKind::kBce,
       {40, -40, 40},
       {1, 0, 1},
       3 * bce,
       {bce_r, bce_r, bce_r},
       {-bce_dr, 0, 0, 0, bce_dr, 0, 0, 0, -bce_dr},
       1e-12},
      // At z = ±800, e⁻⁸⁰⁰ underflows: ℓ = 0 and ℓ' = 0 in double.
      {"bce_zero",
       LossKind::kBce,
       {800, -800, 800},
       {1, 0, 1},
       0,
       {0, 0, 0},
       {0, 0, 0, 0, 0, 0, 0, 0, 0},
       0},
      // p = (1, 0, 0) to double precision: CE = 0, r = √CE = 0, row (p − y)/(2√guard) = 0.
      {"ce_sqrt_zero",
       LossKind::kCrossEntropySqrt,
       {800, -800, -800},
       {1, 0, 0},
       0,
       {0},
       {0, 0, 0},
       0},
      // z = (20, 0, 0): p = (1, v, v)/(1 + 2v) with v = e⁻²⁰, CE = log1p(2v) ≈ 4e-9, F = ½CE,
      // r = √CE, row (p − y)/(2r).  p₀ − 1 ≈ −4e-9 is formed from p₀ ≈ 1, which costs
      // ε/4e-9 ≈ 5e-8 of relative accuracy.
      {"ce_sqrt_tiny",
       LossKind::kCrossEntropySqrt,
       {20, 0, 0},
       {1, 0, 0},
       0.5 * ce,
       {ce_r},
       {-2 * p1 / (2 * ce_r), p1 / (2 * ce_r), p1 / (2 * ce_r)},
       1e-6},
      // p = (1, 0, 0): r_k = (p_k − y_k)/√max(p_k, 1e-30) = 0; row k of L = √p_k (e_k − p) with
      // √p guarded: (0, 0, 0), 1e-15·(−1, 1, 0), 1e-15·(−1, 0, 1).
      {"ce_zero",
       LossKind::kCrossEntropy,
       {800, -800, -800},
       {1, 0, 0},
       0,
       {0, 0, 0},
       {0, 0, 0, -1e-15, 1e-15, 0, -1e-15, 0, 1e-15},
       1e-15},
  };
}

// |got − want| ≤ tolerance · max|want| elementwise (exact when want is all zeros).
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_LE(std::fabs(got[i] - want[i]), tolerance * scale)
        << what << "[" << i << "] = " << got[i] << ", expected " << want[i];
}

TEST(GuardedSqrt, ZeroAndTinyResidualsMatchClosedForms) {
  auto backend = make_cpu_backend<double>();
  for (const GuardedCase& g : guarded_cases()) {
    LossOptions o;
    o.kind = g.kind;
    const std::size_t c = 3;
    Loss<double> loss(o, c, *backend);
    const std::size_t rows = loss.residuals_per_sample();
    std::vector<double> r(rows), seeds(rows * c);
    const double f = loss.linearize(1, g.z.data(), g.y.data(), r.data(), seeds.data());
    EXPECT_LE(std::fabs(f - g.objective), g.tolerance * g.objective) << g.name;
    EXPECT_LE(std::fabs(loss.objective(1, g.z.data(), g.y.data()) - g.objective),
              g.tolerance * g.objective)
        << g.name;
    expect_close(r, g.r, g.tolerance, std::string(g.name) + " r");
    expect_close(seeds, g.seeds, g.tolerance, std::string(g.name) + " seeds");
  }
}

// cross_entropy_sampled against the exact cross_entropy (the second method): N copies of one
// sample draw N rows s with residuals r.  Their mean ssᵀ must approach cross_entropy's LᵀL (the
// GGN block diag(p) − ppᵀ) and their mean s·r its Lᵀr (the gradient p − y), within 6 standard
// errors estimated from the draws themselves; every s_i·r and s_i·s_j is bounded by 2, which the
// defensive mixture q = (p + y)/2 exists for.  The cases: a one-hot target the network gets
// right, one it gets confidently wrong (p of the true class 3e-4, where drawing from p alone
// gives terms of 1/p ≈ 3000), and a soft target.
TEST(SampledCrossEntropy, RowsAreUnbiasedForTheExactGaussNewtonAndGradient) {
  struct Case {
    const char* name;
    std::vector<double> z, y;
  };
  const std::vector<Case> cases = {
      {"right", {2.0, -0.5, 0.3, -1.2}, {1, 0, 0, 0}},
      {"confidently_wrong", {-4.0, 4.5, 1.0, -0.5}, {1, 0, 0, 0}},
      {"soft", {0.4, -0.8, 1.1, 0.2}, {0.1, 0.5, 0.15, 0.25}},
  };
  const std::size_t c = 4, n = 200000;
  auto backend = make_cpu_backend<double>();
  LossOptions exact_options, sampled_options;
  exact_options.kind = LossKind::kCrossEntropy;
  sampled_options.kind = LossKind::kCrossEntropySampled;
  Loss<double> exact(exact_options, c, *backend), sampled(sampled_options, c, *backend);
  ASSERT_EQ(sampled.residuals_per_sample(), 1u);
  for (const Case& t : cases) {
    SCOPED_TRACE(t.name);
    std::vector<double> lr(c), lt(c * c), ggn(c * c, 0.0), grad(c, 0.0);
    exact.linearize(1, t.z.data(), t.y.data(), lr.data(), lt.data());
    for (std::size_t k = 0; k < c; ++k)  // LᵀL and Lᵀr from the C rows of L
      for (std::size_t i = 0; i < c; ++i) {
        grad[i] += lt[k * c + i] * lr[k];
        for (std::size_t j = 0; j < c; ++j) ggn[i * c + j] += lt[k * c + i] * lt[k * c + j];
      }
    std::vector<double> z, y;
    for (std::size_t b = 0; b < n; ++b) {
      z.insert(z.end(), t.z.begin(), t.z.end());
      y.insert(y.end(), t.y.begin(), t.y.end());
    }
    std::vector<double> r(n), s(n * c);
    const double f = sampled.linearize(n, z.data(), y.data(), r.data(), s.data(), 77);
    EXPECT_NEAR(f, exact.objective(n, z.data(), y.data()), 1e-9 * f);
    std::vector<double> sum(c * c + c, 0.0), sum2(c * c + c, 0.0);
    for (std::size_t b = 0; b < n; ++b) {
      const double* sb = s.data() + b * c;
      for (std::size_t i = 0; i < c; ++i) {
        const double sr = sb[i] * r[b];
        ASSERT_LE(std::fabs(sr), 2.0 + 1e-12) << "sample " << b;
        sum[c * c + i] += sr;
        sum2[c * c + i] += sr * sr;
        for (std::size_t j = 0; j < c; ++j) {
          const double ss = sb[i] * sb[j];
          ASSERT_LE(std::fabs(ss), 2.0 + 1e-12) << "sample " << b;
          sum[i * c + j] += ss;
          sum2[i * c + j] += ss * ss;
        }
      }
    }
    const double count = static_cast<double>(n);
    for (std::size_t e = 0; e < c * c + c; ++e) {
      const double mean = sum[e] / count;
      const double se = std::sqrt(std::max(sum2[e] / count - mean * mean, 0.0) / count);
      const double want = e < c * c ? ggn[e] : grad[e - c * c];
      EXPECT_LE(std::fabs(mean - want), 6 * se + 1e-12)
          << (e < c * c ? "GGN entry " : "gradient entry ") << (e < c * c ? e : e - c * c)
          << ": mean " << mean << ", exact " << want << ", standard error " << se;
    }
  }
}

// The draws are a function of the key and the sample's index: the same key gives the same rows,
// another key other rows, and over many draws each class comes up with probability (p + y)/2.
TEST(SampledCrossEntropy, DrawsRepeatPerKeyAndFollowTheMixture) {
  const std::size_t c = 3, n = 60000;
  const std::vector<double> z1 = {0.5, -1.0, 1.5}, y1 = {0, 1, 0};
  std::vector<double> z, y;
  for (std::size_t b = 0; b < n; ++b) {
    z.insert(z.end(), z1.begin(), z1.end());
    y.insert(y.end(), y1.begin(), y1.end());
  }
  LossOptions o;
  o.kind = LossKind::kCrossEntropySampled;
  auto backend = make_cpu_backend<double>();
  Loss<double> loss(o, c, *backend);
  std::vector<double> r1(n), s1(n * c), r2(n), s2(n * c), r3(n), s3(n * c);
  loss.linearize(n, z.data(), y.data(), r1.data(), s1.data(), 5);
  loss.linearize(n, z.data(), y.data(), r2.data(), s2.data(), 5);
  loss.linearize(n, z.data(), y.data(), r3.data(), s3.data(), 6);
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(s1, s2);
  std::size_t differ = 0;
  for (std::size_t b = 0; b < n; ++b) differ += r1[b] != r3[b];
  EXPECT_GT(differ, n / 4) << "key 6 drew the same classes as key 5";
  // The drawn class is the row's one positive entry, w(1 − p_k).
  double zmax = 1.5, norm = 0;
  for (double v : z1) norm += std::exp(v - zmax);
  std::vector<std::size_t> counts(c, 0);
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t k = 0; k < c; ++k) counts[k] += s1[b * c + k] > 0;
  for (std::size_t k = 0; k < c; ++k) {
    const double q = 0.5 * (std::exp(z1[k] - zmax) / norm + y1[k]);
    const double sd = std::sqrt(q * (1 - q) / static_cast<double>(n));
    EXPECT_NEAR(static_cast<double>(counts[k]) / static_cast<double>(n), q, 6 * sd)
        << "class " << k;
  }
}

TEST(LossOptions, InvalidSettingsNameTheField) {
  LossOptions o;
  o.output_weights = {1.0, -2.0};
  try {
    o.validate(2);
    FAIL() << "negative weight accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("output_weights[1] = -2"), std::string::npos) << e.what();
  }
  LossOptions ce;
  ce.kind = LossKind::kCrossEntropy;
  EXPECT_THROW(ce.validate(1), InvalidArgument);
}

// Initializers against their distributions on a 400 × 300 layer (120 000 draws).
TEST(Initialization, MatchesTheDocumentedDistributions) {
  const std::size_t in = 300, out = 400;
  const ModelSpec spec = ModelSpec(in).dense(out);
  auto backend = make_cpu_backend<double>();
  Sequential<double> model(spec, *backend);
  auto moments = [&](Init init, double* max_abs_w, double* var_w, double* max_abs_b) {
    const auto p = model.initial_parameters(init, 123);
    double s2 = 0, m = 0, mb = 0;
    for (std::size_t i = 0; i < in * out; ++i) {
      s2 += p[i] * p[i];
      m = std::max(m, std::fabs(p[i]));
    }
    for (std::size_t i = in * out; i < p.size(); ++i) mb = std::max(mb, std::fabs(p[i]));
    *max_abs_w = m;
    *var_w = s2 / static_cast<double>(in * out);
    *max_abs_b = mb;
  };
  double m = 0, v = 0, mb = 0;
  moments(Init::kTorch, &m, &v, &mb);
  const double tb = 1 / std::sqrt(300.0);
  EXPECT_LE(m, tb);
  EXPECT_LE(mb, tb);
  EXPECT_GT(mb, 0.5 * tb);
  EXPECT_NEAR(v, tb * tb / 3, 0.02 * tb * tb / 3);
  moments(Init::kGlorot, &m, &v, &mb);
  const double gb = std::sqrt(6.0 / 700.0);
  EXPECT_LE(m, gb);
  EXPECT_EQ(mb, 0.0);
  EXPECT_NEAR(v, gb * gb / 3, 0.02 * gb * gb / 3);
  moments(Init::kHe, &m, &v, &mb);
  EXPECT_NEAR(v, 2.0 / 300.0, 0.02 * 2.0 / 300.0);
  EXPECT_EQ(mb, 0.0);
  // Same seed, same parameters; another seed, others.
  EXPECT_EQ(model.initial_parameters(Init::kTorch, 5), model.initial_parameters(Init::kTorch, 5));
  EXPECT_NE(model.initial_parameters(Init::kTorch, 5), model.initial_parameters(Init::kTorch, 6));
}

TEST(ModelSpec, CountsParametersLayerByLayer) {
  const auto spec = ModelSpec::mlp(3, {7, 5}, 2, Activation::kTanh);
  EXPECT_EQ(spec.num_params(), (3 * 7 + 7) + (7 * 5 + 5) + (5 * 2 + 2));
  EXPECT_EQ(spec.outputs(), 2u);
  EXPECT_EQ(spec.describe(), "3-7-5-2 tanh,tanh (80 parameters)");
  EXPECT_THROW(ModelSpec(3).activation(Activation::kTanh).validate(), InvalidArgument);
  EXPECT_THROW(ModelSpec(0).dense(2).validate(), InvalidArgument);
}

TEST(ModelSpec, RelevanceGroupsFollowThePyTorchParameterLayout) {
  // 3-4-2: W1 (4 × 3, out-major) then b1, W2 (2 × 4) then b2.  Input i's weights are W1[o][i].
  const auto mlp = ModelSpec::mlp(3, {4}, 2, Activation::kTanh);
  const ParameterGroups g = mlp.relevance_groups();
  ASSERT_EQ(g.group_of.size(), mlp.num_params());
  const std::vector<std::string> names = {"input 0",
                                          "input 1",
                                          "input 2",
                                          "layer 0 (dense) bias",
                                          "layer 2 (dense) weights",
                                          "layer 2 (dense) bias"};
  EXPECT_EQ(g.names, names);
  EXPECT_EQ(g.sizes, (std::vector<std::size_t>{4, 4, 4, 4, 8, 2}));
  EXPECT_EQ(g.input_groups, 3u);
  for (std::size_t o = 0; o < 4; ++o)
    for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(g.group_of[o * 3 + i], i) << o << "," << i;
  for (std::size_t k = 12; k < 16; ++k) EXPECT_EQ(g.group_of[k], 3u);
  for (std::size_t k = 16; k < 24; ++k) EXPECT_EQ(g.group_of[k], 4u);
  for (std::size_t k = 24; k < 26; ++k) EXPECT_EQ(g.group_of[k], 5u);

  // conv2d first: W (3 × 2 × 2 × 2) groups by input channel; no conv bias; dense after flatten.
  const auto cnn = ModelSpec(ImageShape{2, 4, 4})
                       .conv2d(3, 2, 2, 0, /*bias=*/false)
                       .activation(Activation::kTanh)
                       .flatten()
                       .dense(1);
  const ParameterGroups c = cnn.relevance_groups();
  ASSERT_EQ(c.group_of.size(), cnn.num_params());
  EXPECT_EQ(c.names, (std::vector<std::string>{"input 0", "input 1", "layer 3 (dense) weights",
                                               "layer 3 (dense) bias"}));
  EXPECT_EQ(c.input_groups, 2u);
  for (std::size_t o = 0; o < 3; ++o)
    for (std::size_t ch = 0; ch < 2; ++ch)
      for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(c.group_of[(o * 2 + ch) * 4 + k], ch);
  std::vector<std::size_t> counted(c.count(), 0);
  for (const auto id : c.group_of) ++counted.at(id);
  EXPECT_EQ(counted, c.sizes);
  EXPECT_THROW(ModelSpec(3).activation(Activation::kTanh).relevance_groups(), InvalidArgument);
}

}  // namespace
}  // namespace lmtrain::testing
