// lmtrain._core.DampedNormalEquations{32,64}: the LM step's linear algebra for Jacobian slices
// computed outside the library (lmtrain.torch builds them with torch.func or autograd).  Each
// slice is read in place — a CPU torch tensor or NumPy array reaches it through DLPack without a
// copy — and folded into A = Σ JₛᵀJₛ (SYRK, upper triangle) and g = Σ Jₛᵀrₛ (GEMV) on the CPU
// backend; the step then prepares the library's Damping and LinearSolver once and solves
// (A + λD)δ = g for every λ retry with the same A.  The retry loop itself, which evaluates trial
// points with the user's model, is Python's (python/lmtrain/torch/_optimizer.py); its decisions
// follow LevenbergMarquardtStep::run (src/solve/lm_step.cpp) step for step.
#include <fmt/format.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "arrays.h"
#include "lmtrain/backend/backend.h"
#include "lmtrain/core/error.h"
#include "lmtrain/solve/collectives.h"
#include "lmtrain/solve/damping.h"
#include "lmtrain/solve/geodesic_acceleration.h"
#include "lmtrain/solve/linear_solver.h"
#include "lmtrain/solve/normal_equations.h"
#include "module.h"
#include "schedule_state.h"

namespace lmtrain::python {

namespace nb = nanobind;

namespace {

using CpuArray = nb::ndarray<nb::c_contig, nb::device::cpu>;
using ReadOnlyCpuArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

template <typename U>
bool holds(const ReadOnlyCpuArray& a) {
  return a.dtype() == nb::dtype<U>();
}

// S is the system's precision (A, g, δ).  Slices may be S, or float32 for a float64 system
// (mixed precision: each slice is widened once before its SYRK, as NormalEquationsBuilder does).
template <typename S>
class DampedNormalEquations {
 public:
  // `float32_model`: the residuals come from a float32 model (SolverOptions::geodesic_backoff_max
  // auto).
  DampedNormalEquations(std::size_t n, const SolverOptions& options, bool float32_model)
      : options_(checked(options)),
        backend_(make_cpu_backend<S>()),
        collectives_(*backend_, nullptr),
        damping_(options_, *backend_, n),
        backoff_(geodesic_backoff_max(options_, float32_model)),
        delta_(backend_->allocate(n)),
        clock_(backend_->make_phase_clock()) {
    const LinearSolverType type = options_.linear_solver == LinearSolverType::kAuto
                                      ? LinearSolverType::kCholesky
                                      : options_.linear_solver;
    if (type != LinearSolverType::kCholesky && type != LinearSolverType::kEigen)
      throw InvalidArgument(fmt::format(
          "SolverOptions::linear_solver = \"{}\": Jacobian slices from PyTorch are folded into "
          "A = JᵀJ, so use \"cholesky\" or \"eigen\"",
          to_string(type)));
    solver_ = LinearSolver<S>::create(type, *backend_, n, 0, nullptr, options_);
    ne_.n = n;
    ne_.a = backend_->allocate(n * n);
    ne_.g = backend_->allocate(n);
    begin();
  }

  std::size_t parameters() const { return ne_.n; }

  // A ← 0, g ← 0: the start of a step's linearization.
  void begin() {
    backend_->fill(ne_.a.data(), ne_.n * ne_.n, S(0));
    backend_->fill(ne_.g.data(), ne_.n, S(0));
    ne_.m = 0;
    ne_.objective = 0;
    prepared_ = false;
  }

  // A += JₛᵀJₛ, g += Jₛᵀrₛ for a slice J (rows × n) and its residuals r (rows).
  void add_slice(const ReadOnlyCpuArray& j, const ReadOnlyCpuArray& r) {
    const std::size_t n = ne_.n;
    if (j.ndim() != 2 || j.shape(1) != n)
      throw nb::value_error(fmt::format("a Jacobian slice must be rows × {} (the parameters), "
                                        "not of shape {}",
                                        n, shape_of(j))
                                .c_str());
    const std::size_t rows = j.shape(0);
    if (r.ndim() != 1 || r.shape(0) != rows)
      throw nb::value_error(fmt::format("the slice's residuals must be a vector of {} values "
                                        "(one per Jacobian row), not of shape {}",
                                        rows, shape_of(r))
                                .c_str());
    if (!holds<S>(j) && !(std::is_same_v<S, double> && holds<float>(j)))
      throw nb::type_error(dtype_message("Jacobian slice").c_str());
    if (j.dtype() != r.dtype())
      throw nb::type_error("a Jacobian slice and its residuals must have the same dtype");
    if (rows == 0) return;
    nb::gil_scoped_release unlocked;
    const S* js = nullptr;
    const S* rs = nullptr;
    if (holds<S>(j)) {
      js = static_cast<const S*>(j.data());
      rs = static_cast<const S*>(r.data());
    } else {
      widen(static_cast<const float*>(j.data()), static_cast<const float*>(r.data()), rows);
      js = wide_j_.data();
      rs = wide_r_.data();
    }
    ScopedDevicePhase phase(*clock_, Phase::kNormalEquations);
    backend_->syrk_ata(n, rows, S(1), js, n, S(1), ne_.a.data());
    backend_->gemv(Trans::kYes, rows, n, S(1), js, n, rs, S(1), ne_.g.data());
    ne_.m += rows;
  }

  // Closes the linearization with F at the linearization point: D and the solver's preparation,
  // once per step.  Returns (finite, ‖g‖∞): finite is false when F, g or diag A is not finite,
  // which no λ can cure (LevenbergMarquardtStep::non_finite_system).
  std::tuple<bool, double> finish(double objective) {
    nb::gil_scoped_release unlocked;
    ScopedDevicePhase phase(*clock_, Phase::kFactorization);
    const std::size_t n = ne_.n;
    ne_.objective = objective;
    bool finite = std::isfinite(objective) && backend_->all_finite(n, ne_.g.data());
    if (finite) {
      backend_->clamped_diagonal(n, ne_.a.data(), -std::numeric_limits<S>::infinity(),
                                 std::numeric_limits<S>::infinity(), delta_.data());
      finite = backend_->all_finite(n, delta_.data());
    }
    const double gmax = backend_->max_abs(n, ne_.g.data());
    if (!finite) return {false, gmax};
    damping_.prepare(ne_, collectives_);
    prepared_ = solver_->prepare(ne_, damping_.matrix());
    return {true, gmax};
  }

  // δ = (A + λD)⁻¹g for the current λ into `delta` (n values of S, e.g. a torch tensor); false
  // when the attempt is invalid (failed factorization or non-finite δ).
  bool solve(CpuArray delta) {
    check_vector(delta, "delta");
    nb::gil_scoped_release unlocked;
    ScopedDevicePhase phase(*clock_, Phase::kFactorization);
    const std::size_t n = ne_.n;
    const bool valid = prepared_ && solver_->solve(damping_.lambda(), delta_.data()) &&
                       backend_->all_finite(n, delta_.data());
    if (valid) backend_->copy(delta_.data(), static_cast<S*>(delta.data()), n);
    return valid;
  }

  // Geodesic acceleration of the last valid solve (GeodesicAcceleration::correct): a' = (A +
  // λD)⁻¹·rhs with that solve's factorization, rhs = Jᵀr_vv computed by the caller; when a' is
  // finite and 2‖a'‖ ≤ geodesic_ratio·lr‖δ‖, δ ← δ + a'/(2·lr), written into `delta`, and true.
  // False leaves δ as it was.
  bool correct_geodesic(const ReadOnlyCpuArray& rhs, double learning_rate, CpuArray delta) {
    check_vector(delta, "delta");
    if (rhs.ndim() != 1 || rhs.shape(0) != ne_.n || !holds<S>(rhs))
      throw nb::value_error(fmt::format("rhs must be a contiguous vector of {} values of the "
                                        "system's dtype",
                                        ne_.n)
                                .c_str());
    nb::gil_scoped_release unlocked;
    ScopedDevicePhase phase(*clock_, Phase::kGeodesic);
    const std::size_t n = ne_.n;
    if (accel_.size() < n) accel_ = backend_->allocate(n);
    if (!solver_->solve_again(static_cast<const S*>(rhs.data()), accel_.data())) return false;
    const double a = std::sqrt(backend_->dot(n, accel_.data(), accel_.data()));
    const double v = learning_rate * std::sqrt(backend_->dot(n, delta_.data(), delta_.data()));
    if (!std::isfinite(a) || !(2 * a <= options_.geodesic_ratio * v)) return false;
    backend_->axpy(n, static_cast<S>(0.5 / learning_rate), accel_.data(), delta_.data());
    backend_->copy(delta_.data(), static_cast<S*>(delta.data()), n);
    return true;
  }

  // The Gauss–Newton model's reduction F − m(δ) = lr·gᵀδ − ½lr²·(gᵀδ − λ·δᵀDδ) for the δ of the
  // last valid solve (LevenbergMarquardtStep::predicted_reduction).
  double predicted_reduction(double learning_rate) {
    const double g_delta = backend_->dot(ne_.n, ne_.g.data(), delta_.data());
    const double delta_d_delta = damping_.weighted_norm2(delta_.data());
    return learning_rate * g_delta -
           0.5 * learning_rate * learning_rate * (g_delta - damping_.lambda() * delta_d_delta);
  }

  // A's and g's own storage, for summing them over ranks in place (torch.distributed): rows of A
  // above the diagonal are the valid ones, the rest stays 0 between begin() and finish().
  S* normal_matrix_data() { return ne_.a.data(); }
  S* gradient_data() { return ne_.g.data(); }

  double lambda() const { return damping_.lambda(); }
  void accepted(double gain_ratio) { damping_.accepted(gain_ratio); }
  bool rejected() { return damping_.rejected(); }
  bool invalid() { return damping_.invalid(); }
  // GeodesicBackoff: whether this attempt computes the correction, and what a computed one did.
  bool geodesic_due() { return backoff_.due(); }
  void geodesic_outcome(bool applied) { backoff_.record(applied); }
  ScheduleTuple state() const { return schedule_tuple(damping_.state(), backoff_.state()); }
  void set_state(double lambda, double nu, double floor, int skip, int backoff) {
    const auto [damping, geodesic] = schedule_state(lambda, nu, floor, skip, backoff);
    damping_.set_state(damping);
    backoff_.set_state(geodesic);
  }

  // A (full, symmetrized) and g as NumPy arrays: for tests and inspection.
  nb::ndarray<nb::numpy, S> normal_matrix() {
    const std::size_t n = ne_.n;
    std::vector<S> values(n * n);
    backend_->copy_to_host(ne_.a.data(), values.data(), n * n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = i + 1; k < n; ++k) values[k * n + i] = values[i * n + k];
    return numpy_array(std::move(values), {n, n});
  }
  nb::ndarray<nb::numpy, S> gradient() {
    std::vector<S> values(ne_.n);
    backend_->copy_to_host(ne_.g.data(), values.data(), ne_.n);
    return numpy_array(std::move(values), {ne_.n});
  }

 private:
  static const SolverOptions& checked(const SolverOptions& options) {
    options.validate();
    return options;
  }
  static std::string dtype_message(const char* what) {
    return std::is_same_v<S, double>
               ? fmt::format("a {} must be float64 or float32 for a float64 system", what)
               : fmt::format(
                     "a {} must be float32 for a float32 system (use precision="
                     "\"float64\" for mixed precision)",
                     what);
  }
  template <typename A>
  static std::string shape_of(const A& a) {
    std::string s = "(";
    for (std::size_t i = 0; i < a.ndim(); ++i) s += fmt::format("{}{}", i ? ", " : "", a.shape(i));
    return s + (a.ndim() == 1 ? ",)" : ")");
  }
  void check_vector(const CpuArray& v, const char* what) const {
    if (v.ndim() != 1 || v.shape(0) != ne_.n || v.dtype() != nb::dtype<S>())
      throw nb::value_error(fmt::format("{} must be a contiguous vector of {} {} values", what,
                                        ne_.n, std::is_same_v<S, double> ? "float64" : "float32")
                                .c_str());
  }
  void widen(const float* j, const float* r, std::size_t rows) {
    const std::size_t n = ne_.n;
    if (wide_j_.size() < rows * n) wide_j_ = backend_->allocate(rows * n);
    if (wide_r_.size() < rows) wide_r_ = backend_->allocate(rows);
    backend_->convert(rows * n, j, wide_j_.data());
    backend_->convert(rows, r, wide_r_.data());
  }

  SolverOptions options_;
  std::unique_ptr<Backend<S>> backend_;
  Collectives<S> collectives_;
  NormalEquations<S> ne_;
  Damping<S> damping_;
  GeodesicBackoff backoff_;
  std::unique_ptr<LinearSolver<S>> solver_;
  DeviceBuffer<S> delta_;
  // The phases' boundaries, for the CPU's thread choice per phase (cpu_threads.h); the times
  // themselves are the Python loop's to report.
  std::unique_ptr<PhaseClock> clock_;
  DeviceBuffer<S> wide_j_, wide_r_;  // mixed precision: the slice widened
  DeviceBuffer<S> accel_;            // the geodesic correction a'
  bool prepared_ = false;
};

template <typename S>
void bind_damped_normal_equations(nb::module_& m, const char* name) {
  using D = DampedNormalEquations<S>;
  nb::class_<D>(m, name,
                "A, g, the damping and the linear solver of LM steps on Jacobian slices given "
                "from outside the library (lmtrain.torch).")
      .def(nb::init<std::size_t, const SolverOptions&, bool>(), nb::arg("parameters"),
           nb::arg("options"), nb::arg("float32_model") = false)
      .def_prop_ro("parameters", &D::parameters)
      .def("begin", &D::begin, "A ← 0, g ← 0: the start of a step.")
      .def("add_slice", &D::add_slice, nb::arg("jacobian"), nb::arg("residuals"),
           "A += JᵀJ, g += Jᵀr for one slice, read in place (C-contiguous CPU arrays).")
      .def("finish", &D::finish, nb::arg("objective"),
           "F at the linearization point; prepares D and the solver.  Returns (finite, ‖g‖∞).")
      .def("solve", &D::solve, nb::arg("delta"),
           "δ = (A + λD)⁻¹g into delta; False when the attempt is invalid.")
      .def("correct_geodesic", &D::correct_geodesic, nb::arg("rhs"), nb::arg("learning_rate"),
           nb::arg("delta"),
           "Geodesic correction of the last δ from rhs = Jᵀr_vv; True when applied to delta.")
      .def("predicted_reduction", &D::predicted_reduction, nb::arg("learning_rate"))
      .def_prop_ro("current_lambda", &D::lambda, "λ of the next solve.")
      .def("accepted", &D::accepted, nb::arg("gain_ratio"))
      .def("rejected", &D::rejected, "λ up after a rejected trial; False at lambda_max.")
      .def("invalid", &D::invalid, "λ up after an invalid attempt; False at lambda_max.")
      .def("geodesic_due", &D::geodesic_due,
           "Whether this attempt computes the geodesic correction (False: skipped after "
           "refusals, counted down).")
      .def("geodesic_outcome", &D::geodesic_outcome, nb::arg("applied"),
           "Whether a computed correction was kept (the backoff resets) or refused.")
      .def("state", &D::state,
           "(λ, ν, floor, geodesic_skip, geodesic_backoff) of the step's schedule.")
      .def("set_state", &D::set_state, nb::arg("lambda_"), nb::arg("nu"), nb::arg("floor"),
           nb::arg("geodesic_skip") = 0, nb::arg("geodesic_backoff") = 0)
      .def(
          "normal_matrix_view",
          [](D& d) {
            const std::size_t n = d.parameters();
            return nb::ndarray<nb::numpy, S, nb::ndim<2>>(d.normal_matrix_data(), {n, n});
          },
          nb::rv_policy::reference_internal,
          "A's storage (upper triangle valid; the rest 0 until finish()), without a copy.")
      .def(
          "gradient_view",
          [](D& d) {
            return nb::ndarray<nb::numpy, S, nb::ndim<1>>(d.gradient_data(), {d.parameters()});
          },
          nb::rv_policy::reference_internal, "g's storage, without a copy.")
      .def("normal_matrix", &D::normal_matrix, "A = JᵀJ (symmetrized copy).")
      .def("gradient", &D::gradient, "g = Jᵀr (copy).");
}

}  // namespace

void bind_torch_normal_equations(nb::module_& m) {
  bind_damped_normal_equations<float>(m, "DampedNormalEquations32");
  bind_damped_normal_equations<double>(m, "DampedNormalEquations64");
}

}  // namespace lmtrain::python
