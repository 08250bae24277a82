// What happened during training, in the spirit of Ceres' Solver::Summary: sizes, the options as
// given next to the options as used (so every fallback is visible, with its reason), losses, step
// counts, the termination reason and a per-phase time table.  full_report() is what a user pastes
// into a bug report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "lmtrain/core/timer.h"
#include "lmtrain/nn/model_spec.h"
#include "lmtrain/solve/lm_step.h"
#include "lmtrain/solve/solver_options.h"
#include "lmtrain/solve/termination.h"
#include "lmtrain/train/batch_shares.h"

namespace lmtrain {

struct EpochRecord {
  int epoch = 0;
  double training_loss = 0;  // reported loss on all training samples after the epoch
  double validation_loss = std::numeric_limits<double>::quiet_NaN();
  double lambda = 0;  // λ at the end of the epoch
  int accepted = 0;
  int rejected = 0;
  int invalid = 0;
  double gradient_max_norm = 0;  // of the epoch's last step
  double step_norm = 0;          // of the epoch's last accepted step
  double seconds = 0;            // wall clock since training started
  // Each residual block's loss (StepReport::block_losses) of the epoch's last step: on that
  // step's batch at its linearization point, before its update (the training loss above is
  // measured after the epoch on every sample, with no blocks).  Empty when the source declares
  // none.
  std::vector<BlockLoss> block_losses;
};

// A run's counters and losses so far: what a checkpoint carries and a resumed run continues,
// copied whole (Summary is one).
struct TrainingProgress {
  double initial_loss = 0;
  double final_loss = 0;
  double initial_validation_loss = std::numeric_limits<double>::quiet_NaN();
  double final_validation_loss = std::numeric_limits<double>::quiet_NaN();
  double best_validation_loss = std::numeric_limits<double>::quiet_NaN();
  int best_epoch = 0;
  int epochs = 0;
  int steps = 0;
  int accepted_steps = 0;
  int rejected_steps = 0;    // valid trials that did not lower the loss
  int invalid_steps = 0;     // failed factorizations or non-finite steps
  int abandoned_steps = 0;   // steps whose attempts all failed
  int geodesic_applied = 0;  // attempts whose trial included the geodesic correction
  int geodesic_refused = 0;  // attempts whose correction failed the ratio test
  int geodesic_skipped = 0;  // attempts that did not compute it (after refusals: GeodesicBackoff)
  // Device→host reads the LM steps waited for (StepReport::host_reads, summed): a GPU idles
  // through each, so a step's count says how often it drains the queue.
  std::int64_t host_reads = 0;
  std::vector<EpochRecord> history;
  // The block losses of the run's last step (StepReport::block_losses; empty without blocks).
  // They describe the parameters that step started from, also when the best validation model
  // is restored afterwards.
  std::vector<BlockLoss> final_block_losses;

  // Counts one step's attempts and reads (and keeps its block losses).
  void count(const StepReport& step);
  // host_reads per LM step (0 before the first).
  double host_reads_per_step() const {
    return steps > 0 ? static_cast<double>(host_reads) / steps : 0.0;
  }
};

struct Summary : TrainingProgress {
  // Problem.
  std::string model;
  std::string loss;
  std::string precision;
  std::string precision_reason;  // why precision = auto chose it (empty when it was asked for)
  bool float32_system = false;   // A, g and the solve in float32 (a float32 model, not mixed)
  std::string device;
  std::string communicator = "local";  // "local" or "mpi (…, R ranks)"
  int ranks = 1;
  // The device each rank trained on, in rank order, e.g. "cuda:1 on node7 (node-local rank 1
  // mod 2 visible CUDA devices)"; filled by the caller that chose the devices (the CLI gathers
  // it from every rank), empty when nobody did.
  std::vector<std::string> rank_devices;
  std::size_t num_params = 0;
  std::size_t training_samples = 0;
  std::size_t validation_samples = 0;
  // Σ of the sets' sample weights (train/dataset.h); 0: the set is unweighted.
  double training_weight = 0;
  double validation_weight = 0;
  std::size_t batch_size = 0;
  std::size_t residuals_per_sample = 0;
  std::size_t batches_per_epoch = 0;

  // Options given vs used.
  LinearSolverType linear_solver_given = LinearSolverType::kAuto;
  LinearSolverType linear_solver_used = LinearSolverType::kCholesky;
  std::string linear_solver_reason;
  DampingType damping = DampingType::kMultiplicative;
  DampingMatrix damping_matrix = DampingMatrix::kIdentity;
  bool damping_per_sample = false;      // SolverOptions::damping_per_sample: λ multiplies B·D
  std::size_t memory_budget_given = 0;  // 0: automatic
  std::size_t max_slice_samples_given = 0;
  std::string memory_plan;
  std::size_t planned_peak_bytes = 0;  // the plan's figure for the LM step
  std::size_t peak_device_bytes = 0;   // measured: the most lmtrain held on the device during fit
  std::size_t slice_samples = 0;       // as used at the end (after any halving)
  int slice_halvings = 0;              // run-time allocation failures answered by halving
  std::string slice_halving_cause;     // the last one's message
  // distributed_cholesky: the process grid and A's shares (StepPlan::distribution); else empty.
  std::string distribution;
  // With several ranks: each rank's measured peak device bytes, in rank order.
  std::vector<std::size_t> rank_peak_bytes;
  // TrainerOptions::balance and each rank's share of a batch at the end, in rank order.
  BatchBalance balance = BatchBalance::kEqual;
  std::vector<double> batch_shares;

  bool geodesic_acceleration = false;  // as used (off with cg and the dual form)
  // Options given that this run does not use (solve/ignored_options.h; the tf32 and
  // normal_matrix notes of normal_matrix are the device's): one line each.
  std::vector<std::string> options_ignored;

  // Outcome (the counters and losses are TrainingProgress's).
  bool restored_best = false;
  double final_lambda = 0;
  Regularization regularization = Regularization::kNone;
  double final_weight_decay = 0;    // ρ at the end (one-group regularizations; ard: 0)
  double effective_parameters = 0;  // γ of the last evidence update (bayesian, ard; 0: none)
  // ard: each relevance group's ρ and γ at the end (ModelSpec::relevance_groups' order).
  struct PenaltyGroup {
    std::string name;
    std::size_t size = 0;
    double weight_decay = 0;
    double effective_parameters = 0;
  };
  std::vector<PenaltyGroup> penalty_groups;

  TerminationReason termination = TerminationReason::kNone;
  std::string message;  // details of the termination

  PhaseTimes times;
  double total_seconds = 0;
  // The host threads of each phase and why (Backend::thread_report; empty on a GPU).
  std::string threads;
  // How A = JᵀJ was formed and why, one line per shape of J: the CUDA backend's measured choice
  // between SYRK and split-K (LinearAlgebra::normal_matrix_report), and in mixed precision the
  // widening block measured (NormalEquationsBuilder::widening_report); empty on the CPU (SYRK,
  // whole slices) unless an option was ignored.
  std::string normal_matrix;

  bool converged() const { return is_convergence(termination); }
  std::string brief_report() const;
  std::string full_report() const;

  // ard's "input i" groups (the first ModelSpec::relevance_groups().input_groups of
  // penalty_groups) named after the data's columns too: "input 3" becomes "input 3 (age)".
  // Nothing unless `spec` has a flat input with one column name per input.
  void name_input_groups(const ModelSpec& spec, const std::vector<std::string>& columns);
};

}  // namespace lmtrain
