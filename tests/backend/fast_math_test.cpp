// The vectorizable exp/expm1/tanh/sigmoid/ELU of the CPU backend — float32 against
// double-precision libm, float64 against long-double libm — on dense grids covering every branch
// (and the branch boundaries).
#include "backend/cpu/fast_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/activation_loops.h"

namespace lmtrain::cpu {
namespace {

// Error in units of the float spacing at the true value.
double ulps(double approx, double exact) {
  const auto f = static_cast<float>(exact);
  const double spacing = std::max(
      static_cast<double>(std::fabs(std::nextafter(f, std::numeric_limits<float>::infinity()) - f)),
      static_cast<double>(std::numeric_limits<float>::denorm_min()));
  return std::fabs(approx - exact) / spacing;
}

// The float tanh is a rational approximation (fast_math.h): its rounding errors reach 5.5 ulps
// (6.9 without FMA) near saturation, where a float ulp below 1 is 6e-8.  It must never pass 1
// (1 − a², tanh's derivative, would turn negative) and must be exactly odd.
TEST(FastMath, TanhWithinSevenUlpsOddAndNeverPastOne) {
  double worst = 0;
  for (double x = -12.0; x <= 12.0; x += 1.0 / 4096) {
    const auto xf = static_cast<float>(x);
    const float y = fast_tanh(xf);
    worst = std::max(worst, ulps(y, std::tanh(static_cast<double>(xf))));
    ASSERT_LE(std::fabs(y), 1.0f) << xf;
    ASSERT_EQ(fast_tanh(-xf), -y) << xf;
  }
  for (float x :
       {0.0f, -0.0f, 1e-30f, -1e-20f, 0.25f, 8.9999990f, 9.0f, 9.0000010f, 9.1f, 40.0f, -1e30f}) {
    worst = std::max(worst, ulps(fast_tanh(x), std::tanh(static_cast<double>(x))));
  }
  EXPECT_LE(worst, 7.0);
  // Near zero, where tanh x ≈ x carries a unit's input unchanged, the error is that of a few
  // roundings.
  double worst_near_zero = 0;
  for (double x = -0.5; x <= 0.5; x += 1.0 / 65536) {
    const auto xf = static_cast<float>(x);
    worst_near_zero =
        std::max(worst_near_zero, ulps(fast_tanh(xf), std::tanh(static_cast<double>(xf))));
  }
  EXPECT_LE(worst_near_zero, 3.5);
  EXPECT_TRUE(std::signbit(fast_tanh(-0.0f)));
  EXPECT_EQ(fast_tanh(1e30f), 1.0f);
  EXPECT_EQ(fast_tanh(-1e30f), -1.0f);
  EXPECT_EQ(fast_tanh(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(fast_tanh(-std::numeric_limits<float>::infinity()), -1.0f);
}

TEST(FastMath, SigmoidWithinThreeUlpsWhereItIsNotTiny) {
  double worst = 0;
  for (double x = -30.0; x <= 30.0; x += 1.0 / 2048) {
    const auto xf = static_cast<float>(x);
    const double exact = 1.0 / (1.0 + std::exp(-static_cast<double>(xf)));
    worst = std::max(worst, ulps(fast_sigmoid(xf), exact));
  }
  EXPECT_LE(worst, 3.0);
  EXPECT_EQ(fast_sigmoid(200.0f), 1.0f);
  EXPECT_GE(fast_sigmoid(-200.0f), 0.0f);
}

TEST(FastMath, Expm1AndEluWithinThreeUlpsEverywhere) {
  double worst = 0;
  for (double x = -30.0; x <= 10.0; x += 1.0 / 4096) {
    const auto xf = static_cast<float>(x);
    worst = std::max(worst, ulps(fast_expm1(xf), std::expm1(static_cast<double>(xf))));
  }
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-20f, 1e-7f, -3e-8f, 0.9999999f, -0.9999999f, 1.0f, -1.0f,
                  -87.0f, -200.0f}) {
    worst = std::max(worst, ulps(fast_expm1(x), std::expm1(static_cast<double>(x))));
  }
  EXPECT_LE(worst, 3.0);
  EXPECT_EQ(fast_expm1(-200.0f), -1.0f);
  EXPECT_EQ(fast_elu(2.5f), 2.5f);
  EXPECT_EQ(fast_elu(-0.0f), -0.0f);
}

TEST(FastMath, ExpRelativeErrorBelowTwoUlps) {
  double worst = 0;
  for (double x = -80.0; x <= 80.0; x += 1.0 / 1024) {
    const auto xf = static_cast<float>(x);
    worst = std::max(worst, ulps(fast_exp(xf), std::exp(static_cast<double>(xf))));
  }
  EXPECT_LE(worst, 2.0);
}

// Error in units of the double spacing at the true value (long double, 64-bit significand).
double ulps64(double approx, long double exact) {
  const auto d = static_cast<double>(exact);
  const double spacing =
      std::max(std::fabs(std::nextafter(d, std::numeric_limits<double>::infinity()) - d),
               std::numeric_limits<double>::denorm_min());
  return static_cast<double>(std::fabs(static_cast<long double>(approx) - exact) / spacing);
}

long double sigmoid_ld(long double x) {
  return 1.0L / (1.0L + std::exp(-x));
}

// The float64 functions on a grid of step 2⁻¹⁴ over [−30, 30] — through the reduction's
// boundaries at odd multiples of ln2/2 and tanh's and expm1's whole range — and at the edges of
// the clamps.
TEST(FastMath, Float64WithinFourUlpsEverywhere) {
  double tanh_worst = 0, expm1_worst = 0, exp_worst = 0, sigmoid_worst = 0;
  for (double x = -30.0; x <= 30.0; x += 1.0 / 16384) {
    const long double xl = x;
    tanh_worst = std::max(tanh_worst, ulps64(fast_tanh(x), std::tanh(xl)));
    expm1_worst = std::max(expm1_worst, ulps64(fast_expm1(x), std::expm1(xl)));
    exp_worst = std::max(exp_worst, ulps64(fast_exp(x), std::exp(xl)));
    sigmoid_worst = std::max(sigmoid_worst, ulps64(fast_sigmoid(x), sigmoid_ld(xl)));
  }
  for (double x :
       {0.0, -0.0, 1e-300, -1e-20, 1e-9, 0.34657359027997264, 0.3465735902799727,
        -0.34657359027997264, 19.0, 19.5, 20.0, 21.0, 700.0, 708.0, 709.0, -700.0, -708.0}) {
    const long double xl = x;
    tanh_worst = std::max(tanh_worst, ulps64(fast_tanh(x), std::tanh(xl)));
    expm1_worst = std::max(expm1_worst, ulps64(fast_expm1(x), std::expm1(xl)));
    exp_worst = std::max(exp_worst, ulps64(fast_exp(x), std::exp(xl)));
  }
  EXPECT_LE(tanh_worst, 4.0);
  EXPECT_LE(expm1_worst, 4.0);
  EXPECT_LE(exp_worst, 2.0);
  EXPECT_LE(sigmoid_worst, 4.0);
  EXPECT_EQ(fast_tanh(1e300), 1.0);
  EXPECT_EQ(fast_tanh(-1e300), -1.0);
  EXPECT_EQ(fast_expm1(-1e300), -1.0);
  EXPECT_EQ(fast_elu(2.5), 2.5);
  EXPECT_EQ(fast_elu(-0.0), -0.0);
  EXPECT_EQ(fast_sigmoid(800.0), 1.0);
}

// A NaN pre-activation stays NaN through every function, in both precisions, so a damaged
// parameter shows as a non-finite loss instead of a saturated unit.
TEST(FastMath, NanStaysNan) {
  const float nf = std::numeric_limits<float>::quiet_NaN();
  const double nd = std::numeric_limits<double>::quiet_NaN();
  for (float v : {fast_exp(nf), fast_expm1(nf), fast_tanh(nf), fast_sigmoid(nf), fast_elu(nf)})
    EXPECT_TRUE(std::isnan(v));
  for (double v : {fast_exp(nd), fast_expm1(nd), fast_tanh(nd), fast_sigmoid(nd), fast_elu(nd)})
    EXPECT_TRUE(std::isnan(v));
}

// Every build of the vectorized loops this CPU can run (baseline, AVX2, AVX-512 of the same
// source), not only the one dispatched: tanh, sigmoid and elu over the same grid, each element
// within the scalar bound, and the derivative loops from their closed forms.  A path the CPU
// lacks is skipped, saying so.
class ActivationLoops : public ::testing::TestWithParam<SimdPath> {};

TEST_P(ActivationLoops, KeepTheScalarBounds) {
  const SimdPath path = GetParam();
  if (!cpu_has(path)) GTEST_SKIP() << "this CPU cannot run the " << to_string(path) << " loops";
  auto activation_forward = [path](Activation f, std::size_t b, std::size_t e, const float* z,
                                   float* a) { cpu::activation_forward(path, f, b, e, z, a); };
  auto activation_derivative = [path](Activation f, std::size_t b, std::size_t e, const float* z,
                                      const float* a, float* d) {
    cpu::activation_derivative(path, f, b, e, z, a, d);
  };
  std::vector<float> z;
  for (double x = -12.0; x <= 12.0; x += 1.0 / 1024) z.push_back(static_cast<float>(x));
  z.push_back(1e30f);
  z.push_back(-1e30f);
  std::vector<float> a(z.size()), d(z.size());
  double worst = 0;
  activation_forward(Activation::kTanh, 0, z.size(), z.data(), a.data());
  for (std::size_t i = 0; i < z.size(); ++i) {
    worst = std::max(worst, ulps(a[i], std::tanh(static_cast<double>(z[i]))));
    ASSERT_LE(std::fabs(a[i]), 1.0f) << z[i];
  }
  EXPECT_LE(worst, 7.0);  // the scalar bound (TanhWithinSevenUlpsOddAndNeverPastOne)
  activation_derivative(Activation::kTanh, 0, z.size(), z.data(), a.data(), d.data());
  for (std::size_t i = 0; i < z.size(); ++i)  // FMA or not: within float's ε of 1 − a²
    ASSERT_NEAR(d[i], 1.0 - static_cast<double>(a[i]) * a[i], 1.2e-7) << z[i];
  worst = 0;
  activation_forward(Activation::kSigmoid, 0, z.size(), z.data(), a.data());
  for (std::size_t i = 0; i < z.size(); ++i) {
    const double exact = 1.0 / (1.0 + std::exp(-static_cast<double>(z[i])));
    if (exact > 1e-30) worst = std::max(worst, ulps(a[i], exact));
  }
  EXPECT_LE(worst, 3.0);
  worst = 0;
  activation_forward(Activation::kElu, 0, z.size(), z.data(), a.data());
  for (std::size_t i = 0; i < z.size(); ++i) {
    const double zi = static_cast<double>(z[i]);
    worst = std::max(worst, ulps(a[i], zi > 0 ? zi : std::expm1(zi)));
  }
  EXPECT_LE(worst, 3.0);
  activation_derivative(Activation::kElu, 0, z.size(), z.data(), a.data(), d.data());
  for (std::size_t i = 0; i < z.size(); ++i) ASSERT_EQ(d[i], z[i] > 0 ? 1.0f : a[i] + 1.0f) << z[i];
}

// The float64 loops of every path: tanh, sigmoid and elu within the scalar bound of their
// long-double values, their derivatives from the closed forms.
TEST_P(ActivationLoops, KeepTheFloat64Bounds) {
  const SimdPath path = GetParam();
  if (!cpu_has(path)) GTEST_SKIP() << "this CPU cannot run the " << to_string(path) << " loops";
  std::vector<double> z;
  for (double x = -25.0; x <= 25.0; x += 1.0 / 2048) z.push_back(x);
  z.push_back(1e300);
  z.push_back(-1e300);
  std::vector<double> a(z.size()), d(z.size());
  const struct {
    Activation f;
    long double (*exact)(long double);
  } cases[] = {{Activation::kTanh, [](long double x) { return std::tanh(x); }},
               {Activation::kSigmoid, sigmoid_ld},
               {Activation::kElu, [](long double x) { return x > 0 ? x : std::expm1(x); }}};
  for (const auto& c : cases) {
    cpu::activation_forward(path, c.f, 0, z.size(), z.data(), a.data());
    double worst = 0;
    for (std::size_t i = 0; i < z.size(); ++i) {
      const long double exact = c.exact(static_cast<long double>(z[i]));
      // Where σ is not tiny: the clamped exponent gives e⁻⁷⁰⁸ for σ(−10³⁰⁰), not 0.
      if (std::fabs(exact) > 1e-300L || z[i] == 0) worst = std::max(worst, ulps64(a[i], exact));
    }
    EXPECT_LE(worst, 4.0) << to_string(c.f);
  }
  cpu::activation_forward(path, Activation::kTanh, 0, z.size(), z.data(), a.data());
  cpu::activation_derivative(path, Activation::kTanh, 0, z.size(), z.data(), a.data(), d.data());
  for (std::size_t i = 0; i < z.size(); ++i)
    ASSERT_NEAR(d[i], static_cast<double>(1.0L - static_cast<long double>(a[i]) * a[i]), 2.3e-16)
        << z[i];
}

INSTANTIATE_TEST_SUITE_P(EveryPath, ActivationLoops,
                         ::testing::Values(SimdPath::kBaseline, SimdPath::kAvx2, SimdPath::kAvx512),
                         [](const auto& param_info) {
                           return std::string(to_string(param_info.param));
                         });

// The path dispatched in this process is one the CPU has: the widest, or LMTRAIN_SIMD's.
TEST(ActivationLoops, DispatchedPathIsOneTheCpuHas) {
  EXPECT_TRUE(cpu_has(simd_path()));
}

}  // namespace
}  // namespace lmtrain::cpu
