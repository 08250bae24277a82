// Mixed precision (float32 model and Jacobian, float64 system): A and g must be the float64
// products of the float32 Jacobian the engine builds — checked against a host reference that
// widens that J and multiplies in double — and the step solved from them must match LAPACK's
// float64 solve of the same system, at a λ where float32 normal equations lose the step; LM
// training in mixed precision must follow float64 training of the same problem.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lmtrain/backend/cuda_backend.h"
#include "lmtrain/solve/lm_step.h"
#include "support/block_source.h"
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

// Jᵀu of a (rows × n) J in double on the host.
std::vector<double> transpose_times(const std::vector<double>& j, const std::vector<double>& u,
                                    std::size_t rows, std::size_t n) {
  std::vector<double> out(n, 0.0);
  for (std::size_t k = 0; k < rows; ++k)
    for (std::size_t q = 0; q < n; ++q) out[q] += j[k * n + q] * u[k];
  return out;
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
  std::vector<double> x, y;  // the data as drawn; the float32 problem holds them rounded
  Problem<float> p;
  std::unique_ptr<LinearAlgebra<double>> system;
  std::vector<double> theta;

  static ModelSpec spec() { return ModelSpec::mlp(kIn, {9, 7}, 2, Activation::kTanh); }
  MixedProblem(Rng&& rng, bool cuda = false)
      : x(random_vector(kBatch * kIn, rng)),
        y(random_vector(kBatch * 2, rng)),
        p(cuda ? make_cuda_backend<float>() : make_cpu_backend<float>(), spec(), LossOptions{}, x,
          y, kBatch) {
    system = make_sibling_backend<double>(*p.backend);
    theta = random_vector(p.model->num_params(), rng, 0.7);
  }
  std::size_t n() const { return p.model->num_params(); }
};

// v rounded to float, as a float32 problem holds it.
std::vector<double> rounded_to_float(const std::vector<double>& v) {
  const std::vector<float> f = cast<float>(v);
  return std::vector<double>(f.begin(), f.end());
}

// On the CPU and, when one is visible, on a CUDA device (the float64 side is then a second
// CUDA backend on the same device).
class MixedPrecisionOn : public ::testing::TestWithParam<const char*> {
 protected:
  bool cuda() const { return std::string_view(GetParam()) == "cuda"; }
  void SetUp() override {
    if (cuda() && cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

// The widening tests' problem and references: A and g of the engine's J and r multiplied in
// double, and Jᵀu for a u exact in float (on the device as u_dev), at θ.
struct WideningCase {
  MixedProblem mp;
  Problem<float>& p;
  std::size_t n, rows;
  std::vector<double> j;
  Reference ref;
  std::vector<double> ju_ref;
  DeviceBuffer<float> u_dev;

  WideningCase(std::uint64_t seed, bool cuda)
      : mp(Rng(seed), cuda), p(mp.p), n(mp.n()), rows(p.rows()), j(p.jacobian(mp.theta)) {
    ref = normal_equations(j, p.residuals(mp.theta), rows, n);
    Rng rng(seed + 1);
    const auto u = rounded_to_float(random_vector(rows, rng));
    ju_ref = transpose_times(j, u, rows, n);
    u_dev = p.upload(u);
    p.set_params(mp.theta);
  }
  // A, g and Jᵀu of `mixed`'s build of the batch against the references: the bounds of the
  // neighbour tests (float64 accumulation over 600 rows), which a misplaced block exceeds by
  // orders of magnitude.
  void expect_same_system(NormalEquationsBuilder<float, double>& mixed, const std::string& where) {
    PhaseTimes times;
    NormalEquations<double> ne;
    mixed.build(p.params.data(), p.x.data(), p.y.data(), p.batch, ne, times);
    std::vector<double> a(n * n), g(n), ju(n);
    mp.system->copy_to_host(ne.a.data(), a.data(), n * n);
    mp.system->copy_to_host(ne.g.data(), g.data(), n);
    EXPECT_LE(upper_relative_error(a, ref.a, n), 1e-13) << where;
    EXPECT_LE(relative_error(g, ref.g), 1e-12) << where;
    DeviceBuffer<double> ju_dev = mp.system->allocate(n);
    mixed.jacobian_transpose_times(p.params.data(), u_dev.data(), ne, ju_dev.data());
    mp.system->copy_to_host(ju_dev.data(), ju.data(), n);
    EXPECT_LE(relative_error(ju, ju_ref), 1e-12) << where;
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

  NormalEquationsBuilder<float, double> mixed(*p.source, *mp.system, 37, p.batch, false);
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
  NormalEquationsBuilder<float> single(*p.source, 37, p.batch, false);
  NormalEquations<float> ne32;
  single.build(p.params.data(), p.x.data(), p.y.data(), p.batch, ne32, times);
  const double float_error = upper_relative_error(p.download(ne32.a.data(), n * n), ref.a, n);
  EXPECT_GT(float_error, 1e3 * mixed_error);
  EXPECT_LE(float_error, 1e-5);

  // The stored-J form (dual, CG) keeps the widened J itself.
  NormalEquationsBuilder<float, double> stored(*p.source, *mp.system, 37, p.batch, true);
  NormalEquations<double> nes;
  stored.build(p.params.data(), p.x.data(), p.y.data(), p.batch, nes, times);
  std::vector<double> js(rows * n), gs(n);
  mp.system->copy_to_host(nes.j.data(), js.data(), rows * n);
  mp.system->copy_to_host(nes.g.data(), gs.data(), n);
  EXPECT_EQ(js, j);
  EXPECT_LE(relative_error(gs, ref.g), 1e-12);
}

// The CUDA backend's slicing (CudaBackend::slice_preference): rows padded to a stride of a
// multiple of 4 elements, the padding not part of SYRK (A summed n × n from the strided rows).
// The builder's arithmetic under that slicing, on every device: A and g of the float and the
// mixed system, in one slice and in several, against the double products of the engine's J and
// r; and Jᵀu read back from the strided slice.
TEST_P(MixedPrecisionOn, StrideOnlyPaddedSlicesGiveTheSameSystem) {
  MixedProblem mp(Rng(44), cuda());
  Problem<float>& p = mp.p;
  const std::size_t n = mp.n(), rows = p.rows();
  ASSERT_EQ(n, 122u);
  BlockSource<float> strided(*p.source, {});
  SlicePreference preference;
  preference.leading_dimension = 124;
  preference.syrk_on_padding = false;
  strided.prefer(preference);
  ASSERT_EQ(NormalEquationsBuilder<float>::leading_dimension(n, preference, false), 124u);
  ASSERT_EQ(NormalEquationsBuilder<float>::padded_normal_matrix(n, preference, false), 0u);
  ASSERT_EQ((NormalEquationsBuilder<float, double>::leading_dimension(n, preference, false)), 124u);

  const auto j = p.jacobian(mp.theta);
  const auto r = p.residuals(mp.theta);
  const Reference ref = normal_equations(j, r, rows, n);
  Rng rng(45);
  const auto u = rounded_to_float(random_vector(rows, rng));  // exact in the float problem
  const std::vector<double> ju_ref = transpose_times(j, u, rows, n);
  DeviceBuffer<float> u_dev = p.upload(u);
  p.set_params(mp.theta);
  PhaseTimes times;
  for (const std::size_t slice : {MixedProblem::kBatch, std::size_t{37}}) {
    NormalEquationsBuilder<float, double> mixed(strided, *mp.system, slice, p.batch, false);
    NormalEquations<double> ne;
    mixed.build(p.params.data(), p.x.data(), p.y.data(), p.batch, ne, times);
    std::vector<double> a(n * n), g(n), ju(n);
    mp.system->copy_to_host(ne.a.data(), a.data(), n * n);
    mp.system->copy_to_host(ne.g.data(), g.data(), n);
    EXPECT_LE(upper_relative_error(a, ref.a, n), 1e-13) << "mixed, slice " << slice;
    EXPECT_LE(relative_error(g, ref.g), 1e-12) << "mixed, slice " << slice;
    DeviceBuffer<double> ju_dev = mp.system->allocate(n);
    mixed.jacobian_transpose_times(p.params.data(), u_dev.data(), ne, ju_dev.data());
    mp.system->copy_to_host(ju_dev.data(), ju.data(), n);
    EXPECT_LE(relative_error(ju, ju_ref), 1e-12) << "mixed, slice " << slice;

    NormalEquationsBuilder<float> single(strided, slice, p.batch, false);
    NormalEquations<float> ne32;
    single.build(p.params.data(), p.x.data(), p.y.data(), p.batch, ne32, times);
    EXPECT_LE(upper_relative_error(p.download(ne32.a.data(), n * n), ref.a, n), 1e-5)
        << "float, slice " << slice;
    EXPECT_LE(relative_error(p.download(ne32.g.data(), n), ref.g), 1e-5)
        << "float, slice " << slice;
  }
}

// Mixed precision widening a slice to float64 in blocks (SlicePreference::widening_rows, the
// CUDA backend's large slices): A, g and Jᵀu of several blocks per slice — a last block shorter
// than the others, a slice shorter than a block, the batch in one slice or several — against the
// double products of the engine's J, r and u; and the plan counts one block instead of a widened
// slice per sample.  Measured over all 12 cases: A 1.7e-15, g 8.2e-16 with OpenBLAS's Haswell
// and SkylakeX kernels alike (OPENBLAS_CORETYPE); the bounds are the neighbour tests' (float64
// accumulation over 600 rows), which a misplaced block exceeds by orders of magnitude.
TEST_P(MixedPrecisionOn, WideningBlocksGiveTheSameSystem) {
  WideningCase c(46, cuda());
  const std::size_t n = c.n, rows = c.rows;
  using Mixed = NormalEquationsBuilder<float, double>;
  for (const std::size_t ld : {n, std::size_t{124}})
    for (const std::size_t widening_rows : {std::size_t{50}, std::size_t{7}, std::size_t{1000}})
      for (const std::size_t slice : {MixedProblem::kBatch, std::size_t{37}}) {
        BlockSource<float> blocks(*c.p.source, {});
        SlicePreference preference;
        preference.leading_dimension = ld;
        preference.syrk_on_padding = false;
        preference.widening_rows = widening_rows;
        blocks.prefer(preference);
        Mixed mixed(blocks, *c.mp.system, slice, c.p.batch, false);
        c.expect_same_system(mixed, "ld " + std::to_string(ld) + ", blocks of " +
                                        std::to_string(widening_rows) + " rows, slice " +
                                        std::to_string(slice));
      }

  // The plan: one block of widened rows (bounded by the batch), no widened slice per sample; a
  // distributed A (whole slices) and the device without blocks keep the widened slice.
  SlicePreference preference;
  preference.widening_rows = 50;
  EXPECT_EQ(Mixed::slice_sample_system_elements(n, 2, false, preference), 0u);
  EXPECT_EQ(Mixed::system_elements(n, rows, false, preference) -
                Mixed::system_elements(n, rows, false, SlicePreference{}),
            50 * n);
  EXPECT_EQ(Mixed::system_elements(n, 20, false, preference) -
                Mixed::system_elements(n, 20, false, SlicePreference{}),
            20 * n);
  EXPECT_EQ(Mixed::slice_sample_system_elements(n, 2, false, preference, false), 2 * n);
  EXPECT_EQ(Mixed::slice_sample_system_elements(n, 2, false, SlicePreference{}), 2 * n);
  EXPECT_EQ(NormalEquationsBuilder<float>::slice_sample_system_elements(n, 2, false, preference),
            0u);
}

// The widening block measured at the first slice (SlicePreference::widening_rows_smallest, the
// CUDA backend's choice between 32 MiB and 1 GiB blocks): the candidates, ×4 apart and capped
// by the slice; whichever block the clock picks, A, g and Jᵀu are the double products of the
// engine's J, r and u to the bounds above (the timed passes overwrite A and g, the batch's
// later slices add to them); the report names the block kept and the others' times; a second
// batch measures nothing again.
TEST_P(MixedPrecisionOn, WideningBlockChosenByMeasurementGivesTheSameSystem) {
  using Mixed = NormalEquationsBuilder<float, double>;
  using Rows = std::vector<std::size_t>;
  EXPECT_EQ(Mixed::widening_candidates(7, 1000, 600), (Rows{7, 28, 112, 448, 600}));
  EXPECT_EQ(Mixed::widening_candidates(7, 50, 600), (Rows{7, 28, 50}));
  EXPECT_EQ(Mixed::widening_candidates(7, 1000, 20), (Rows{7, 20}));
  EXPECT_EQ(Mixed::widening_candidates(0, 50, 600), (Rows{50}));
  EXPECT_EQ(Mixed::widening_candidates(1024, 1024, 5000), (Rows{1024}));
  // W7 on the CUDA backend: 772 doubles a row, 32 MiB to 1 GiB, a slice of 100 000 rows.
  EXPECT_EQ(Mixed::widening_candidates(5433, 173856, 100000), (Rows{5433, 21732, 86928, 100000}));

  WideningCase c(48, cuda());
  ASSERT_EQ(c.rows, 600u);
  for (const std::size_t slice : {MixedProblem::kBatch, std::size_t{37}}) {
    BlockSource<float> blocks(*c.p.source, {});
    SlicePreference preference;
    preference.leading_dimension = 124;
    preference.syrk_on_padding = false;
    preference.widening_rows = 1000;
    preference.widening_rows_smallest = 7;
    blocks.prefer(preference);
    Mixed mixed(blocks, *c.mp.system, slice, c.p.batch, false);
    // Measured whatever a pass costs here (a loaded machine, a sanitizer).
    mixed.set_widening_measure_limit(std::numeric_limits<double>::infinity());
    EXPECT_TRUE(mixed.widening_report().empty());
    const Rows candidates = Mixed::widening_candidates(7, 1000, slice * 2);
    std::string first_report;
    for (int batch = 0; batch < 2; ++batch) {
      const std::string where =
          "slice " + std::to_string(slice) + ", batch " + std::to_string(batch);
      c.expect_same_system(mixed, where);
      const std::size_t kept = mixed.widening_block_rows();
      EXPECT_NE(std::find(candidates.begin(), candidates.end(), kept), candidates.end()) << where;
      const std::string& report = mixed.widening_report();
      EXPECT_NE(report.find("blocks of " + std::to_string(kept) + " rows (slice of " +
                            std::to_string(slice * 2) + ")"),
                std::string::npos)
          << report;
      for (const std::size_t b : candidates) {
        if (b == kept) continue;
        EXPECT_NE(report.find(std::to_string(b) + " rows "), std::string::npos) << report;
      }
      if (batch == 0) first_report = report;
      EXPECT_EQ(report, first_report) << where;  // measured once, at the first slice
    }
  }
}

// A slice whose pass in the smallest block takes longer than the limit (here 0) keeps that
// block unmeasured, and that one pass is the slice's sum: A, g and Jᵀu as above.
TEST_P(MixedPrecisionOn, WideningBlockOfASlowSliceIsNotMeasured) {
  using Mixed = NormalEquationsBuilder<float, double>;
  WideningCase c(50, cuda());
  for (const std::size_t slice : {MixedProblem::kBatch, std::size_t{37}}) {
    BlockSource<float> blocks(*c.p.source, {});
    SlicePreference preference;
    preference.widening_rows = 1000;
    preference.widening_rows_smallest = 7;
    blocks.prefer(preference);
    Mixed mixed(blocks, *c.mp.system, slice, c.p.batch, false);
    mixed.set_widening_measure_limit(0);
    c.expect_same_system(mixed, "slice " + std::to_string(slice));
    EXPECT_EQ(mixed.widening_block_rows(), 7u);
    const std::size_t larger = Mixed::widening_candidates(7, 1000, slice * 2).size() - 1;
    EXPECT_NE(mixed.widening_report().find("blocks of 7 rows (slice of " +
                                           std::to_string(slice * 2) + ")"),
              std::string::npos)
        << mixed.widening_report();
    EXPECT_NE(mixed.widening_report().find("not timed against " + std::to_string(larger) +
                                           " larger blocks"),
              std::string::npos)
        << mixed.widening_report();
  }
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

  NormalEquationsBuilder<float, double> mixed(*p.source, *mp.system, 64, p.batch, false);
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

// Mixed-precision training against float64 training of the same problem: the same data and
// starting point (rounded to float, as the mixed run holds them) and the same options, kSteps LM
// steps each.  The mixed run's float32 forward pass, residuals and Jacobian carry relative
// rounding of a few ε₃₂ ≈ 1e-7, which the solve at λ ≈ 0.06–1.4 amplifies into its step.
//  * Step by step: a float64 stepper, its damping state evolving alongside, steps from the mixed
//    run's own parameters each time.  Measured (CPU): parameters within 5.8e-6, F within 2.8e-6
//    (relative), the same number of attempts, and λ within 1.3e-5: the damping update divides
//    by the reduction of F, a difference of two F values that each carry float32 rounding.
//    Bounds ~10× that.
//  * The whole run: the free float64 run drifts from the mixed one because the problem amplifies
//    every difference about tenfold per step early on (a float64 run started ε₃₂/2 away ends
//    9.3e-5 away in parameters after 6 steps).  Measured: F 3.3e-4 apart after 6 steps, from
//    597 down to 302; bound 3e-3.
// A float32 system in place of the mixed one (solver.system_precision = model) fails both: its
// first step is 1.0e-4 off in parameters and its run ends 5.4e-3 off in F.
TEST_P(MixedPrecisionOn, TrainingFollowsFloat64Training) {
  constexpr int kSteps = 6;
  MixedProblem mp(Rng(43), cuda());
  Problem<float>& p = mp.p;
  auto float64_problem = [&] {
    return Problem<double>(cuda() ? make_cuda_backend<double>() : make_cpu_backend<double>(),
                           MixedProblem::spec(), LossOptions{}, rounded_to_float(mp.x),
                           rounded_to_float(mp.y), MixedProblem::kBatch);
  };
  Problem<double> shadow = float64_problem(), free_run = float64_problem();
  const std::vector<double> theta = rounded_to_float(mp.theta);
  SolverOptions options;
  options.system_precision = SystemPrecision::kFloat64;
  options.linear_solver = LinearSolverType::kCholesky;
  auto mixed = make_lm_step<float>(options, LinearSolverType::kCholesky, *p.source, 50, p.batch);
  using MixedStep = LevenbergMarquardtStep<float, double>;
  ASSERT_NE(dynamic_cast<MixedStep*>(mixed.get()), nullptr);
  auto shadow_step =
      make_lm_step<double>(options, LinearSolverType::kCholesky, *shadow.source, 50, shadow.batch);
  auto free_step = make_lm_step<double>(options, LinearSolverType::kCholesky, *free_run.source, 50,
                                        free_run.batch);
  const std::size_t n = mp.n();
  p.set_params(theta);
  const double initial_objective = free_run.objective(theta);  // also sets its parameters
  PhaseTimes times;
  StepReport m, f;
  for (int k = 0; k < kSteps; ++k) {
    SCOPED_TRACE("step " + std::to_string(k));
    const auto before = p.download(p.params.data(), n);
    const double objective_before = p.objective(before);
    m = mixed->step(p.params.data(), p.x.data(), p.y.data(), p.batch, times);
    shadow.set_params(before);
    const StepReport d = shadow_step->step(shadow.params.data(), shadow.x.data(), shadow.y.data(),
                                           shadow.batch, times);
    f = free_step->step(free_run.params.data(), free_run.x.data(), free_run.y.data(),
                        free_run.batch, times);
    ASSERT_TRUE(m.accepted);
    ASSERT_TRUE(d.accepted);
    ASSERT_TRUE(f.accepted);
    const auto after = p.download(p.params.data(), n);
    const double parameter_error = relative_error(after, shadow.download(shadow.params.data(), n));
    const double objective_error =
        std::fabs(m.objective_after - d.objective_after) / d.objective_after;
    const double lambda_error = std::fabs(m.lambda - d.lambda) / d.lambda;
    std::printf("step %d: parameters %.2e, F %.2e, lambda %.2e; free run F %.3e vs %.3e\n", k,
                parameter_error, objective_error, lambda_error, f.objective_after,
                m.objective_after);
    // The step's own bookkeeping, in the float32 model's precision.
    EXPECT_NEAR(m.objective_before, objective_before, 1e-6 * objective_before);
    EXPECT_NEAR(p.objective(after), m.objective_after, 1e-6 * objective_before);
    EXPECT_LT(m.objective_after, m.objective_before);
    // The float64 step from the same point.
    EXPECT_EQ(m.attempts, d.attempts);
    EXPECT_LE(lambda_error, 1e-4);
    EXPECT_LE(parameter_error, 5e-5);
    EXPECT_LE(objective_error, 3e-5);
  }
  EXPECT_LE(std::fabs(m.objective_after - f.objective_after), 3e-3 * f.objective_after)
      << "mixed " << m.objective_after << ", float64 " << f.objective_after;
  EXPECT_LT(f.objective_after, 0.6 * initial_objective);  // it trained: 597 → 302
}

INSTANTIATE_TEST_SUITE_P(Devices, MixedPrecisionOn, ::testing::Values("cpu", "cuda"),
                         [](const auto& device) { return std::string(device.param); });

}  // namespace
}  // namespace lmtrain::testing
