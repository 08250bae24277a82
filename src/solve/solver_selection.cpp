#include "lmtrain/solve/solver_selection.h"

#include <fmt/format.h>

#include <type_traits>

#include "lmtrain/core/error.h"
#include "lmtrain/nn/jacobian.h"
#include "lmtrain/solve/lm_step.h"

namespace lmtrain {
namespace {

// Bytes of every buffer the step's components allocate for one solver, by precision.
template <typename T, typename S>
MemoryPlanInput step_memory(const SolverOptions& options, LinearSolverType solver,
                            const Sequential<T>& model, const StepProblem& p) {
  const std::size_t n = model.num_params(), R = p.residuals_per_sample;
  const std::size_t m = p.local_batch * R;
  const bool stored = solver == LinearSolverType::kDual || solver == LinearSolverType::kCg;
  const bool geodesic = uses_geodesic_acceleration(options, solver);
  const bool distributed_primal = p.collectives && !stored;
  using Builder = NormalEquationsBuilder<T, S>;
  // The device's slicing, from the backend the builder asks too, so that plan and buffers agree.
  const SlicePreference slice = model.backend().slice_preference(n);
  const std::size_t ld = Builder::leading_dimension(n, slice, stored);
  std::size_t model_elements =
      JacobianEngine<T>::fixed_elements(model, p.local_batch, R, geodesic) +
      LevenbergMarquardtStep<T, S>::model_elements(n) + model.workspace_elements() +
      p.caller_elements;
  std::size_t system_elements =
      Builder::system_elements(n, m, stored, ld) +
      LinearSolver<S>::workspace_elements(solver, n, m) + Damping<S>::system_elements(n) +
      Penalty<T, S>::system_elements(options, n) +
      LevenbergMarquardtStep<T, S>::system_elements(n, distributed_primal);
  if (geodesic) {
    model_elements += GeodesicAcceleration<T, S>::model_elements(m, n);
    system_elements += GeodesicAcceleration<T, S>::system_elements(n, m);
  }
  MemoryPlanInput in;
  in.budget_bytes = p.budget_bytes;
  in.batch = p.local_batch;
  in.max_slice_samples = options.max_slice_samples;
  in.preferred_slice_bytes = slice.bytes;
  in.min_slice_samples = (slice.min_rows + R - 1) / std::max<std::size_t>(R, 1);
  in.fixed_bytes = model_elements * sizeof(T) + system_elements * sizeof(S);
  in.bytes_per_slice_sample = (JacobianEngine<T>::slice_sample_elements(model, R) +
                               Builder::slice_sample_model_elements(ld, R, stored)) *
                                  sizeof(T) +
                              Builder::slice_sample_system_elements(ld, R, stored) * sizeof(S);
  in.num_params = n;
  switch (solver) {
    case LinearSolverType::kDual:
      in.normal_matrix_bytes = m * m * sizeof(S);
      in.normal_matrix_name = "the m×m Gram matrix of the dual form";
      break;
    case LinearSolverType::kCg:
      in.normal_matrix_name = "none: matrix-free CG";
      in.way_out = " (J of a batch shard is stored whole: use more ranks or a smaller batch)";
      break;
    default:
      in.normal_matrix_bytes = n * n * sizeof(S);
      in.way_out = ", or SolverOptions::linear_solver = \"cg\" (matrix-free: stores J, never A)";
  }
  return in;
}

}  // namespace

template <typename T>
MemoryPlan plan_step_memory(const SolverOptions& options, LinearSolverType solver,
                            const Sequential<T>& model, const StepProblem& problem) {
  if constexpr (std::is_same_v<T, float>) {
    if (resolve_system_precision(options, true) == SystemPrecision::kFloat64)
      return plan_memory(step_memory<float, double>(options, solver, model, problem));
  }
  return plan_memory(step_memory<T, T>(options, solver, model, problem));
}

template <typename T>
SolverChoice choose_linear_solver(const SolverOptions& options, const Sequential<T>& model,
                                  const StepProblem& p) {
  const std::size_t n = model.num_params(), m = p.batch * p.residuals_per_sample;
  SolverChoice choice;
  choice.type = options.linear_solver;
  if (choice.type == LinearSolverType::kAuto) {
    const bool regularized = options.regularization != Regularization::kNone;
    if (m < n && options.damping_matrix == DampingMatrix::kIdentity && p.ranks == 1 &&
        !regularized) {
      choice.type = LinearSolverType::kDual;
      choice.reason = fmt::format(
          "auto: {} residual rows per batch < {} parameters, so the m×m dual system is smaller "
          "than A",
          m, n);
    } else {
      choice.type = LinearSolverType::kCholesky;
      choice.reason =
          m >= n ? fmt::format("auto: {} residual rows per batch ≥ {} parameters: primal A = JᵀJ",
                               m, n)
          : p.ranks > 1
              ? "auto: the dual form needs the whole J on one rank; using the primal A = JᵀJ"
          : regularized
              ? "auto: regularization cannot use the dual form; using the primal A = JᵀJ"
              : "auto: dual form needs damping_matrix = identity; using the primal A = JᵀJ";
      try {
        choice.plan = plan_step_memory(options, choice.type, model, p);
        return choice;
      } catch (const MemoryPlanError& e) {
        if (regularization_conflict(options.regularization, LinearSolverType::kCg)) throw;
        choice.plan = plan_step_memory(options, LinearSolverType::kCg, model, p);  // or throws
        choice.type = LinearSolverType::kCg;
        choice.reason = fmt::format(
            "auto: A = JᵀJ does not fit the memory budget ({}), so matrix-free CG on the stored "
            "Jacobian rows",
            e.what());
        return choice;
      }
    }
  } else if (choice.type == LinearSolverType::kDual &&
             options.damping_matrix != DampingMatrix::kIdentity) {
    choice.type = LinearSolverType::kCholesky;
    choice.reason =
        "dual requested but damping_matrix = marquardt; the dual form solves (JJᵀ + λI) only, so "
        "cholesky on the primal system is used";
  } else if (choice.type == LinearSolverType::kDual && p.ranks > 1) {
    choice.type = LinearSolverType::kCholesky;
    choice.reason =
        "dual requested but the job has several ranks and the dual form needs the whole J on "
        "one; cholesky on the all-reduced A is used";
  }
  choice.plan = plan_step_memory(options, choice.type, model, p);
  return choice;
}

template SolverChoice choose_linear_solver<float>(const SolverOptions&, const Sequential<float>&,
                                                  const StepProblem&);
template SolverChoice choose_linear_solver<double>(const SolverOptions&, const Sequential<double>&,
                                                   const StepProblem&);
template MemoryPlan plan_step_memory<float>(const SolverOptions&, LinearSolverType,
                                            const Sequential<float>&, const StepProblem&);
template MemoryPlan plan_step_memory<double>(const SolverOptions&, LinearSolverType,
                                             const Sequential<double>&, const StepProblem&);

}  // namespace lmtrain
