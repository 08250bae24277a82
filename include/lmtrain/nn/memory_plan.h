// The memory planner: from a byte budget and the problem's sizes, the number of samples whose
// Jacobian rows are built at once (the slice).  Users never have to pick it; they may cap it.
//
// Bytes counted (element size s = sizeof(T); the system's A, solver and stored J use its own
// element size w, which is 8 in mixed precision, where a slice also holds its widened copy):
//   fixed      parameters and their step/trial/backup/damping copies   6n·s
//              A = JᵀJ and g                                             (n² + n)·s
//              solver workspace: cholesky n², eigen n² + 2n, dual (with J stored) m² + m·n + m,
//              cg (J stored, no A) m·n + 2m + 8n
//              batch data, residuals and seeds of a batch, and three sets of activations
//              (linearization, trial step, evaluation)                  batch·(in + out + 3·act + R·C + R)·s
//              layers' own scratch (convolution columns, bounded)        workspace·s
//   per slice sample   Jacobian rows R·n plus two seed buffers 2·R·w_max  (·s)
// slice = min(batch, (budget − fixed) / per-sample, cap).  If not even one sample fits, planning
// fails before training with the sizes and the ways out.
#pragma once

#include <cstddef>
#include <string>

namespace lmtrain {

enum class SolverWorkspace { kCholesky, kEigen, kDual, kCg };

struct MemoryPlanInput {
  std::size_t num_params = 0;           // n
  std::size_t batch = 0;                // samples per LM step
  std::size_t residuals_per_sample = 0; // R
  std::size_t inputs = 0;
  std::size_t outputs = 0;
  std::size_t activation_floats_per_sample = 0;
  std::size_t max_width = 0;
  std::size_t workspace_elements = 0;   // Sequential::workspace_elements()
  std::size_t element_size = 4;         // the model's (J as built)
  std::size_t system_element_size = 0;  // A, g, the solver, stored J; 0: element_size
  SolverWorkspace solver = SolverWorkspace::kCholesky;
  std::size_t budget_bytes = 0;
  std::size_t max_slice_samples = 0;    // 0: no cap
  std::size_t extra_system_elements = 0;  // other fixed buffers of the system's precision
  std::size_t extra_model_elements = 0;   // other fixed buffers of the model's precision
};

struct MemoryPlan {
  std::size_t budget_bytes = 0;
  std::size_t fixed_bytes = 0;
  std::size_t normal_matrix_bytes = 0;   // A (or the dual Gram) alone
  std::size_t bytes_per_slice_sample = 0;
  std::size_t slice_samples = 0;
  std::size_t slices_per_batch = 0;
  std::size_t peak_bytes = 0;            // fixed + one slice
  std::string describe() const;
};

// Throws MemoryPlanError when even a one-sample slice does not fit.
MemoryPlan plan_memory(const MemoryPlanInput& input);

// Human-readable byte count ("1.50 GiB").
std::string format_bytes(std::size_t bytes);

}  // namespace lmtrain
