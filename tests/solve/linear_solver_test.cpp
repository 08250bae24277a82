// Linear solvers of the LM step against independent references: LAPACK least squares for one
// Gauss–Newton step, the primal against the dual form, eigen against Cholesky, and sliced
// against one-slice accumulation.
#include <gtest/gtest.h>
#include <lapacke.h>

#include "lmtrain/solve/lm_step.h"
#include "support/reference.h"

namespace lmtrain::testing {
namespace {

// Builds the normal equations of `p` at θ with the given slice and form.
template <typename T>
void build(Problem<T>& p, const std::vector<double>& theta, std::size_t slice, bool dual,
           NormalEquations<T>& ne) {
  NormalEquationsBuilder<T> builder(*p.source, slice, p.batch, dual);
  PhaseTimes times;
  p.set_params(theta);
  builder.build(p.params.data(), p.x.data(), p.y.data(), p.batch, ne, times);
}

template <typename T>
std::vector<double> solve(Problem<T>& p, LinearSolverType type, const NormalEquations<T>& ne,
                          double lambda, const T* d = nullptr) {
  auto solver = LinearSolver<T>::create(type, *p.backend, ne.n, ne.m);
  EXPECT_TRUE(solver->prepare(ne, d));
  DeviceBuffer<T> delta = p.backend->allocate(ne.n);
  EXPECT_TRUE(solver->solve(lambda, delta.data()));
  return p.download(delta.data(), ne.n);
}

TEST(GaussNewton, NoHiddenLayerMseIsSolvedInOneStepToLapackLeastSquares) {
  const std::size_t batch = 40, in = 5, out = 2, n = out * in + out;
  Rng rng(21);
  const auto x = random_vector(batch * in, rng), y = random_vector(batch * out, rng, 3.0);
  Problem<double> p(ModelSpec(in).dense(out), LossOptions{}, x, y, batch);
  const auto theta0 = random_vector(n, rng);

  // Reference: min ‖[X 1] B − Y‖ by LAPACK's QR least squares (dgels).
  std::vector<double> design(batch * (in + 1)), rhs(y);
  for (std::size_t b = 0; b < batch; ++b) {
    for (std::size_t i = 0; i < in; ++i) design[b * (in + 1) + i] = x[b * in + i];
    design[b * (in + 1) + in] = 1.0;
  }
  ASSERT_EQ(LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', batch, in + 1, out, design.data(), in + 1,
                          rhs.data(), out),
            0);
  std::vector<double> expected(n);
  for (std::size_t o = 0; o < out; ++o) {
    for (std::size_t i = 0; i < in; ++i) expected[o * in + i] = rhs[i * out + o];
    expected[out * in + o] = rhs[in * out + o];
  }

  NormalEquations<double> ne;
  build(p, theta0, batch, false, ne);
  const auto delta = solve(p, LinearSolverType::kCholesky, ne, 0.0);
  std::vector<double> theta1(n);
  for (std::size_t k = 0; k < n; ++k) theta1[k] = theta0[k] - delta[k];
  EXPECT_LE(relative_error(theta1, expected), 1e-10);

  // The same through a whole LM step with a negligible λ.
  SolverOptions o;
  o.lambda_min = 1e-14;
  o.lambda_initial = 1e-14;
  LevenbergMarquardtStep<double> step(o, LinearSolverType::kCholesky, *p.source, batch, batch);
  p.set_params(theta0);
  PhaseTimes times;
  const StepReport report = step.step(p.params.data(), p.x.data(), p.y.data(), batch, times);
  EXPECT_TRUE(report.accepted);
  EXPECT_LE(relative_error(p.download(p.params.data(), n), expected), 1e-10);
  // Linear model: the Gauss–Newton model is exact, so the gain ratio is 1.
  EXPECT_NEAR(report.gain_ratio, 1.0, 1e-8);
}

struct Sizes {
  std::size_t batch, hidden;
};

class PrimalDual : public ::testing::TestWithParam<Sizes> {};

TEST_P(PrimalDual, GiveTheSameStep) {
  const auto [batch, hidden] = GetParam();
  Rng rng(batch * 7 + hidden);
  const auto spec = ModelSpec::mlp(2, {hidden}, 2, Activation::kTanh);
  const auto x = random_vector(batch * 2, rng), y = random_vector(batch * 2, rng);
  Problem<double> p(spec, LossOptions{}, x, y, batch);
  const auto theta = random_vector(spec.num_params(), rng, 0.5);
  NormalEquations<double> primal, dual;
  build(p, theta, batch, false, primal);
  build(p, theta, 3, true, dual);
  for (double lambda : {1e-3, 0.7, 50.0}) {
    const auto a = solve(p, LinearSolverType::kCholesky, primal, lambda);
    const auto b = solve(p, LinearSolverType::kDual, dual, lambda);
    EXPECT_LE(relative_error(b, a), 1e-9)
        << "λ = " << lambda << " m = " << primal.m << " n = " << primal.n;
  }
}

// m < n (the dual's regime) and m > n.
INSTANTIATE_TEST_SUITE_P(Shapes, PrimalDual, ::testing::Values(Sizes{6, 8}, Sizes{40, 3}));

TEST(NormalEquations, SlicedAccumulationEqualsOneSlice) {
  Rng rng(5);
  const std::size_t batch = 23;
  const auto spec = ModelSpec::mlp(3, {6, 4}, 2, Activation::kSigmoid);
  const auto x = random_vector(batch * 3, rng), y = random_vector(batch * 2, rng);
  Problem<double> p(spec, LossOptions{}, x, y, batch);
  const auto theta = random_vector(spec.num_params(), rng, 0.5);
  NormalEquations<double> whole;
  build(p, theta, batch, false, whole);
  const std::size_t n = whole.n;
  const auto a_whole = p.download(whole.a.data(), n * n);
  const auto g_whole = p.download(whole.g.data(), n);
  // Reference A, g from the explicit Jacobian (upper triangle).
  const auto j = p.jacobian(theta);
  const auto r = p.residuals(theta);
  std::vector<double> a_ref(n * n, 0.0), g_ref(n, 0.0);
  for (std::size_t row = 0; row < whole.m; ++row)
    for (std::size_t i = 0; i < n; ++i) {
      g_ref[i] += j[row * n + i] * r[row];
      for (std::size_t k = i; k < n; ++k) a_ref[i * n + k] += j[row * n + i] * j[row * n + k];
    }
  auto upper = [n](std::vector<double> m) {
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < i; ++k) m[i * n + k] = 0;
    return m;
  };
  EXPECT_LE(relative_error(upper(a_whole), a_ref), 1e-13);
  EXPECT_LE(relative_error(g_whole, g_ref), 1e-13);
  for (std::size_t slice : {1u, 4u, 7u}) {
    NormalEquations<double> sliced;
    build(p, theta, slice, false, sliced);
    EXPECT_LE(relative_error(upper(p.download(sliced.a.data(), n * n)), upper(a_whole)), 1e-13);
    EXPECT_LE(relative_error(p.download(sliced.g.data(), n), g_whole), 1e-13);
  }
}

// A float model of n = 62 parameters: the CPU pads each slice row to 64 columns for SYRK
// (CpuBackend::slice_preference) and sums A in a 64 × 64 buffer.  A, g and Jᵀu, in one slice and
// in several, against products of the float64 engine's Jacobian, residuals and u in double.
TEST(NormalEquations, FloatSlicesPaddedForSyrkEqualTheFloat64Products) {
  Rng rng(15);
  const std::size_t batch = 23;
  const auto spec = ModelSpec::mlp(3, {6, 4}, 2, Activation::kTanh);
  const std::size_t n = spec.num_params();
  ASSERT_EQ(n, 62u);
  ASSERT_EQ(make_cpu_backend<float>()->slice_preference(n).leading_dimension, 64u);
  const auto x = random_vector(batch * 3, rng), y = random_vector(batch * 2, rng);
  Problem<float> pf(spec, LossOptions{}, x, y, batch);
  Problem<double> pd(spec, LossOptions{}, x, y, batch);
  const auto theta = random_vector(n, rng, 0.5);
  const auto j = pd.jacobian(theta);
  const auto r = pd.residuals(theta);
  const std::size_t m = pd.rows();
  const auto u = random_vector(m, rng);
  std::vector<double> a_ref(n * n, 0.0), g_ref(n, 0.0), ju_ref(n, 0.0);
  for (std::size_t row = 0; row < m; ++row)
    for (std::size_t i = 0; i < n; ++i) {
      g_ref[i] += j[row * n + i] * r[row];
      ju_ref[i] += j[row * n + i] * u[row];
      for (std::size_t k = i; k < n; ++k) a_ref[i * n + k] += j[row * n + i] * j[row * n + k];
    }
  const std::vector<float> u_float(u.begin(), u.end());
  DeviceBuffer<float> u_dev = pf.backend->allocate(m), ju = pf.backend->allocate(n);
  pf.backend->copy_from_host(u_float.data(), u_dev.data(), m);
  for (const std::size_t slice : {batch, std::size_t{7}}) {
    NormalEquationsBuilder<float> builder(*pf.source, slice, batch, false);
    NormalEquations<float> ne;
    PhaseTimes times;
    pf.set_params(theta);
    builder.build(pf.params.data(), pf.x.data(), pf.y.data(), batch, ne, times);
    auto a = pf.download(ne.a.data(), n * n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < i; ++k) a[i * n + k] = 0;
    EXPECT_LE(relative_error(a, a_ref), 2e-6) << "slice " << slice;
    EXPECT_LE(relative_error(pf.download(ne.g.data(), n), g_ref), 2e-6) << "slice " << slice;
    builder.jacobian_transpose_times(pf.params.data(), u_dev.data(), ne, ju.data());
    EXPECT_LE(relative_error(pf.download(ju.data(), n), ju_ref), 2e-6) << "slice " << slice;
  }
}

TEST(CgSolver, MarquardtStepFromStoredRowsMatchesCholeskyOnA) {
  // With J stored, D = clamp(diag JᵀJ) comes from J's column sums of squares and a vector
  // clamp; with A, from A's clamped diagonal.  A tight forcing term makes the steps equal.
  const std::size_t batch = 50;
  Rng rng(24);
  const auto x = random_vector(batch * 2, rng), y = random_vector(batch, rng);
  const auto spec = ModelSpec::mlp(2, {6}, 1, Activation::kTanh);
  const auto theta0 = random_vector(spec.num_params(), rng);
  std::vector<std::vector<double>> after;
  for (const LinearSolverType type : {LinearSolverType::kCholesky, LinearSolverType::kCg}) {
    Problem<double> p(spec, LossOptions{}, x, y, batch);
    SolverOptions o;
    o.damping_matrix = DampingMatrix::kMarquardt;
    o.marquardt_min = 0.05;  // some columns are clamped from below
    o.cg_forcing = 1e-13;
    o.cg_max_iterations = 10000;
    LevenbergMarquardtStep<double> step(o, type, *p.source, 17, batch);
    p.set_params(theta0);
    PhaseTimes times;
    ASSERT_TRUE(step.step(p.params.data(), p.x.data(), p.y.data(), batch, times).accepted);
    after.push_back(p.download(p.params.data(), spec.num_params()));
  }
  EXPECT_LE(relative_error(after[1], after[0]), 1e-8);
}

TEST(EigenSolver, GivesTheCholeskyStepForIdentityAndMarquardtDamping) {
  Rng rng(9);
  const std::size_t batch = 30;
  const auto spec = ModelSpec::mlp(2, {5}, 1, Activation::kTanh);
  const auto x = random_vector(batch * 2, rng), y = random_vector(batch, rng);
  Problem<double> p(spec, LossOptions{}, x, y, batch);
  const auto theta = random_vector(spec.num_params(), rng, 0.8);
  NormalEquations<double> ne;
  build(p, theta, batch, false, ne);
  DeviceBuffer<double> d = p.backend->allocate(ne.n);
  p.backend->clamped_diagonal(ne.n, ne.a.data(), 1e-6, 1e32, d.data());
  for (const double* damping :
       {static_cast<const double*>(nullptr), static_cast<const double*>(d.data())}) {
    // One eigen solver serves several λ after a single prepare().
    auto eigen = LinearSolver<double>::create(LinearSolverType::kEigen, *p.backend, ne.n, ne.m);
    ASSERT_TRUE(eigen->prepare(ne, damping));
    for (double lambda : {1e-4, 1e-2, 1.0, 100.0}) {
      DeviceBuffer<double> delta = p.backend->allocate(ne.n);
      ASSERT_TRUE(eigen->solve(lambda, delta.data()));
      const auto expected = solve(p, LinearSolverType::kCholesky, ne, lambda, damping);
      EXPECT_LE(relative_error(p.download(delta.data(), ne.n), expected), 1e-8)
          << "λ = " << lambda << (damping ? " marquardt" : " identity");
    }
  }
}

TEST(CholeskySolver, IndefiniteSystemIsAnInvalidStepNotACrash) {
  Rng rng(2);
  const std::size_t batch = 10;
  Problem<double> p(ModelSpec(3).dense(1), LossOptions{}, random_vector(30, rng),
                    random_vector(10, rng), batch);
  NormalEquations<double> ne;
  build(p, random_vector(4, rng), batch, false, ne);
  for (auto type : {LinearSolverType::kCholesky, LinearSolverType::kEigen}) {
    auto solver = LinearSolver<double>::create(type, *p.backend, ne.n, ne.m);
    ASSERT_TRUE(solver->prepare(ne, nullptr));
    DeviceBuffer<double> delta = p.backend->allocate(ne.n);
    EXPECT_FALSE(solver->solve(-1e6, delta.data())) << to_string(type);
  }
}

template <typename T>
class CholeskyInverse : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CholeskyInverse, Precisions);

TYPED_TEST(CholeskyInverse, TimesTheMatrixIsTheIdentity) {
  // potri from potrf's factor, against the closed form A·A⁻¹ = I evaluated in double.
  using T = TypeParam;
  const std::size_t n = 23, rows = 40;
  Rng rng(91);
  const std::vector<double> z = random_vector(rows * n, rng);
  std::vector<double> a(n * n, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t q = 0; q < n; ++q) a[p * n + q] += z[r * n + p] * z[r * n + q];
  auto backend = make_cpu_backend<T>();
  std::vector<T> m = cast<T>(a);
  ASSERT_EQ(backend->potrf(n, m.data()), 0);
  ASSERT_EQ(backend->potri(n, m.data()), 0);
  // Only the upper triangle is defined.
  auto inverse = [&](std::size_t p, std::size_t q) {
    return static_cast<double>(m[std::min(p, q) * n + std::max(p, q)]);
  };
  double worst = 0;
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t q = 0; q < n; ++q) {
      double s = 0;
      for (std::size_t k = 0; k < n; ++k) s += a[p * n + k] * inverse(k, q);
      worst = std::max(worst, std::abs(s - (p == q ? 1.0 : 0.0)));
    }
  const double tolerance = std::is_same_v<T, float> ? 1e-3 : 1e-11;
  EXPECT_LE(worst, tolerance);
}

}  // namespace
}  // namespace lmtrain::testing
