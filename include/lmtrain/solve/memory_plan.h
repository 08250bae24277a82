// The memory planner: from a byte budget and the bytes the step's components report, the number
// of samples whose Jacobian rows are built at once (the slice).  Users never have to pick it;
// they may cap it.
//
// Every component reports its own buffers (solve/step_planner.cpp gathers them): the
// Jacobian engine (activations, residuals, seeds; per slice sample the seed rows), the
// normal-equation builder (A and g, or the stored J; per slice sample its Jacobian rows and, in
// mixed precision, their widened copy), the linear solver's workspace, the damping, the penalty,
// the geodesic acceleration, the step's own vectors and the trainer's.  The planner only does
// the arithmetic:
//   slice = min(batch, (budget − fixed) / per-sample, cap),
// and, when not even one sample fits, fails before training with the sizes and the ways out.
#pragma once

#include <cstddef>
#include <string>

namespace lmtrain {

struct MemoryPlanInput {
  std::size_t budget_bytes = 0;
  // Where the budget came from ("memory_fraction 0.5 of the 9.2 GiB cuda:0 (…) has available"),
  // for the plan's description and a failure's message.
  std::string budget_source;
  std::size_t batch = 0;              // samples per step on this device
  std::size_t max_slice_samples = 0;  // 0: no cap
  std::size_t fixed_bytes = 0;        // every buffer whose size does not depend on the slice
  std::size_t bytes_per_slice_sample = 0;
  // The slice's working set the device runs fastest (Backend::slice_preference), 0 for as large
  // as the budget allows; the slice never goes below min_slice_samples for it.
  std::size_t preferred_slice_bytes = 0;
  std::size_t min_slice_samples = 1;
  // For a failure's message: the system matrix alone (A, or the dual form's Gram), what it is,
  // the parameter count, and the way out that fits the solver.
  std::size_t normal_matrix_bytes = 0;
  std::string normal_matrix_name = "A = JᵀJ";
  std::size_t num_params = 0;
  std::string way_out;
};

struct MemoryPlan {
  std::size_t budget_bytes = 0;
  std::string budget_source;  // MemoryPlanInput::budget_source
  std::size_t fixed_bytes = 0;
  std::size_t normal_matrix_bytes = 0;  // A (or the dual Gram) alone
  std::size_t bytes_per_slice_sample = 0;
  std::size_t slice_samples = 0;
  std::size_t slices_per_batch = 0;
  std::size_t peak_bytes = 0;  // fixed + one slice
  // What set the slice: the budget, the batch, the preferred working set or max_slice_samples.
  enum class Limit { kBudget, kBatch, kCache, kCap } slice_limit = Limit::kBudget;
  std::string describe() const;
};

// Throws MemoryPlanError when even a one-sample slice does not fit.
MemoryPlan plan_memory(const MemoryPlanInput& input);

// Human-readable byte count ("1.50 GiB").
std::string format_bytes(std::size_t bytes);

}  // namespace lmtrain
