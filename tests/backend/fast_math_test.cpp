// The vectorizable float32 exp/tanh/sigmoid of the CPU backend against double-precision libm,
// on a dense grid covering every branch (and the branch boundaries).
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

TEST(FastMath, TanhWithinThreeUlpsEverywhere) {
  double worst = 0;
  for (double x = -12.0; x <= 12.0; x += 1.0 / 4096) {
    const auto xf = static_cast<float>(x);
    worst = std::max(worst, ulps(fast_tanh(xf), std::tanh(static_cast<double>(xf))));
  }
  for (float x :
       {0.0f, -0.0f, 1e-30f, -1e-20f, 0.25f, 0.2499999f, 0.2500001f, 9.0f, 40.0f, -1e30f}) {
    worst = std::max(worst, ulps(fast_tanh(x), std::tanh(static_cast<double>(x))));
  }
  EXPECT_LE(worst, 3.0);
  EXPECT_EQ(fast_tanh(1e30f), 1.0f);
  EXPECT_EQ(fast_tanh(-1e30f), -1.0f);
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
  for (std::size_t i = 0; i < z.size(); ++i)
    worst = std::max(worst, ulps(a[i], std::tanh(static_cast<double>(z[i]))));
  EXPECT_LE(worst, 3.0);
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
