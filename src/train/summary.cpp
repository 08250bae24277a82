#include "lmtrain/train/summary.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "lmtrain/solve/memory_plan.h"

namespace lmtrain {

void TrainingProgress::count(const StepReport& step) {
  ++steps;
  accepted_steps += step.accepted ? 1 : 0;
  abandoned_steps += step.accepted || step.termination != TerminationReason::kNone ? 0 : 1;
  rejected_steps += step.rejected;
  invalid_steps += step.invalid;
  geodesic_applied += step.geodesic_applied;
  geodesic_refused += step.geodesic_refused;
  geodesic_skipped += step.geodesic_skipped;
  if (!step.block_losses.empty()) final_block_losses = step.block_losses;
}

void Summary::name_input_groups(const ModelSpec& spec, const std::vector<std::string>& columns) {
  if (penalty_groups.empty() || !spec.input_shape().is_flat() || columns.size() != spec.inputs())
    return;
  const std::size_t inputs = spec.relevance_groups().input_groups;
  for (std::size_t i = 0; i < inputs && i < penalty_groups.size(); ++i)
    penalty_groups[i].name += fmt::format(" ({})", columns[i]);
}

namespace {

// Why a fit ran without geodesic acceleration (SolverOptions::geodesic_acceleration).
std::string geodesic_off_reason(const Summary& s) {
  if (s.linear_solver_used != LinearSolverType::kCholesky &&
      s.linear_solver_used != LinearSolverType::kEigen)
    return fmt::format("off: not used with the {} solver", to_string(s.linear_solver_used));
  // Auto's own rule (geodesic_acceleration_for), asked for this loss with the option unset.
  const std::optional<LossKind> loss = parse_loss(s.loss);
  if (loss && !geodesic_acceleration_for(SolverOptions{}, *loss))
    return fmt::format(
        "off: the default for the {} loss (solver.geodesic_acceleration = true "
        "turns it on)",
        s.loss);
  return "off: solver.geodesic_acceleration = false";
}

// A float32 system asked for under bayesian or ard (precision = "float32"; auto would have
// chosen float64 for them): say what it costs.
template <typename Line>
void precision_warnings(const Summary& s, Line&& line) {
  if (s.float32_system && is_evidence_based(s.regularization))
    line("Warning",
         fmt::format("{} regularization with a float32 system: its evidence update reads "
                     "A's small eigenvalues, which float32 rounding swamps; precision "
                     "= \"auto\" or \"mixed\" solves in float64",
                     to_string(s.regularization)));
}

// The residual blocks' losses of the last step, one line each.
void block_lines(const Summary& s, std::string& out) {
  if (s.final_block_losses.empty()) return;
  out += "Residual blocks (last step, before its update)\n";
  for (const BlockLoss& b : s.final_block_losses)
    out += fmt::format("  {:<32}{:.6e}\n", b.name, b.loss);
}

}  // namespace

std::string Summary::brief_report() const {
  return fmt::format("lmtrain: {} epochs, loss {:.6e} → {:.6e}, termination: {}", epochs,
                     initial_loss, final_loss, to_string(termination));
}

std::string Summary::full_report() const {
  std::string s;
  auto line = [&s](std::string_view key, const std::string& value) {
    s += fmt::format("{:<34}{}\n", key, value);
  };
  auto given_used = [&s](std::string_view key, const std::string& given, const std::string& used) {
    s += fmt::format("{:<34}{:<22}{}\n", key, given, used);
  };
  s += "\nlmtrain report\n==============\n\n";
  line("Model", model);
  line("Loss", loss);
  line("Precision", precision);
  if (!precision_reason.empty()) line("  because", precision_reason);
  line("Device", device);
  const bool sharded_a = linear_solver_used == LinearSolverType::kDistributedCholesky;
  line("Ranks", fmt::format("{} ({}){}", ranks, communicator,
                            ranks <= 1  ? ""
                            : sharded_a ? "; batches sharded, A reduce-scattered over the grid"
                                        : "; batches sharded, A and g all-reduced"));
  if (ranks > 1) {
    std::string shares;
    for (std::size_t r = 0; r < batch_shares.size(); ++r)
      shares += fmt::format("{}{}: {:.1f} %", r == 0 ? "" : ", ", r, 100 * batch_shares[r]);
    line("Batch shares", fmt::format("{} ({})", to_string(balance), shares));
  }
  for (std::size_t r = 0; r < rank_devices.size(); ++r)
    line(r == 0 ? "Device of each rank" : "", fmt::format("{}: {}", r, rank_devices[r]));
  line("Parameters", fmt::format("{}", num_params));
  line("Training samples", fmt::format("{}", training_samples));
  if (validation_samples > 0) line("Validation samples", fmt::format("{}", validation_samples));
  line("Residuals per sample", fmt::format("{}", residuals_per_sample));
  line("Batch size", fmt::format("{} samples, {} residual rows, {} batches per epoch", batch_size,
                                 batch_size * residuals_per_sample, batches_per_epoch));

  s += fmt::format("\n{:<34}{:<22}{}\n", "", "Given", "Used");
  given_used("Linear solver", std::string(to_string(linear_solver_given)),
             std::string(to_string(linear_solver_used)));
  if (!linear_solver_reason.empty()) line("  because", linear_solver_reason);
  const std::string schedule =
      fmt::format("{}{}", to_string(damping), damping_per_sample ? ", λ per sample" : "");
  given_used("Damping", schedule, schedule);
  given_used("Damping matrix", std::string(to_string(damping_matrix)),
             std::string(to_string(damping_matrix)));
  given_used("Slice (samples)",
             max_slice_samples_given == 0 ? "auto" : fmt::format("≤ {}", max_slice_samples_given),
             fmt::format("{}", slice_samples));
  if (slice_halvings > 0)
    line("  because", fmt::format("halved {} time(s) after allocation failures; last: {}",
                                  slice_halvings, slice_halving_cause));
  given_used("Memory budget",
             memory_budget_given == 0 ? "auto" : fmt::format("{} B", memory_budget_given),
             "see plan");
  line("Memory plan", memory_plan);
  if (!distribution.empty()) line("Distributed A", distribution);
  if (peak_device_bytes > 0)
    line("Device memory",
         fmt::format("measured peak {} (planned {} for the step; the rest is "
                     "the data sets and evaluation buffers)",
                     format_bytes(peak_device_bytes), format_bytes(planned_peak_bytes)));
  for (std::size_t r = 0; r < rank_peak_bytes.size(); ++r)
    line(r == 0 ? "Measured peak of each rank" : "",
         fmt::format("{}: {} ({:.2f} × the step's plan)", r, format_bytes(rank_peak_bytes[r]),
                     planned_peak_bytes > 0 ? static_cast<double>(rank_peak_bytes[r]) /
                                                  static_cast<double>(planned_peak_bytes)
                                            : 0.0));

  s += "\n";
  line("Initial training loss", fmt::format("{:.6e}", initial_loss));
  line("Final training loss", fmt::format("{:.6e}", final_loss));
  if (validation_samples > 0) {
    line("Initial validation loss", fmt::format("{:.6e}", initial_validation_loss));
    line("Final validation loss", fmt::format("{:.6e}", final_validation_loss));
    line("Best validation loss", fmt::format("{:.6e} (epoch {}){}", best_validation_loss,
                                             best_epoch, restored_best ? ", restored" : ""));
  }
  block_lines(*this, s);
  line("Epochs", fmt::format("{}", epochs));
  line("LM steps", fmt::format("{} ({} accepted, {} abandoned after every attempt failed)", steps,
                               accepted_steps, abandoned_steps));
  line("Trials", fmt::format("{} rejected, {} invalid (failed factorization / non-finite)",
                             rejected_steps, invalid_steps));
  const int attempts = accepted_steps + rejected_steps + invalid_steps;
  line("Attempts per step",
       fmt::format("{:.3f} per accepted step",
                   accepted_steps > 0 ? static_cast<double>(attempts) / accepted_steps : 0.0));
  if (geodesic_acceleration)
    line("Geodesic acceleration",
         fmt::format("{} attempts corrected, {} kept the plain step (correction over "
                     "geodesic_ratio), {} skipped it (backoff after refusals)",
                     geodesic_applied, geodesic_refused, geodesic_skipped));
  else
    line("Geodesic acceleration", geodesic_off_reason(*this));
  line("Final lambda", fmt::format("{:.3e}", final_lambda));
  if (regularization == Regularization::kArd) {
    line("Regularization",
         fmt::format("ard, effective parameters γ = {:.1f} of {} in {} relevance groups",
                     effective_parameters, num_params, penalty_groups.size()));
    s += fmt::format("  {:<30}{:>8}{:>18}{:>14}\n", "group", "size", "weight decay ρ",
                     "effective γ");
    for (const PenaltyGroup& g : penalty_groups)
      s += fmt::format("  {:<30}{:>8}{:>18.3e}{:>14.2f}\n", g.name, g.size, g.weight_decay,
                       g.effective_parameters);
  } else if (regularization != Regularization::kNone)
    line("Regularization",
         effective_parameters > 0
             ? fmt::format("{}, weight decay ρ = {:.3e}, effective parameters γ = {:.1f} of {}",
                           to_string(regularization), final_weight_decay, effective_parameters,
                           num_params)
             : fmt::format("{}, weight decay ρ = {:.3e}", to_string(regularization),
                           final_weight_decay));
  // The evidence update's degenerate end: γ close to the residual count N means β = (N − γ)/‖r‖²
  // is no longer determined and the fit interpolates (seen with single-ρ bayesian when N ≤ n).
  const double rows = static_cast<double>(batch_size * residuals_per_sample);
  if (is_evidence_based(regularization) && rows > 0 && effective_parameters > 0.9 * rows)
    line("Warning", fmt::format("effective parameters γ = {:.1f} are {:.0f}% of the {} residuals "
                                "per batch: the evidence no longer bounds the fit, which may "
                                "interpolate the data; try regularization = \"ard\", a larger "
                                "batch or a validation set",
                                effective_parameters, 100.0 * effective_parameters / rows,
                                batch_size * residuals_per_sample));

  precision_warnings(*this, line);

  s += "\nTime                              Seconds     Share\n";
  const double total = total_seconds > 0 ? total_seconds : 1.0;
  double accounted = 0;
  for (std::size_t p = 0; p < static_cast<std::size_t>(Phase::kCount); ++p) {
    const auto phase = static_cast<Phase>(p);
    if (phase == Phase::kOther) continue;
    accounted += times[phase];
    if (times[phase] == 0) continue;
    s += fmt::format("  {:<32}{:>7.3f}    {:>5.1f}%\n", phase_name(phase), times[phase],
                     100.0 * times[phase] / total);
  }
  const double other = std::max(0.0, total_seconds - accounted);
  s += fmt::format("  {:<32}{:>7.3f}    {:>5.1f}%\n", "other (batching, bookkeeping)", other,
                   100.0 * other / total);
  s += fmt::format("  {:<32}{:>7.3f}\n", "total", total_seconds);
  if (steps > 0)
    s += fmt::format("  {:<32}{:>7.3f} ms\n", "per LM step", 1e3 * total_seconds / steps);
  if (!threads.empty()) s += "\n" + threads;
  if (!normal_matrix.empty()) s += "\n" + normal_matrix + "\n";

  s += "\n";
  line("Termination",
       fmt::format("{}{}", to_string(termination), converged() ? " (converged)" : ""));
  if (!message.empty()) line("", message);
  return s;
}

}  // namespace lmtrain
