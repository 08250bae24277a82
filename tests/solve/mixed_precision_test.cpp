// Mixed precision (float32 model and Jacobian, float64 system): A and g must be the float64
// products of the float32 Jacobian the engine builds — checked against a host reference that
// widens that J and multiplies in double — and the step solved from them must match LAPACK's
// float64 solve of the same system, at a λ where float32 normal equations lose the step.
#include <gtest/gtest.h>
#include <lapacke.h>

#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/solve/lm_step.h"
#include "support/reference.h"

namespace lmtrain::testing {
namespace {

struct Reference {
  std::vector<double> a;  // n × n, full
  std::vector<double> g;
};

// JᵀJ and Jᵀr of a (rows × n) J in double on the host.
Reference normal_equations(const std::vector<double>& j, const std::vector<double>& r,
                           std::size_t rows, std::size_t n) {
  Reference ref{std::vector<double>(n * n, 0.0), std::vector<double>(n, 0.0)};
  for (std::size_t k = 0; k < rows; ++k)
    for (std::size_t p = 0; p < n; ++p) {
      const double jp = j[k * n + p];
      ref.g[p] += jp * r[k];
      for (std::size_t q = 0; q < n; ++q) ref.a[p * n + q] += jp * j[k * n + q];
    }
  return ref;
}

// max |upper(a) − upper(b)| / max |upper(b)| (row-major upper triangles).
double upper_relative_error(const std::vector<double>& a, const std::vector<double>& b,
                            std::size_t n) {
  double diff = 0, scale = 0;
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t q = p; q < n; ++q) {
      diff = std::max(diff, std::fabs(a[p * n + q] - b[p * n + q]));
      scale = std::max(scale, std::fabs(b[p * n + q]));
    }
  return diff / scale;
}

struct MixedProblem {
  static constexpr std::size_t kBatch = 300, kIn = 3;
  Problem<float> p;
  std::unique_ptr<Backend<double>> system;
  std::vector<double> theta;

  static Problem<float> make(Rng& rng, bool cuda) {
    const auto x = random_vector(kBatch * kIn, rng), y = random_vector(kBatch * 2, rng);
    return Problem<float>(cuda ? make_cuda_backend<float>() : make_cpu_backend<float>(),
                          ModelSpec::mlp(kIn, {9, 7}, 2, Activation::kTanh), LossOptions{}, x, y,
                          kBatch);
  }
  MixedProblem(Rng&& rng, bool cuda = false) : p(make(rng, cuda)) {
    system = make_sibling_backend<double>(*p.backend);
    theta = random_vector(p.model->num_params(), rng, 0.7);
  }
  std::size_t n() const { return p.model->num_params(); }
};

// On the CPU and, when one is visible, on a CUDA device (the float64 side is then a second
// CUDA backend on the same device).
class MixedPrecisionOn : public ::testing::TestWithParam<const char*> {
 protected:
  bool cuda() const { return std::string_view(GetParam()) == "cuda"; }
  void SetUp() override {
    if (cuda() && cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

TEST_P(MixedPrecisionOn, NormalEquationsAreFloat64ProductsOfTheFloat32Jacobian) {
  MixedProblem mp(Rng(41), cuda());
  Problem<float>& p = mp.p;
  const std::size_t n = mp.n(), rows = p.rows();
  // The engine's float32 J and r, widened exactly; the reference multiplies them in double.
  // Built with the builders' slicing: a GPU BLAS may round a row differently for another M.
  const auto j = p.jacobian(mp.theta, 37);
  const auto r = p.residuals(mp.theta);
  const Reference ref = normal_equations(j, r, rows, n);

  NormalEquationsBuilder<float, double> mixed(*p.engine, *mp.system, 37, p.batch, false);
  NormalEquations<double> ne;
  PhaseTimes times;
  p.set_params(mp.theta);
  mixed.build(p.params.data(), p.x.data(), p.y.data(), p.batch, ne, times);
  std::vector<double> a(n * n), g(n);
  mp.system->copy_to_host(ne.a.data(), a.data(), n * n);
  mp.system->copy_to_host(ne.g.data(), g.data(), n);
  const double mixed_error = upper_relative_error(a, ref.a, n);
  EXPECT_LE(mixed_error, 1e-13);
  EXPECT_LE(relative_error(g, ref.g), 1e-12);

  // The float32 system of the same J is rounded at float resolution: the reference is able to
  // tell the two apart, so the bound above is not met by accident.
  NormalEquationsBuilder<float> single(*p.engine, 37, p.batch, false);
  NormalEquations<float> ne32;
  single.build(p.params.data(), p.x.data(), p.y.data(), p.batch, ne32, times);
  const double float_error = upper_relative_error(p.download(ne32.a.data(), n * n), ref.a, n);
  EXPECT_GT(float_error, 1e3 * mixed_error);
  EXPECT_LE(float_error, 1e-5);

  // The stored-J form (dual, CG) keeps the widened J itself.
  NormalEquationsBuilder<float, double> stored(*p.engine, *mp.system, 37, p.batch, true);
  NormalEquations<double> nes;
  stored.build(p.params.data(), p.x.data(), p.y.data(), p.batch, nes, times);
  std::vector<double> js(rows * n), gs(n);
  mp.system->copy_to_host(nes.j.data(), js.data(), rows * n);
  mp.system->copy_to_host(nes.g.data(), gs.data(), n);
  EXPECT_EQ(js, j);
  EXPECT_LE(relative_error(gs, ref.g), 1e-12);
}

TEST_P(MixedPrecisionOn, StepMatchesLapackFloat64SolveAtSmallLambda) {
  MixedProblem mp(Rng(42), cuda());
  Problem<float>& p = mp.p;
  const std::size_t n = mp.n(), rows = p.rows();
  const auto j = p.jacobian(mp.theta, 64);
  const auto r = p.residuals(mp.theta);
  Reference ref = normal_equations(j, r, rows, n);
  const double lambda = 1e-9;
  for (std::size_t k = 0; k < n; ++k) ref.a[k * n + k] += lambda;
  std::vector<double> expected = ref.g;
  const auto ln = static_cast<lapack_int>(n);
  ASSERT_EQ(LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', ln, 1, ref.a.data(), ln, expected.data(), 1), 0);

  NormalEquationsBuilder<float, double> mixed(*p.engine, *mp.system, 64, p.batch, false);
  NormalEquations<double> ne;
  PhaseTimes times;
  p.set_params(mp.theta);
  mixed.build(p.params.data(), p.x.data(), p.y.data(), p.batch, ne, times);
  auto solver = LinearSolver<double>::create(LinearSolverType::kCholesky, *mp.system, n, rows);
  ASSERT_TRUE(solver->prepare(ne, nullptr));
  DeviceBuffer<double> delta = mp.system->allocate(n);
  ASSERT_TRUE(solver->solve(lambda, delta.data()));
  std::vector<double> got(n);
  mp.system->copy_to_host(delta.data(), got.data(), n);
  EXPECT_LE(relative_error(got, expected), 1e-6);
}

TEST_P(MixedPrecisionOn, LmStepLowersTheLoss) {
  MixedProblem mp(Rng(43), cuda());
  Problem<float>& p = mp.p;
  SolverOptions options;
  options.system_precision = SystemPrecision::kFloat64;
  options.linear_solver = LinearSolverType::kCholesky;
  auto step = make_lm_step<float>(options, LinearSolverType::kCholesky, *p.engine, 50, p.batch);
  using MixedStep = LevenbergMarquardtStep<float, double>;
  ASSERT_NE(dynamic_cast<MixedStep*>(step.get()), nullptr);
  p.set_params(mp.theta);
  const double before = p.objective(mp.theta);
  PhaseTimes times;
  const StepReport report = step->step(p.params.data(), p.x.data(), p.y.data(), p.batch, times);
  ASSERT_TRUE(report.accepted);
  const auto after_params = p.download(p.params.data(), p.model->num_params());
  EXPECT_NEAR(report.objective_before, before, 1e-6 * before);
  EXPECT_NEAR(p.objective(after_params), report.objective_after, 1e-6 * before);
  EXPECT_LT(report.objective_after, before);
}

INSTANTIATE_TEST_SUITE_P(Devices, MixedPrecisionOn, ::testing::Values("cpu", "cuda"),
                         [](const auto& device) { return std::string(device.param); });

}  // namespace
}  // namespace lmtrain::testing
