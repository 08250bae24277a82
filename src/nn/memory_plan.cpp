#include "lmtrain/nn/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "lmtrain/core/error.h"

namespace lmtrain {

std::string format_bytes(std::size_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.2f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

MemoryPlan plan_memory(const MemoryPlanInput& in) {
  // s: the model's element size (activations, seeds, J as built); w: the system's (A, g, δ, the
  // solver, stored J).  They differ in mixed precision, where each slice also has a widened copy.
  const std::size_t s = in.element_size, n = in.num_params, R = in.residuals_per_sample;
  const std::size_t w = in.system_element_size > 0 ? in.system_element_size : s;
  const bool mixed = w != s;
  const std::size_t m = in.batch * R;
  MemoryPlan plan;
  plan.budget_bytes = in.budget_bytes;
  std::size_t solver_bytes = 0;
  switch (in.solver) {
    case SolverWorkspace::kCholesky:
      plan.normal_matrix_bytes = n * n * w;
      solver_bytes = n * n * w;
      break;
    case SolverWorkspace::kEigen:
      plan.normal_matrix_bytes = n * n * w;
      solver_bytes = (n * n + 2 * n) * w;
      break;
    case SolverWorkspace::kDual:
      // A is not formed; the m × m Gram and its factor are, and J is stored whole.
      plan.normal_matrix_bytes = m * m * w;
      solver_bytes = (m * m + m * n + m) * w;
      break;
    case SolverWorkspace::kCg:
      // Matrix-free: J's rows stored, a few vectors; no n × n matrix at all.
      plan.normal_matrix_bytes = 0;
      solver_bytes = (m * n + 2 * m + 8 * n) * w;
      break;
  }
  const bool stores_j = in.solver == SolverWorkspace::kDual || in.solver == SolverWorkspace::kCg;
  const std::size_t a_bytes = stores_j ? n * w : (n * n + n) * w;
  const std::size_t batch_bytes =
      in.batch * (in.inputs + in.outputs + 3 * in.activation_floats_per_sample + R * in.outputs + R) * s +
      (mixed ? m * w : 0);
  plan.fixed_bytes = 6 * n * std::max(s, w) + (mixed ? n * s : 0) + a_bytes + solver_bytes +
                     batch_bytes + in.workspace_elements * s + in.extra_system_elements * w +
                     in.extra_model_elements * s;
  // With J stored whole (in solver_bytes) a slice needs only its seeds, and in mixed precision
  // the rows as built before widening; otherwise its rows, plus their widened copy when mixed.
  const std::size_t j_row_bytes = stores_j ? (mixed ? R * n * s : 0) : R * n * (s + (mixed ? w : 0));
  plan.bytes_per_slice_sample = j_row_bytes + 2 * R * in.max_width * s;

  if (plan.fixed_bytes + plan.bytes_per_slice_sample > in.budget_bytes) {
    throw MemoryPlanError(fmt::format(
        "the problem does not fit the memory budget of {}: {} parameters need {} for the normal "
        "matrix{} plus {} of other fixed buffers (batch of {} samples), before a single Jacobian "
        "row ({} per sample). Ways out: raise the budget (solver.memory_budget_bytes, or "
        "solver.memory_fraction of available memory), lower the batch size, or use fewer "
        "parameters{}",
        format_bytes(in.budget_bytes), n, format_bytes(plan.normal_matrix_bytes),
        in.solver == SolverWorkspace::kDual ? " (dual form: the m×m Gram matrix)"
        : in.solver == SolverWorkspace::kCg ? " (none: matrix-free CG)"
                                            : " A = JᵀJ",
        format_bytes(plan.fixed_bytes - plan.normal_matrix_bytes), in.batch,
        format_bytes(plan.bytes_per_slice_sample),
        in.solver == SolverWorkspace::kCg ? " (J of a batch shard is stored whole: use more ranks or a smaller batch)"
        : in.solver == SolverWorkspace::kDual ? ""
                                              : ", or solver.linear_solver = \"cg\" (matrix-free: stores J, never A)"));
  }
  std::size_t slice = (in.budget_bytes - plan.fixed_bytes) /
                      std::max<std::size_t>(plan.bytes_per_slice_sample, 1);
  slice = std::min(slice, in.batch);
  if (in.max_slice_samples > 0) slice = std::min(slice, in.max_slice_samples);
  slice = std::max<std::size_t>(slice, 1);
  plan.slice_samples = slice;
  plan.slices_per_batch = (in.batch + slice - 1) / slice;
  plan.peak_bytes = plan.fixed_bytes + slice * plan.bytes_per_slice_sample;
  return plan;
}

std::string MemoryPlan::describe() const {
  return fmt::format(
      "budget {}, normal matrix {}, fixed {}, {} per slice sample, slice of {} samples "
      "({} per batch), planned peak {}",
      format_bytes(budget_bytes), format_bytes(normal_matrix_bytes), format_bytes(fixed_bytes),
      format_bytes(bytes_per_slice_sample), slice_samples, slices_per_batch,
      format_bytes(peak_bytes));
}

}  // namespace lmtrain
