#include "lmtrain/solve/solver_options.h"

#include <fmt/format.h>

#include <cmath>

#include "lmtrain/core/error.h"

namespace lmtrain {

std::string_view to_string(LinearSolverType t) {
  switch (t) {
    case LinearSolverType::kAuto:
      return "auto";
    case LinearSolverType::kCholesky:
      return "cholesky";
    case LinearSolverType::kDual:
      return "dual";
    case LinearSolverType::kEigen:
      return "eigen";
    case LinearSolverType::kCg:
      return "cg";
    case LinearSolverType::kDistributedCholesky:
      return "distributed_cholesky";
  }
  return "unknown";
}
std::string_view to_string(DampingType t) {
  return t == DampingType::kMultiplicative ? "multiplicative" : "nielsen";
}
std::string_view to_string(DampingMatrix t) {
  return t == DampingMatrix::kIdentity ? "identity" : "marquardt";
}
std::string_view to_string(Regularization r) {
  switch (r) {
    case Regularization::kNone:
      return "none";
    case Regularization::kL2:
      return "l2";
    case Regularization::kBayesian:
      return "bayesian";
    case Regularization::kArd:
      return "ard";
  }
  return "unknown";
}
std::optional<Regularization> parse_regularization(std::string_view s) {
  for (auto r : {Regularization::kNone, Regularization::kL2, Regularization::kBayesian,
                 Regularization::kArd})
    if (to_string(r) == s) return r;
  return std::nullopt;
}
std::optional<LinearSolverType> parse_linear_solver(std::string_view s) {
  for (auto t :
       {LinearSolverType::kAuto, LinearSolverType::kCholesky, LinearSolverType::kDual,
        LinearSolverType::kEigen, LinearSolverType::kCg, LinearSolverType::kDistributedCholesky})
    if (to_string(t) == s) return t;
  return std::nullopt;
}
std::optional<DampingType> parse_damping(std::string_view s) {
  for (auto t : {DampingType::kMultiplicative, DampingType::kNielsen})
    if (to_string(t) == s) return t;
  return std::nullopt;
}
std::string_view to_string(SystemPrecision p) {
  return p == SystemPrecision::kAuto ? "auto" : p == SystemPrecision::kModel ? "model" : "float64";
}
std::optional<SystemPrecision> parse_system_precision(std::string_view s) {
  for (auto p : {SystemPrecision::kAuto, SystemPrecision::kModel, SystemPrecision::kFloat64})
    if (to_string(p) == s) return p;
  return std::nullopt;
}
std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::kAuto:
      return "auto";
    case Precision::kFloat32:
      return "float32";
    case Precision::kMixed:
      return "mixed";
    case Precision::kFloat64:
      return "float64";
  }
  return "unknown";
}
std::optional<Precision> parse_precision(std::string_view s) {
  for (auto p : {Precision::kAuto, Precision::kFloat32, Precision::kMixed, Precision::kFloat64})
    if (to_string(p) == s) return p;
  return std::nullopt;
}
PrecisionChoice resolve_precision(Precision p) {
  switch (p) {
    case Precision::kAuto:
      return {false, SystemPrecision::kAuto};
    case Precision::kFloat32:
      return {false, SystemPrecision::kModel};
    case Precision::kMixed:
      return {false, SystemPrecision::kFloat64};
    case Precision::kFloat64:
      break;
  }
  return {true, SystemPrecision::kModel};
}
SystemPrecision system_precision_for(Precision p, bool float64_model) {
  if (!float64_model)
    return resolve_precision(p == Precision::kFloat64 ? Precision::kMixed : p).system;
  if (p == Precision::kFloat32)
    throw InvalidArgument(
        "precision = \"float32\" with a float64 model: the system is never less precise than the "
        "model; use \"float64\" (or \"auto\")");
  if (p == Precision::kMixed)
    throw InvalidArgument(
        "precision = \"mixed\" needs a float32 model (its Jacobian in float32, the system in "
        "float64); this model is float64: use \"float64\"");
  return SystemPrecision::kModel;
}

std::optional<DampingMatrix> parse_damping_matrix(std::string_view s) {
  for (auto t : {DampingMatrix::kIdentity, DampingMatrix::kMarquardt})
    if (to_string(t) == s) return t;
  return std::nullopt;
}

bool is_evidence_based(Regularization r) {
  return r == Regularization::kBayesian || r == Regularization::kArd;
}

std::optional<std::string> regularization_conflict(Regularization r, LinearSolverType solver) {
  if (r != Regularization::kNone && solver == LinearSolverType::kDual)
    return fmt::format(
        "SolverOptions::linear_solver = dual cannot be used with regularization = {}: the dual "
        "form's right-hand side must lie in J's row space, which g + ρθ does not; use auto, "
        "cholesky, eigen{}",
        to_string(r), r == Regularization::kL2 ? " or cg" : "");
  if (is_evidence_based(r) && solver == LinearSolverType::kCg)
    return fmt::format(
        "SolverOptions::linear_solver = cg cannot be used with regularization = {}: its evidence "
        "update needs A itself (its eigenvalues, its inverse's diagonal), which matrix-free CG "
        "never forms; use auto, cholesky or eigen",
        to_string(r));
  if (is_evidence_based(r) && solver == LinearSolverType::kDistributedCholesky)
    return fmt::format(
        "SolverOptions::linear_solver = distributed_cholesky cannot be used with regularization "
        "= {}: its evidence update reads {} on one rank, and here no rank holds A whole; use "
        "regularization = l2 with a fixed weight_decay, or cholesky or eigen where A fits one "
        "rank",
        to_string(r),
        r == Regularization::kArd ? "the diagonal of (A + R)⁻¹" : "the eigenvalues of A");
  return std::nullopt;
}

bool geodesic_acceleration_for(const SolverOptions& options, LossKind loss) {
  if (options.geodesic_acceleration) return *options.geodesic_acceleration;
  return !is_softmax_loss(loss);
}

bool uses_geodesic_acceleration(const SolverOptions& options, LinearSolverType solver) {
  return options.geodesic_acceleration.value_or(true) &&
         (solver == LinearSolverType::kCholesky || solver == LinearSolverType::kEigen ||
          solver == LinearSolverType::kDistributedCholesky);
}

int geodesic_backoff_max(const SolverOptions& options, bool float32_model) {
  if (options.geodesic_backoff_max >= 0) return options.geodesic_backoff_max;
  return float32_model ? 2 : 0;
}

SystemPrecision resolve_system_precision(const SolverOptions& options, bool float_model) {
  if (options.system_precision != SystemPrecision::kAuto) return options.system_precision;
  return float_model && is_evidence_based(options.regularization) ? SystemPrecision::kFloat64
                                                                  : SystemPrecision::kModel;
}

SystemPrecisionChoice choose_system_precision(const SolverOptions& options,
                                              const SystemPrecisionProblem& problem) {
  SystemPrecisionChoice choice;
  if (options.system_precision != SystemPrecision::kAuto || !problem.float_model) {
    choice.precision = options.system_precision == SystemPrecision::kAuto
                           ? SystemPrecision::kModel
                           : options.system_precision;
    return choice;
  }
  choice.automatic = true;
  if (is_evidence_based(options.regularization)) {
    choice.precision = SystemPrecision::kFloat64;
    choice.reason =
        fmt::format("{} regularization reads A's small eigenvalues, which float32 rounding swamps",
                    to_string(options.regularization));
    return choice;
  }
  // m·u, u = 2⁻²⁴: the bound on the relative rounding of a float32 sum of m products.
  const double bound = static_cast<double>(problem.rows) * 0x1p-24;
  if (problem.rows < kMixedPrecisionRows) {
    choice.precision = SystemPrecision::kModel;
    choice.reason = fmt::format(
        "A sums {} residual rows per step, fewer than {}: float32 rounding of A (≤ {:.1e} of its "
        "diagonal) leaves λ room",
        problem.rows, kMixedPrecisionRows, bound);
  } else if (problem.float64_rate < kMinMixedFloat64Rate) {
    choice.precision = SystemPrecision::kModel;
    choice.reason = fmt::format(
        "A sums {} residual rows per step, but this device computes float64 at 1/{:.0f} of its "
        "float32 rate; precision = \"mixed\" trades that for float32's rounding of A (≤ {:.1e} "
        "of its diagonal)",
        problem.rows, 1.0 / problem.float64_rate, bound);
  } else {
    choice.precision = SystemPrecision::kFloat64;
    choice.reason = fmt::format(
        "A sums {} residual rows per step, at least {}: float32 rounding of A (≤ {:.1e} of its "
        "diagonal) would hold λ, and the fit, back; this device computes float64 at 1/{:.0f} of "
        "its float32 rate",
        problem.rows, kMixedPrecisionRows, bound, 1.0 / problem.float64_rate);
  }
  return choice;
}

namespace {

// Records the first violated constraint.
struct Checker {
  std::string* error;
  bool ok = true;
  void require(bool condition, std::string_view field, double value, std::string_view constraint) {
    if (ok && !condition) {
      ok = false;
      if (error)
        *error = fmt::format("SolverOptions::{} = {} violates: {}", field, value, constraint);
    }
  }
  void require(bool condition, std::string_view field, std::string_view value,
               std::string_view constraint) {
    if (ok && !condition) {
      ok = false;
      if (error)
        *error = fmt::format("SolverOptions::{} = \"{}\" violates: {}", field, value, constraint);
    }
  }
};

}  // namespace

bool SolverOptions::is_valid(std::string* error) const {
  Checker c{error};
  auto finite = [](double v) { return std::isfinite(v); };
  c.require(lambda_min > 0 && finite(lambda_min), "lambda_min", lambda_min, "0 < lambda_min < ∞");
  c.require(lambda_max > lambda_min && finite(lambda_max), "lambda_max", lambda_max,
            "lambda_min < lambda_max < ∞");
  c.require(lambda_initial >= lambda_min && lambda_initial <= lambda_max, "lambda_initial",
            lambda_initial, "lambda_min ≤ lambda_initial ≤ lambda_max");
  c.require(lambda_increase > 1 && finite(lambda_increase), "lambda_increase", lambda_increase,
            "lambda_increase > 1");
  c.require(lambda_decrease > 0 && lambda_decrease < 1, "lambda_decrease", lambda_decrease,
            "0 < lambda_decrease < 1");
  c.require(marquardt_min > 0 && finite(marquardt_min), "marquardt_min", marquardt_min,
            "0 < marquardt_min < ∞");
  c.require(marquardt_max >= marquardt_min && finite(marquardt_max), "marquardt_max", marquardt_max,
            "marquardt_min ≤ marquardt_max < ∞");
  c.require(learning_rate > 0 && learning_rate <= 1, "learning_rate", learning_rate,
            "0 < learning_rate ≤ 1");
  c.require(max_attempts >= 1, "max_attempts", max_attempts, "max_attempts ≥ 1");
  c.require(gradient_tolerance >= 0 && finite(gradient_tolerance), "gradient_tolerance",
            gradient_tolerance, "gradient_tolerance ≥ 0 (0 disables)");
  c.require(function_tolerance >= 0 && function_tolerance < 1, "function_tolerance",
            function_tolerance, "0 ≤ function_tolerance < 1 (0 disables)");
  c.require(parameter_tolerance >= 0 && finite(parameter_tolerance), "parameter_tolerance",
            parameter_tolerance, "parameter_tolerance ≥ 0 (0 disables)");
  c.require(memory_fraction > 0 && memory_fraction <= 1, "memory_fraction", memory_fraction,
            "0 < memory_fraction ≤ 1");
  c.require(cg_forcing > 0 && cg_forcing < 1, "cg_forcing", cg_forcing, "0 < cg_forcing < 1");
  c.require(distributed_block_size <= 65536, "distributed_block_size",
            static_cast<double>(distributed_block_size),
            "0 (auto) or 1 ≤ distributed_block_size ≤ 65536");
  c.require(geodesic_ratio > 0 && finite(geodesic_ratio), "geodesic_ratio", geodesic_ratio,
            "0 < geodesic_ratio < ∞");
  c.require(geodesic_step > 0 && geodesic_step <= 1, "geodesic_step", geodesic_step,
            "0 < geodesic_step ≤ 1");
  c.require(geodesic_backoff_max >= -1 && geodesic_backoff_max <= 1024, "geodesic_backoff_max",
            geodesic_backoff_max, "−1 ≤ geodesic_backoff_max ≤ 1024 (−1: auto, 0: no backoff)");
  c.require(weight_decay >= 0 && finite(weight_decay), "weight_decay", weight_decay,
            "weight_decay ≥ 0");
  c.require(ard_initial_scale > 0 && finite(ard_initial_scale), "ard_initial_scale",
            ard_initial_scale, "ard_initial_scale > 0");
  c.require(ard_max_factor > 1 && !std::isnan(ard_max_factor), "ard_max_factor", ard_max_factor,
            "ard_max_factor > 1 (∞: undamped)");
  if (const auto conflict = regularization_conflict(regularization, linear_solver);
      c.ok && conflict) {
    c.ok = false;
    if (error) *error = *conflict;
  }
  return c.ok;
}

void SolverOptions::validate() const {
  std::string error;
  if (!is_valid(&error)) throw InvalidArgument(error);
}

}  // namespace lmtrain
