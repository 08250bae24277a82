#include "lmtrain/train/summary.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <utility>

#include "lmtrain/solve/memory_plan.h"
#include "lmtrain/train/summary_text.h"

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
  host_reads += step.host_reads;
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

// The report's text in its two layouts: a key and its value, and an option as given and as used.
struct ReportText {
  std::string text;

  void line(std::string_view key, const std::string& value) {
    text += fmt::format("{:<34}{}\n", key, value);
  }
  void given_used(std::string_view key, const std::string& given, const std::string& used) {
    text += fmt::format("{:<34}{:<22}{}\n", key, given, used);
  }
};

// How the work is spread: the ranks, their shares of a batch and their devices.
void rank_lines(const Summary& s, ReportText& r) {
  const bool sharded_a = s.linear_solver_used == LinearSolverType::kDistributedCholesky;
  r.line("Ranks", fmt::format("{} ({}){}", s.ranks, s.communicator,
                              s.ranks <= 1 ? ""
                              : sharded_a  ? "; batches sharded, A reduce-scattered over the grid"
                                           : "; batches sharded, A and g all-reduced"));
  if (s.ranks > 1) {
    std::string shares;
    for (std::size_t i = 0; i < s.batch_shares.size(); ++i)
      shares += fmt::format("{}{}: {:.1f} %", i == 0 ? "" : ", ", i, 100 * s.batch_shares[i]);
    r.line("Batch shares", fmt::format("{} ({})", to_string(s.balance), shares));
  }
  for (std::size_t i = 0; i < s.rank_devices.size(); ++i)
    r.line(i == 0 ? "Device of each rank" : "", fmt::format("{}: {}", i, s.rank_devices[i]));
}

// The problem: model, loss, precision, where it ran and its sizes.
void problem_lines(const Summary& s, ReportText& r) {
  r.line("Model", s.model);
  r.line("Loss", s.loss);
  r.line("Precision", s.precision);
  if (!s.precision_reason.empty()) r.line("  because", s.precision_reason);
  r.line("Device", s.device);
  rank_lines(s, r);
  r.line("Parameters", fmt::format("{}", s.num_params));
  const auto weighed = [](double weight) {
    return weight > 0 ? fmt::format(" (weighted: total weight {:.6g})", weight) : std::string();
  };
  r.line("Training samples", fmt::format("{}{}", s.training_samples, weighed(s.training_weight)));
  if (s.validation_samples > 0)
    r.line("Validation samples",
           fmt::format("{}{}", s.validation_samples, weighed(s.validation_weight)));
  r.line("Residuals per sample", fmt::format("{}", s.residuals_per_sample));
  r.line("Batch size",
         fmt::format("{} samples, {} residual rows, {} batches per epoch", s.batch_size,
                     s.batch_size * s.residuals_per_sample, s.batches_per_epoch));
}

// The options as given next to the options as used, each fallback with its reason.
void option_lines(const Summary& s, ReportText& r) {
  r.text += fmt::format("\n{:<34}{:<22}{}\n", "", "Given", "Used");
  r.given_used("Linear solver", std::string(to_string(s.linear_solver_given)),
               std::string(to_string(s.linear_solver_used)));
  if (!s.linear_solver_reason.empty()) r.line("  because", s.linear_solver_reason);
  const std::string schedule =
      fmt::format("{}{}", to_string(s.damping), s.damping_per_sample ? ", λ per sample" : "");
  r.given_used("Damping", schedule, schedule);
  r.given_used("Damping matrix", std::string(to_string(s.damping_matrix)),
               std::string(to_string(s.damping_matrix)));
  r.given_used(
      "Slice (samples)",
      s.max_slice_samples_given == 0 ? "auto" : fmt::format("≤ {}", s.max_slice_samples_given),
      fmt::format("{}", s.slice_samples));
  if (s.slice_halvings > 0)
    r.line("  because", fmt::format("halved {} time(s) after allocation failures; last: {}",
                                    s.slice_halvings, s.slice_halving_cause));
  r.given_used("Memory budget",
               s.memory_budget_given == 0 ? "auto" : fmt::format("{} B", s.memory_budget_given),
               "see plan");
}

// The memory plan next to what was measured, per rank with several.
void memory_lines(const Summary& s, ReportText& r) {
  r.line("Memory plan", s.memory_plan);
  if (!s.distribution.empty()) r.line("Distributed A", s.distribution);
  if (s.peak_device_bytes > 0)
    r.line("Device memory",
           fmt::format("measured peak {} (planned {} for the step; the rest is "
                       "the data sets and evaluation buffers)",
                       format_bytes(s.peak_device_bytes), format_bytes(s.planned_peak_bytes)));
  for (std::size_t i = 0; i < s.rank_peak_bytes.size(); ++i)
    r.line(i == 0 ? "Measured peak of each rank" : "",
           fmt::format("{}: {} ({:.2f} × the step's plan)", i, format_bytes(s.rank_peak_bytes[i]),
                       s.planned_peak_bytes > 0 ? static_cast<double>(s.rank_peak_bytes[i]) /
                                                      static_cast<double>(s.planned_peak_bytes)
                                                : 0.0));
}

void loss_lines(const Summary& s, ReportText& r) {
  r.line("Initial training loss", fmt::format("{:.6e}", s.initial_loss));
  r.line("Final training loss", fmt::format("{:.6e}", s.final_loss));
  if (s.validation_samples > 0) {
    r.line("Initial validation loss", fmt::format("{:.6e}", s.initial_validation_loss));
    r.line("Final validation loss", fmt::format("{:.6e}", s.final_validation_loss));
    r.line("Best validation loss", fmt::format("{:.6e} (epoch {}){}", s.best_validation_loss,
                                               s.best_epoch, s.restored_best ? ", restored" : ""));
  }
}

// The residual blocks' losses of the last step, one line each.
void block_lines(const Summary& s, ReportText& r) {
  if (s.final_block_losses.empty()) return;
  r.text += "Residual blocks (last step, before its update)\n";
  for (const BlockLoss& b : s.final_block_losses)
    r.text += fmt::format("  {:<32}{:.6e}\n", b.name, b.loss);
}

// Why a fit ran without geodesic acceleration (SolverOptions::geodesic_acceleration).
std::string geodesic_off_reason(const Summary& s) {
  if (s.linear_solver_used != LinearSolverType::kCholesky &&
      s.linear_solver_used != LinearSolverType::kEigen)
    return fmt::format("off: not used with the {} solver", to_string(s.linear_solver_used));
  // Auto's own rule (geodesic_acceleration_for), asked for this loss with the option unset.
  const std::optional<LossKind> loss = parse_loss(s.loss);
  if (loss && !geodesic_acceleration_for(SolverOptions{}, *loss))
    return fmt::format(
        "off: the default for the {} loss (SolverOptions::geodesic_acceleration = true "
        "turns it on)",
        s.loss);
  return "off: SolverOptions::geodesic_acceleration = false";
}

// The steps: their counts, their attempts, the geodesic correction's record and the last λ.
void step_lines(const Summary& s, ReportText& r) {
  r.line("Epochs", fmt::format("{}", s.epochs));
  r.line("LM steps", fmt::format("{} ({} accepted, {} abandoned after every attempt failed)",
                                 s.steps, s.accepted_steps, s.abandoned_steps));
  r.line("Trials", fmt::format("{} rejected, {} invalid (failed factorization / non-finite)",
                               s.rejected_steps, s.invalid_steps));
  const int attempts = s.accepted_steps + s.rejected_steps + s.invalid_steps;
  r.line(
      "Attempts per step",
      fmt::format("{:.3f} per accepted step",
                  s.accepted_steps > 0 ? static_cast<double>(attempts) / s.accepted_steps : 0.0));
  r.line("Host reads per LM step",
         fmt::format("{:.2f} ({:.2f} per attempt): device→host reads the step waited for",
                     s.host_reads_per_step(),
                     attempts > 0 ? static_cast<double>(s.host_reads) / attempts : 0.0));
  if (s.geodesic_acceleration)
    r.line("Geodesic acceleration",
           fmt::format("{} attempts corrected, {} kept the plain step (correction over "
                       "geodesic_ratio), {} skipped it (backoff after refusals)",
                       s.geodesic_applied, s.geodesic_refused, s.geodesic_skipped));
  else
    r.line("Geodesic acceleration", geodesic_off_reason(s));
  r.line("Final lambda", fmt::format("{:.3e}", s.final_lambda));
}

// ard: the total γ, then each relevance group's ρ and γ in a table.
void ard_lines(const Summary& s, ReportText& r) {
  r.line("Regularization",
         fmt::format("ard, effective parameters γ = {:.1f} of {} in {} relevance groups",
                     s.effective_parameters, s.num_params, s.penalty_groups.size()));
  r.text +=
      fmt::format("  {:<30}{:>8}{:>18}{:>14}\n", "group", "size", "weight decay ρ", "effective γ");
  for (const Summary::PenaltyGroup& g : s.penalty_groups)
    r.text += fmt::format("  {:<30}{:>8}{:>18.3e}{:>14.2f}\n", g.name, g.size, g.weight_decay,
                          g.effective_parameters);
}

void regularization_lines(const Summary& s, ReportText& r) {
  if (s.regularization == Regularization::kArd)
    ard_lines(s, r);
  else if (s.regularization != Regularization::kNone)
    r.line("Regularization",
           s.effective_parameters > 0
               ? fmt::format("{}, weight decay ρ = {:.3e}, effective parameters γ = {:.1f} of {}",
                             to_string(s.regularization), s.final_weight_decay,
                             s.effective_parameters, s.num_params)
               : fmt::format("{}, weight decay ρ = {:.3e}", to_string(s.regularization),
                             s.final_weight_decay));
  // The evidence update's degenerate end: γ close to the residual count N means β = (N − γ)/‖r‖²
  // is no longer determined and the fit interpolates (seen with single-ρ bayesian when N ≤ n).
  const double rows = static_cast<double>(s.batch_size * s.residuals_per_sample);
  if (is_evidence_based(s.regularization) && rows > 0 && s.effective_parameters > 0.9 * rows)
    r.line("Warning", fmt::format("effective parameters γ = {:.1f} are {:.0f}% of the {} residuals "
                                  "per batch: the evidence no longer bounds the fit, which may "
                                  "interpolate the data; try regularization = \"ard\", a larger "
                                  "batch or a validation set",
                                  s.effective_parameters, 100.0 * s.effective_parameters / rows,
                                  s.batch_size * s.residuals_per_sample));
}

// A float32 system asked for under bayesian or ard (precision = "float32"; auto would have
// chosen float64 for them): say what it costs.
void precision_warnings(const Summary& s, ReportText& r) {
  if (s.float32_system && is_evidence_based(s.regularization))
    r.line("Warning",
           fmt::format("{} regularization with a float32 system: its evidence update reads "
                       "A's small eigenvalues, which float32 rounding swamps; precision "
                       "= \"auto\" or \"mixed\" solves in float64",
                       to_string(s.regularization)));
}

// Each phase's seconds and share of the total, what no phase accounts for, and the threads.
void time_table(const Summary& s, ReportText& r) {
  r.text += "\nTime                              Seconds     Share\n";
  const double total = s.total_seconds > 0 ? s.total_seconds : 1.0;
  double accounted = 0;
  for (std::size_t p = 0; p < static_cast<std::size_t>(Phase::kCount); ++p) {
    const auto phase = static_cast<Phase>(p);
    if (phase == Phase::kOther) continue;
    accounted += s.times[phase];
    if (s.times[phase] == 0) continue;
    r.text += fmt::format("  {:<32}{:>7.3f}    {:>5.1f}%\n", phase_name(phase), s.times[phase],
                          100.0 * s.times[phase] / total);
  }
  const double other = std::max(0.0, s.total_seconds - accounted);
  r.text += fmt::format("  {:<32}{:>7.3f}    {:>5.1f}%\n", "other (batching, bookkeeping)", other,
                        100.0 * other / total);
  r.text += fmt::format("  {:<32}{:>7.3f}\n", "total", s.total_seconds);
  if (s.steps > 0)
    r.text += fmt::format("  {:<32}{:>7.3f} ms\n", "per LM step", 1e3 * s.total_seconds / s.steps);
  if (!s.threads.empty()) r.text += "\n" + s.threads;
  if (!s.normal_matrix.empty()) r.text += "\n" + s.normal_matrix + "\n";
}

}  // namespace

std::string Summary::brief_report() const {
  return fmt::format("lmtrain: {} epochs, loss {:.6e} → {:.6e}, termination: {}", epochs,
                     initial_loss, final_loss, to_string(termination));
}

std::string Summary::full_report() const {
  ReportText r;
  r.text += "\nlmtrain report\n==============\n\n";
  problem_lines(*this, r);
  option_lines(*this, r);
  for (const std::string& line : options_ignored) r.line("Option ignored", line);
  memory_lines(*this, r);
  r.text += "\n";
  loss_lines(*this, r);
  block_lines(*this, r);
  step_lines(*this, r);
  regularization_lines(*this, r);
  precision_warnings(*this, r);
  time_table(*this, r);
  r.text += "\n";
  r.line("Termination",
         fmt::format("{}{}", to_string(termination), converged() ? " (converged)" : ""));
  if (!message.empty()) r.line("", message);
  return r.text;
}

void rewrite_text(Summary& s, const std::function<std::string(std::string)>& rewrite) {
  for (std::string* text :
       {&s.precision_reason, &s.linear_solver_reason, &s.memory_plan, &s.slice_halving_cause,
        &s.distribution, &s.message, &s.threads, &s.normal_matrix})
    *text = rewrite(std::move(*text));
  for (std::string& line : s.options_ignored) line = rewrite(std::move(line));
}

}  // namespace lmtrain
