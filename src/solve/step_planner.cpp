#include "lmtrain/solve/step_planner.h"

#include <fmt/format.h>

#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "lmtrain/backend/device.h"
#include "lmtrain/core/error.h"
#include "lmtrain/dist/block_cyclic.h"

namespace lmtrain {
namespace {

// The step's byte budget on `device` and where it came from.  The device's available memory is
// read only when neither the caller nor the options give a budget.
std::pair<std::size_t, std::string> budget_bytes(const SolverOptions& options, const StepProblem& p,
                                                 const DeviceQueue& device) {
  if (p.budget_bytes > 0) return {p.budget_bytes, "the caller's budget"};
  if (options.memory_budget_bytes > 0)
    return {options.memory_budget_bytes, "SolverOptions::memory_budget_bytes"};
  const std::size_t available = device.available_memory_bytes();
  return {static_cast<std::size_t>(options.memory_fraction * static_cast<double>(available)),
          fmt::format("SolverOptions::memory_fraction {} of the {} available on {}",
                      options.memory_fraction, format_bytes(available), device.name())};
}

// The layout A gets on `ranks` ranks.
dist::BlockCyclicLayout grid_layout(const SolverOptions& options, std::size_t n, int ranks) {
  const dist::ProcessGrid grid = dist::ProcessGrid::for_ranks(ranks, 0);
  return {n, dist::BlockCyclicLayout::block_size(options.distributed_block_size, n, grid), grid};
}

// Bytes of every buffer the step's components allocate for one solver, by precision.
template <typename T, typename S>
MemoryPlanInput step_memory(const SolverOptions& options, LinearSolverType solver,
                            const LinearizationSource<T>& source, const StepProblem& p) {
  const std::size_t n = source.num_params(), R = source.residuals_per_sample();
  const std::size_t m = p.local_batch * R;
  const bool stored = solver == LinearSolverType::kDual || solver == LinearSolverType::kCg;
  const bool distributed = solver == LinearSolverType::kDistributedCholesky;
  const bool geodesic = uses_geodesic_acceleration(options, solver);
  const bool distributed_primal = p.collectives && !stored && !distributed;
  const bool borrowed = source.borrows_slices();
  using Builder = NormalEquationsBuilder<T, S>;
  // The device's slicing, as the builder asks the source for it, so that plan and buffers agree.
  const SlicePreference slice = source.slice_preference();
  const SlicePreference built = Builder::preference_of(source);
  const std::size_t ld = Builder::leading_dimension(n, built, stored);
  const SourceFootprint own = source.footprint(p.local_batch, geodesic);
  std::size_t model_elements = LevenbergMarquardtStep<T, S>::model_elements(n);
  std::size_t system_elements =
      Builder::system_elements(n, m, stored, built, !distributed) +
      (distributed ? DistributedCholeskySolver<S>::workspace_elements(
                         n, options.distributed_block_size, p.ranks,
                         source.model_backend().device_kind()) +
                         n  // A's diagonal on every rank
                   : LinearSolver<S>::workspace_elements(solver, n, m)) +
      Damping<S>::system_elements(n) + Penalty<T, S>::system_elements(options, n) +
      LevenbergMarquardtStep<T, S>::system_elements(n, distributed_primal);
  if (geodesic) {
    model_elements += GeodesicAcceleration<T, S>::model_elements(m, n);
    system_elements += GeodesicAcceleration<T, S>::system_elements(n, m);
    // Jᵀu from the source's own product, in T before it is widened (mixed precision).
    if (source.computes_transpose_product() && !std::is_same_v<T, S>) model_elements += n;
  }
  MemoryPlanInput in;
  std::tie(in.budget_bytes, in.budget_source) = budget_bytes(options, p, source.model_backend());
  in.batch = p.local_batch;
  in.max_slice_samples = options.max_slice_samples;
  in.preferred_slice_bytes = slice.bytes;
  in.min_slice_samples = (slice.min_rows + R - 1) / std::max<std::size_t>(R, 1);
  in.fixed_bytes = own.fixed_bytes + p.caller.bytes(n, p.local_batch, sizeof(T)) +
                   model_elements * sizeof(T) + system_elements * sizeof(S);
  in.bytes_per_slice_sample =
      own.bytes_per_slice_sample +
      Builder::slice_sample_model_elements(ld, R, stored, borrowed) * sizeof(T) +
      Builder::slice_sample_system_elements(ld, R, stored, built, !distributed) * sizeof(S);
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
    case LinearSolverType::kDistributedCholesky: {
      const dist::BlockCyclicLayout layout = grid_layout(options, n, p.ranks);
      in.normal_matrix_bytes = layout.largest_share() * sizeof(S);
      in.normal_matrix_name =
          fmt::format("the largest rank's share of A on a {} process grid", layout.grid.describe());
      in.way_out =
          ", more ranks (each holds about 2n²/R values: its share of A and of A's factor), or "
          "SolverOptions::linear_solver = \"cg\" (matrix-free: stores J, never A)";
      break;
    }
    default:
      in.normal_matrix_bytes = n * n * sizeof(S);
      in.way_out =
          ", or SolverOptions::linear_solver = \"cg\" (matrix-free: stores J, never A), or "
          "SolverOptions::linear_solver = \"distributed_cholesky\" on several ranks (each holds "
          "about 2n²/R values of A and its factor)";
  }
  return in;
}

template <typename S>
std::string describe_distribution(const SolverOptions& options, std::size_t n, int ranks) {
  const dist::BlockCyclicLayout layout = grid_layout(options, n, ranks);
  return fmt::format(
      "{} process grid of {} ranks, {}×{} blocks; A's share on rank 0 (the largest): {} of {}",
      layout.grid.describe(), ranks, layout.nb, layout.nb,
      format_bytes(layout.largest_share() * sizeof(S)), format_bytes(n * n * sizeof(S)));
}

template <typename T>
std::string distribution_of(const SolverOptions& options, std::size_t n, int ranks) {
  if constexpr (std::is_same_v<T, float>) {
    if (resolve_system_precision(options, true) == SystemPrecision::kFloat64)
      return describe_distribution<double>(options, n, ranks);
  }
  return describe_distribution<T>(options, n, ranks);
}

// After A did not fit one rank (`why`): distributed_cholesky when the ranks can hold A's shares.
template <typename T>
bool choose_distributed(StepPlan& plan, const LinearizationSource<T>& source, const StepProblem& p,
                        const std::string& why) {
  if (p.distributed_unavailable || is_evidence_based(plan.options.regularization)) return false;
  try {
    plan.memory = plan_step_memory(plan.options, LinearSolverType::kDistributedCholesky, source, p);
  } catch (const MemoryPlanError&) {
    return false;
  }
  plan.options.linear_solver = LinearSolverType::kDistributedCholesky;
  plan.distribution = distribution_of<T>(plan.options, source.num_params(), p.ranks);
  plan.solver_reason = fmt::format(
      "auto: A = JᵀJ does not fit one rank ({}), but its shares over the {} ranks do ({}), so "
      "distributed_cholesky",
      why, p.ranks, plan.distribution);
  return true;
}

// `auto` resolved to a primal solver: cholesky while A fits the budget, else distributed_cholesky
// while its shares fit the ranks, else cg.
template <typename T>
void choose_primal(StepPlan& plan, const LinearizationSource<T>& source, const StepProblem& p,
                   std::size_t m) {
  const std::size_t n = source.num_params();
  const bool regularized = plan.options.regularization != Regularization::kNone;
  plan.options.linear_solver = LinearSolverType::kCholesky;
  plan.solver_reason =
      m >= n ? fmt::format("auto: {} residual rows per batch ≥ {} parameters: primal A = JᵀJ", m, n)
      : p.ranks > 1 ? "auto: the dual form needs the whole J on one rank; using the primal A = JᵀJ"
      : regularized ? "auto: regularization cannot use the dual form; using the primal A = JᵀJ"
                    : "auto: dual form needs damping_matrix = identity; using the primal A = JᵀJ";
  try {
    plan.memory = plan_step_memory(plan.options, LinearSolverType::kCholesky, source, p);
  } catch (const MemoryPlanError& e) {
    if (choose_distributed(plan, source, p, e.what())) return;
    if (regularization_conflict(plan.options.regularization, LinearSolverType::kCg)) throw;
    plan.options.linear_solver = LinearSolverType::kCg;
    plan.memory = plan_step_memory(plan.options, LinearSolverType::kCg, source, p);  // or throws
    plan.solver_reason = fmt::format(
        "auto: A = JᵀJ does not fit the memory budget ({}){}, so matrix-free CG on the stored "
        "Jacobian rows",
        e.what(),
        p.distributed_unavailable
            ? fmt::format(", and it cannot be sharded: {}", *p.distributed_unavailable)
            : std::string(", nor do its shares over the ranks (distributed_cholesky)"));
  }
}

}  // namespace

template <typename T>
MemoryPlan plan_step_memory(const SolverOptions& options, LinearSolverType solver,
                            const LinearizationSource<T>& source, const StepProblem& problem) {
  if constexpr (std::is_same_v<T, float>) {
    if (resolve_system_precision(options, true) == SystemPrecision::kFloat64)
      return plan_memory(step_memory<float, double>(options, solver, source, problem));
  }
  return plan_memory(step_memory<T, T>(options, solver, source, problem));
}

namespace {

// The linear solver and the memory plan for options whose system precision is resolved.
template <typename T>
StepPlan plan_solver(const SolverOptions& options, const LinearizationSource<T>& source,
                     const StepProblem& p) {
  const std::size_t n = source.num_params(), m = p.batch * source.residuals_per_sample();
  StepPlan plan;
  plan.options = options;
  plan.options.geodesic_acceleration = geodesic_acceleration_for(options, p.loss);
  const LinearSolverType given = options.linear_solver;
  if (given == LinearSolverType::kAuto) {
    const bool regularized = options.regularization != Regularization::kNone;
    if (m < n && options.damping_matrix == DampingMatrix::kIdentity && p.ranks == 1 &&
        !regularized) {
      plan.options.linear_solver = LinearSolverType::kDual;
      plan.solver_reason = fmt::format(
          "auto: {} residual rows per batch < {} parameters, so the m×m dual system is smaller "
          "than A",
          m, n);
    } else {
      choose_primal(plan, source, p, m);
      return plan;
    }
  } else if (given == LinearSolverType::kDual &&
             options.damping_matrix != DampingMatrix::kIdentity) {
    plan.options.linear_solver = LinearSolverType::kCholesky;
    plan.solver_reason =
        "dual requested but damping_matrix = marquardt; the dual form solves (JJᵀ + λI) only, so "
        "cholesky on the primal system is used";
  } else if (given == LinearSolverType::kDistributedCholesky && p.distributed_unavailable) {
    plan.options.linear_solver = LinearSolverType::kCholesky;
    plan.solver_reason =
        fmt::format("distributed_cholesky requested, but {}; cholesky on the whole A is used",
                    *p.distributed_unavailable);
  } else if (given == LinearSolverType::kDistributedCholesky) {
    plan.distribution = distribution_of<T>(options, n, p.ranks);
    plan.solver_reason = fmt::format("distributed_cholesky as requested: {}", plan.distribution);
  } else if (given == LinearSolverType::kDual && p.ranks > 1) {
    plan.options.linear_solver = LinearSolverType::kCholesky;
    plan.solver_reason =
        "dual requested but the job has several ranks and the dual form needs the whole J on "
        "one; cholesky on the all-reduced A is used";
  }
  plan.memory = plan_step_memory(plan.options, plan.options.linear_solver, source, p);
  return plan;
}

// The problem with rank 0's float64 rate, so that every rank resolves the same precision.
template <typename T>
StepProblem with_agreed_rate(StepProblem p, const LinearizationSource<T>& source,
                             dist::Communicator* comm) {
  if (p.float64_rate > 0 || !std::is_same_v<T, float>) return p;
  const LinearAlgebra<T>& device = source.model_backend();
  p.float64_rate = float64_rate(device.device_kind(), device.device_index());
  if (comm != nullptr && comm->size() > 1) comm->broadcast(&p.float64_rate, sizeof(double), 0);
  return p;
}

}  // namespace

// system_precision = auto resolved (choose_system_precision), then the solver and the memory
// plan.  A float64 system that auto chose for the rows of A, but that does not fit — its plan
// fails, or auto's solver falls back to matrix-free cg — gives way to the float32 one when that
// fits directly: float32's rounding costs less than cg's inexact steps or no run at all.
template <typename T>
StepPlan plan_step(const SolverOptions& options, const LinearizationSource<T>& source,
                   const StepProblem& p) {
  options.validate();
  SystemPrecisionProblem problem;
  problem.float_model = std::is_same_v<T, float>;
  problem.rows = p.batch * source.residuals_per_sample();
  const LinearAlgebra<T>& device = source.model_backend();
  problem.float64_rate = p.float64_rate > 0
                             ? p.float64_rate
                             : float64_rate(device.device_kind(), device.device_index());
  SolverOptions resolved = options;
  const SystemPrecisionChoice precision = choose_system_precision(options, problem);
  resolved.system_precision = precision.precision;
  const bool may_narrow = precision.automatic && precision.precision == SystemPrecision::kFloat64 &&
                          !is_evidence_based(options.regularization);
  std::optional<StepPlan> plan;
  try {
    plan = plan_solver(resolved, source, p);
  } catch (const MemoryPlanError&) {
    if (!may_narrow) throw;
  }
  const bool direct = plan && !(plan->solver() == LinearSolverType::kCg &&
                                options.linear_solver == LinearSolverType::kAuto);
  if (may_narrow && !direct) {
    resolved.system_precision = SystemPrecision::kModel;
    StepPlan narrow = plan_solver(resolved, source, p);  // or throws
    if (!plan || narrow.solver() != LinearSolverType::kCg) {
      narrow.precision = precision;
      narrow.precision.precision = SystemPrecision::kModel;
      narrow.precision.reason +=
          "; but a float64 A does not fit the memory budget, a float32 one does";
      return narrow;
    }
  }
  plan->precision = precision;
  return *plan;
}

template <typename T>
StepPlanner<T>::StepPlanner(const SolverOptions& options, LinearizationSource<T>& source,
                            const StepProblem& problem, dist::Communicator* comm)
    : plan_(plan_step(options, source, with_agreed_rate(problem, source, comm))),
      source_(source),
      max_batch_(problem.local_batch),
      ranks_(problem.ranks),
      comm_(comm),
      slice_(plan_.memory.slice_samples) {}

template <typename T>
std::unique_ptr<LmStepper<T>> StepPlanner<T>::build() {
  for (;;) {
    try {
      return make_lm_step<T>(plan_.options, plan_.solver(), source_, slice_, max_batch_, comm_);
    } catch (const OutOfMemory& e) {
      halve(e);
    }
  }
}

template <typename T>
std::unique_ptr<LmStepper<T>> StepPlanner<T>::rebuild_after(std::unique_ptr<LmStepper<T>> failed,
                                                            const OutOfMemory& error,
                                                            const StepperState& state) {
  failed.reset();  // every slice-sized buffer of the step, before the smaller ones
  halve(error);
  std::unique_ptr<LmStepper<T>> step = build();
  step->set_state(state);
  return step;
}

template <typename T>
void StepPlanner<T>::halve(const OutOfMemory& e) {
  source_.release_slices();
  if (slice_ == 1 || ranks_ > 1)
    throw OutOfMemory(
        fmt::format("{} (Jacobian slice of {} unit(s){})", e.what(), slice_,
                    ranks_ > 1 ? "; with several ranks the slice is not halved" : ""));
  slice_ = (slice_ + 1) / 2;
  ++halvings_;
  halving_cause_ = e.what();
}

template StepPlan plan_step<float>(const SolverOptions&, const LinearizationSource<float>&,
                                   const StepProblem&);
template StepPlan plan_step<double>(const SolverOptions&, const LinearizationSource<double>&,
                                    const StepProblem&);
template MemoryPlan plan_step_memory<float>(const SolverOptions&, LinearSolverType,
                                            const LinearizationSource<float>&, const StepProblem&);
template MemoryPlan plan_step_memory<double>(const SolverOptions&, LinearSolverType,
                                             const LinearizationSource<double>&,
                                             const StepProblem&);
template class StepPlanner<float>;
template class StepPlanner<double>;

}  // namespace lmtrain
