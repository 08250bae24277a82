#include "lmtrain/solve/ignored_options.h"

#include <fmt/format.h>

namespace lmtrain {
namespace {

class Notes {
 public:
  // One line when `set` (the option differs from its default) and `unused` (the plan does not
  // read it).
  void add(bool set, bool unused, std::string line) {
    if (set && unused) lines_.push_back(std::move(line));
  }
  std::vector<std::string> take() { return std::move(lines_); }

 private:
  std::vector<std::string> lines_;
};

}  // namespace

std::vector<std::string> ignored_options(const SolverOptions& o, const StepPlan& plan) {
  const SolverOptions d;
  Notes n;
  const Regularization reg = o.regularization;
  n.add(o.weight_decay != d.weight_decay, reg == Regularization::kNone,
        fmt::format("SolverOptions::weight_decay = {}: ignored, SolverOptions::regularization is "
                    "none (l2, bayesian and ard use it)",
                    o.weight_decay));
  n.add(o.ard_initial_scale != d.ard_initial_scale || o.ard_max_factor != d.ard_max_factor,
        reg != Regularization::kArd,
        fmt::format("SolverOptions::ard_initial_scale / ard_max_factor: ignored, "
                    "SolverOptions::regularization is {} (ard uses them)",
                    to_string(reg)));
  n.add(o.lambda_increase != d.lambda_increase || o.lambda_decrease != d.lambda_decrease,
        o.damping == DampingType::kNielsen,
        "SolverOptions::lambda_increase / lambda_decrease: ignored, Nielsen damping sets its own "
        "factors from the gain ratio (SolverOptions::damping = multiplicative uses them)");
  n.add(o.marquardt_min != d.marquardt_min || o.marquardt_max != d.marquardt_max,
        o.damping_matrix == DampingMatrix::kIdentity,
        "SolverOptions::marquardt_min / marquardt_max: ignored, the damping matrix is the "
        "identity (SolverOptions::damping_matrix = marquardt uses them)");
  n.add(o.geodesic_ratio != d.geodesic_ratio || o.geodesic_step != d.geodesic_step ||
            o.geodesic_backoff_max != d.geodesic_backoff_max,
        !plan.geodesic(),
        fmt::format("SolverOptions::geodesic_ratio / geodesic_step / geodesic_backoff_max: "
                    "ignored, this run takes no geodesic correction (the {} solver, or "
                    "SolverOptions::geodesic_acceleration off)",
                    to_string(plan.solver())));
  n.add(o.cg_forcing != d.cg_forcing || o.cg_max_iterations != d.cg_max_iterations,
        plan.solver() != LinearSolverType::kCg,
        fmt::format("SolverOptions::cg_forcing / cg_max_iterations: ignored, the linear solver is "
                    "{} (cg uses them)",
                    to_string(plan.solver())));
  n.add(o.distributed_block_size != d.distributed_block_size,
        plan.solver() != LinearSolverType::kDistributedCholesky,
        fmt::format("SolverOptions::distributed_block_size = {}: ignored, the linear solver is {} "
                    "(distributed_cholesky uses it)",
                    o.distributed_block_size, to_string(plan.solver())));
  return n.take();
}

}  // namespace lmtrain
